//! The test control plane is a live cluster: kube-controller-manager's controllers act on what the
//! tests and the modules write, as on a real one (see `kube_client::testenv`).

use std::process::Command;
use std::time::Duration;

use kube_client::objects::{known, Resource};
use kube_client::testenv::{unique, TestEnv, NODE_MONITOR_GRACE_SECONDS};
use serde_json::{json, Value};

fn env() -> &'static TestEnv {
    TestEnv::shared()
}

fn ready_node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
}

fn condition(node: &Value, kind: &str) -> Option<String> {
    node.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

/// The effects of the node's taints with `key`.
fn taint_effects(node: &Value, key: &str) -> Vec<String> {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter(|t| t["key"] == key)
                .filter_map(|t| t["effect"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A node whose kubelet stops is judged by the node-lifecycle controller: `Ready=Unknown` and the
/// `unreachable` taints once the grace period has passed; a node whose kubelet keeps renewing its
/// Lease stays `Ready=True` past that same period.
#[test]
fn a_node_whose_kubelet_stops_becomes_unknown_and_unreachable_the_others_stay_ready() {
    let env = env();
    let admin = env.admin();
    let nodes = known::nodes();
    let (alive, dead) = (unique("alive"), unique("dead"));
    for name in [&alive, &dead] {
        admin.create(&nodes, None, &ready_node(name)).unwrap();
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        admin
            .patch_status(&nodes, None, name, &json!({"status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}}))
            .unwrap();
    }
    env.stop_kubelet(&dead);
    admin
        .wait_until(
            &nodes,
            None,
            &dead,
            |n| {
                let mut pending = Vec::new();
                if condition(n, "Ready").as_deref() != Some("Unknown") {
                    pending.push("Ready=Unknown".to_string());
                }
                // NoSchedule from the condition (TaintNodesByCondition), NoExecute for eviction.
                let effects = taint_effects(n, "node.kubernetes.io/unreachable");
                for effect in ["NoSchedule", "NoExecute"] {
                    if !effects.iter().any(|e| e == effect) {
                        pending.push(format!("unreachable:{effect} taint"));
                    }
                }
                pending
            },
            Duration::from_secs(NODE_MONITOR_GRACE_SECONDS * 4),
            Duration::from_millis(500),
        )
        .unwrap_or_else(|e| panic!("the node-lifecycle controller did not judge {dead}: {e}"));
    let judged = admin.get(&nodes, None, &dead).unwrap().unwrap();
    assert_eq!(
        condition(&judged, "Ready").as_deref(),
        Some("Unknown"),
        "{judged}"
    );
    let live = admin.get(&nodes, None, &alive).unwrap().unwrap();
    assert_eq!(
        condition(&live, "Ready").as_deref(),
        Some("True"),
        "{alive} has a kubelet: {live}"
    );
    assert!(live.pointer("/spec/taints").is_none(), "{live}");
}

fn run(cmd: &str, dir: &std::path::Path) -> String {
    let out = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An approved CSR gets its certificate from the CSR-signing controller, signed by the cluster's CA;
/// one left pending gets none.
#[test]
fn approved_csrs_are_signed_by_the_cluster_ca_pending_ones_are_not() {
    use base64::Engine;
    let env = env();
    let admin = env.admin();
    let csrs = known::certificate_signing_requests();
    let dir = env.dir.join(unique("csr"));
    std::fs::create_dir_all(&dir).unwrap();
    run(
        "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout k.pem -out r.pem \
         -subj /O=proxshift-test/CN=alice 2>/dev/null",
        &dir,
    );
    let request =
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(dir.join("r.pem")).unwrap());
    let (approved, pending) = (unique("approved"), unique("pending"));
    for name in [&approved, &pending] {
        admin
            .create(
                &csrs,
                None,
                &json!({
                "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"name": name},
                "spec": {"request": request, "signerName": "kubernetes.io/kube-apiserver-client",
                         "usages": ["client auth"], "expirationSeconds": 3600}}),
            )
            .unwrap();
    }
    let mut csr = admin.get(&csrs, None, &approved).unwrap().unwrap();
    csr["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "approved by the test"}]});
    admin
        .replace_subresource(&csrs, None, &approved, "approval", &csr)
        .unwrap();
    let signed = admin
        .wait_until(
            &csrs,
            None,
            &approved,
            |c| match c.pointer("/status/certificate").and_then(Value::as_str) {
                Some(s) if !s.is_empty() => vec![],
                _ => vec!["status.certificate".to_string()],
            },
            Duration::from_secs(60),
            Duration::from_millis(200),
        )
        .unwrap();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(signed["status"]["certificate"].as_str().unwrap())
        .unwrap();
    std::fs::write(dir.join("c.pem"), pem).unwrap();
    let verified = run(
        &format!("openssl verify -CAfile {} c.pem", env.ca_path.display()),
        &dir,
    );
    assert!(verified.contains("c.pem: OK"), "{verified}");
    let still = admin.get(&csrs, None, &pending).unwrap().unwrap();
    assert!(still.pointer("/status/certificate").is_none(), "{still}");
}

/// A new namespace gets its `default` service account, and a token Secret for it is filled in by the
/// token controller; deleting the namespace removes it and what it held.
#[test]
fn service_accounts_tokens_and_namespace_deletion_are_done_by_the_controllers() {
    let env = env();
    let admin = env.admin();
    let ns = unique("live");
    admin
        .create(
            &known::namespaces(),
            None,
            &json!({"metadata": {"name": ns}}),
        )
        .unwrap();
    let sas = Resource::new("v1", "ServiceAccount", "serviceaccounts", true);
    admin
        .wait_until(
            &sas,
            Some(&ns),
            "default",
            |_| vec![],
            Duration::from_secs(60),
            Duration::from_millis(200),
        )
        .expect("the service-account controller creates `default`");
    admin
        .create(&known::secrets(), Some(&ns), &json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "default-token", "annotations": {"kubernetes.io/service-account.name": "default"}}}))
        .unwrap();
    admin
        .wait_until(
            &known::secrets(),
            Some(&ns),
            "default-token",
            |s| match s.pointer("/data/token") {
                Some(_) => vec![],
                None => vec!["data.token".to_string()],
            },
            Duration::from_secs(60),
            Duration::from_millis(200),
        )
        .expect("the token controller fills the Secret");
    admin.delete(&known::namespaces(), None, &ns).unwrap();
    admin
        .wait_deleted(
            &known::namespaces(),
            None,
            &ns,
            Duration::from_secs(90),
            Duration::from_millis(500),
        )
        .expect("the namespace controller finalises the namespace");
}
