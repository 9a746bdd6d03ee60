//! Start the test etcd + kube-apiserver (+ controller-manager) with the fixture CRDs loaded, print its
//! coordinates as one JSON line, and keep it running until stdin closes. The Python (ansible-playbook)
//! tests use this, so both test suites share one way of running the API server.
//!
//! `cargo run -p kube-client --features testenv --example testenv`

use std::io::Read;

use kube_client::testenv::{TestEnv, ADMIN_TOKEN, KUBECONFIG_TOKEN, VIEWER_TOKEN};

fn main() {
    let env = TestEnv::with_crds();
    let info = serde_json::json!({
        "url": env.url,
        "ca_cert": env.ca_path,
        "wrong_ca_cert": env.wrong_ca_path,
        "server_cert": env.server_cert,
        "server_key": env.server_key,
        "named_cert": env.named_cert,
        "named_key": env.named_key,
        "admin_cert_kubeconfig": env.admin_cert_kubeconfig,
        "admin_token": ADMIN_TOKEN,
        "viewer_token": VIEWER_TOKEN,
        "kubeconfig_token": KUBECONFIG_TOKEN,
        "controller_manager": env.controller_manager,
        "dir": env.dir,
    });
    println!("{info}");
    // Until the test session closes our stdin; then the watchdog stops the servers.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
