//! What servers and users hand the modules as text, read by the pure parsers: kubeconfigs (cluster_auth,
//! acm_import, every OpenShift module), PEM certificates and private keys (cluster_config's kept
//! certificates, `proxshift certs`), SAN coverage, and the error bodies of the Proxmox and Kubernetes
//! APIs (whatever a server or a proxy in between answers). Never a panic; the answers hold together.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match sel % 5 {
        0 => kubeconfig(&text),
        1 => pem(&text),
        2 => {
            // A SAN list and a hostname, separated by the first newline.
            let (sans, host) = text.split_once('\n').unwrap_or((&text, "api.example.com"));
            let sans: Vec<String> = sans.split(',').map(str::to_string).collect();
            let normal = |s: &str| s.trim().trim_end_matches('.').to_ascii_lowercase();
            if cert_check::covers(&sans, host) {
                // Covered only by the same name or by a wildcard standing for the host's first label.
                let h = normal(host);
                let parent = h.split_once('.').map(|(_, rest)| rest.to_string());
                assert!(
                    sans.iter().map(|s| normal(s)).any(|s| s == h
                        || parent
                            .as_deref()
                            .is_some_and(|p| s.strip_prefix("*.") == Some(p))),
                    "{host:?} is covered by {sans:?} without a matching name"
                );
            }
        }
        3 => pve_error(&text, rest),
        _ => kube_error(rest),
    }
});

fn kubeconfig(text: &str) {
    if let Ok(k) = kube_client::kubeconfig::Kubeconfig::parse(text) {
        // Referenced files are resolved against a folder that does not exist: read errors, never a panic.
        let _ = k.connection(None, Some(std::path::Path::new("/nonexistent-fuzz")));
        let _ = k.connection(
            Some("admin"),
            Some(std::path::Path::new("/nonexistent-fuzz")),
        );
    }
}

fn pem(text: &str) {
    if let Ok(ders) = cert_check::parse::certificates(text) {
        for der in ders.iter().take(4) {
            // The same text as a private key: a key that does not belong (or no key) is an error value.
            let _ = cert_check::key_matches(der, text);
        }
    }
    if let Ok(info) = cert_check::leaf(text) {
        assert!(
            info.chain_length >= 1,
            "a leaf was read, so the chain holds it"
        );
        for san in info.sans.iter().take(8) {
            let _ = cert_check::covers(&info.sans, san);
        }
    }
}

fn pve_error(text: &str, raw: &[u8]) {
    let status = 400 + u16::from(raw.first().copied().unwrap_or(0)) % 200;
    let e = pve_client::from_response(
        "POST",
        "/nodes/pve1/qemu/100/status/start",
        status,
        "reason",
        text,
    );
    assert!(!e.to_string().is_empty(), "every API error has a message");
    let _ = (
        e.is_not_found(),
        e.is_already_running(),
        e.is_already_exists(),
        e.is_lock_timeout(),
        e.locked(),
        e.is_digest_mismatch(),
        e.is_gateway_error(),
        e.is_unauthorized(),
        e.is_transient(),
        e.status(),
    );
}

fn kube_error(raw: &[u8]) {
    let status = 400 + u16::from(raw.first().copied().unwrap_or(0)) % 200;
    let e = kube_client::KubeError::from_response("PATCH", "/api/v1/nodes/x", status, raw);
    assert_eq!(
        e.status(),
        Some(status),
        "the status survives whatever the body"
    );
    let _ = (
        e.is_not_found(),
        e.is_conflict(),
        e.is_not_served(),
        e.is_transport(),
    );
}
