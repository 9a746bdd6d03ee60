//! The kubelet CSR decision of `cluster_nodes` (and `scale.yaml`'s approvals): the request, its requestor,
//! groups and usages are whatever a CSR creator chose — anyone holding the bootstrap token, or any node.
//! Never a panic, and an approval only ever for what the machine-approver would approve: an expected node,
//! the exact subject, the right requestor, SANs the node owns (serving) or none (client), kubelet usages.
//!
//! Input: 5 selector bytes (signer, requestor, groups, usages, creation time against the VM's start),
//! then the request's DER, sent PEM-wrapped and base64-encoded as `spec.request` is.
#![no_main]

use std::collections::BTreeMap;
use std::net::IpAddr;

use base64::Engine;
use cluster_nodes::csr::{self, Csr, Expected, Kind, Verdict};
use libfuzzer_sys::fuzz_target;

const NODE: &str = "worker-0.lab.example.com";
const ADDRESSES: [&str; 2] = ["192.0.2.13", "2001:db8::13"];
const START: i64 = 1_760_000_000;

fn base64_encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn pick(bits: u8, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

fn csr_of(head: &[u8; 5], der: &[u8]) -> Csr {
    let signer = match head[0] % 3 {
        0 => csr::CLIENT_SIGNER,
        1 => csr::SERVING_SIGNER,
        _ => "kubernetes.io/legacy-unknown",
    };
    let username = match head[1] % 4 {
        0 => csr::DEFAULT_BOOTSTRAP_USER.to_string(),
        1 => format!("system:node:{NODE}"),
        2 => "system:node:worker-9.lab.example.com".to_string(),
        _ => "system:serviceaccount:default:intruder".to_string(),
    };
    let groups = pick(
        head[2],
        &[
            csr::DEFAULT_BOOTSTRAP_GROUP,
            "system:nodes",
            "system:authenticated",
        ],
    );
    let usages = pick(
        head[3],
        &[
            "digital signature",
            "key encipherment",
            "client auth",
            "server auth",
            "code signing",
        ],
    );
    let pem = format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        base64_encode(der)
    );
    Csr {
        name: "csr-fuzz".into(),
        signer: signer.into(),
        username,
        groups,
        usages,
        request: base64_encode(pem.as_bytes()),
        decided: None,
        created: Some(START + i64::from(head[4] as i8)),
    }
}

fn expected() -> Expected {
    Expected {
        nodes: BTreeMap::from([(NODE.to_string(), ADDRESSES.map(str::to_string).to_vec())]),
        bootstrap_user: csr::DEFAULT_BOOTSTRAP_USER.into(),
        bootstrap_groups: vec![csr::DEFAULT_BOOTSTRAP_GROUP.into()],
        started: BTreeMap::from([(NODE.to_string(), START)]),
        rejoin: false,
    }
}

/// What an approval implies, checked against the request as parsed again.
fn approval_holds(c: &Csr, node: &str, kind: Kind) {
    assert_eq!(node, NODE, "approved for a node that is not expected");
    let req = csr::parse_request(&c.request).expect("an approved request parses");
    assert_eq!(req.common_names, [format!("system:node:{NODE}")], "{c:?}");
    assert_eq!(req.organizations, ["system:nodes"], "{c:?}");
    assert!(req.other_sans.is_empty(), "{c:?}");
    let only = |allowed: &[&str]| c.usages.iter().all(|u| allowed.contains(&u.as_str()));
    match kind {
        Kind::Client => {
            assert_eq!(c.signer, csr::CLIENT_SIGNER);
            assert_eq!(c.username, csr::DEFAULT_BOOTSTRAP_USER, "{c:?}");
            assert!(
                c.groups.iter().any(|g| g == csr::DEFAULT_BOOTSTRAP_GROUP),
                "{c:?}"
            );
            assert!(req.dns_names.is_empty() && req.ips.is_empty(), "{c:?}");
            assert!(
                only(&["digital signature", "key encipherment", "client auth"]),
                "{c:?}"
            );
            assert!(c.usages.iter().any(|u| u == "client auth"), "{c:?}");
        }
        Kind::Serving => {
            assert_eq!(c.signer, csr::SERVING_SIGNER);
            assert_eq!(c.username, format!("system:node:{NODE}"), "{c:?}");
            assert!(c.groups.iter().any(|g| g == "system:nodes"), "{c:?}");
            assert!(!(req.dns_names.is_empty() && req.ips.is_empty()), "{c:?}");
            for d in &req.dns_names {
                assert!(
                    d.eq_ignore_ascii_case(NODE) || d.eq_ignore_ascii_case("worker-0"),
                    "DNS SAN {d} approved for {NODE}"
                );
            }
            let known: Vec<IpAddr> = ADDRESSES.iter().map(|a| a.parse().unwrap()).collect();
            assert!(req.ips.iter().all(|ip| known.contains(ip)), "{c:?}");
            assert!(
                only(&["digital signature", "key encipherment", "server auth"]),
                "{c:?}"
            );
            assert!(c.usages.iter().any(|u| u == "server auth"), "{c:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((head, der)) = data.split_first_chunk::<5>() else {
        return;
    };
    let c = csr_of(head, der);
    let exp = expected();
    let verdict = csr::decide(&c, &exp);
    match &verdict {
        Verdict::Approve { node, kind } => {
            approval_holds(&c, node, *kind);
            // Made before its VM started (beyond the clock skew): held back, whatever else holds.
            // (No Node exists and no other CSR is judged: staleness is the only hold.)
            let holds = csr::Holds::new([(&c, &verdict)], Default::default(), &exp.started);
            let held = csr::held_back(&c, node, *kind, &holds);
            let stale = c.created.unwrap() < START - csr::MAX_CLOCK_SKEW;
            assert_eq!(
                held.is_some(),
                stale,
                "{held:?} for a CSR created {:?}",
                c.created
            );
        }
        Verdict::Refused { node, reason } => {
            assert_eq!(
                node, NODE,
                "refused for a node that is not expected: {reason}"
            );
            assert!(!reason.is_empty());
        }
        Verdict::Unexpected { reason } => assert!(!reason.is_empty()),
    }
});
