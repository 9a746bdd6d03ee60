//! `state=policy` and `state=kubernetes_auth` end to end: the built module configures a real OpenBao's
//! `kubernetes` auth method against a real kube-apiserver (TLS with its CA), then a service-account
//! token from the TokenRequest API logs in — OpenBao checks it with a real TokenReview, sent with the
//! reviewer service account's token — and the Vault token it gets reads its own cluster's secrets and
//! nothing of another cluster's.

use std::path::Path;

use serde_json::{json, Value};
use vault_client::testserver::{BaoServer, KubeApi};
use vault_client::{Auth, KvVersion};

fn module(args: Value) -> Value {
    module_testkit::run_binary(Path::new(env!("CARGO_BIN_EXE_hashicorp_vault")), &args, &[])
}

fn with(base: &Value, more: Value) -> Value {
    let mut m = base.as_object().unwrap().clone();
    m.extend(more.as_object().unwrap().clone());
    Value::Object(m)
}

const NS: &str = "external-secrets";

/// The cluster side an operator of the role prepares: the namespace, the reviewer service account
/// bound to `system:auth-delegator`, and ESO's service account. Returns the reviewer's token.
fn cluster_side(kube: &KubeApi) -> String {
    kube.call(
        "POST",
        "/api/v1/namespaces",
        Some(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})),
    )
    .expect("namespace");
    kube.call(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        Some(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "vault-token-reviewer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": [{"kind": "ServiceAccount", "name": "vault-token-reviewer", "namespace": NS}]})),
    )
    .expect("binding");
    kube.service_account_token(NS, "vault-token-reviewer")
}

#[test]
fn a_cluster_service_account_reads_its_own_paths_only() {
    let kube = KubeApi::start();
    let bao = BaoServer::dev();
    let reviewer = cluster_side(&kube);
    bao.put("clusters/c1/app", json!({"password": "canary-c1-value"}));
    bao.put("clusters/c2/app", json!({"password": "canary-c2-value"}));
    let conn = json!({"url": bao.addr, "token": bao.root_token, "retries": 0});

    let policy = with(
        &conn,
        json!({"state": "policy", "name": "eso-c1",
               "rules": "path \"secret/data/clusters/c1/*\" {\n  capabilities = [\"read\"]\n}\n"}),
    );
    let auth = with(
        &conn,
        json!({"state": "kubernetes_auth", "auth_mount": "kubernetes/c1",
            "kubernetes_host": kube.url, "kubernetes_ca_cert": kube.ca_pem,
            "token_reviewer_jwt": reviewer,
            "roles": [{"name": "external-secrets", "bound_service_account_names": ["external-secrets"],
                       "bound_service_account_namespaces": [NS], "token_policies": ["eso-c1"],
                       "token_ttl": 600}]}),
    );

    // Check mode reports every change and writes nothing.
    let check = json!({"_ansible_check_mode": true, "_ansible_diff": true});
    let r = module(with(&auth, check.clone()));
    assert_eq!(r["changed"], json!(true), "{r}");
    assert_eq!(
        r["auth_changes"][0],
        json!("auth/kubernetes/c1: enabled"),
        "{r}"
    );
    assert!(
        !r.to_string().contains(&reviewer),
        "the reviewer JWT leaked: {r}"
    );
    assert_eq!(bao.root().auth_mount_type("kubernetes/c1").unwrap(), None);
    let r = module(with(&policy, check));
    assert_eq!(r["changed"], json!(true), "{r}");
    assert_eq!(bao.root().acl_policy("eso-c1").unwrap(), None);

    // Apply, then a rerun changes nothing.
    for (args, what) in [(&policy, "policy"), (&auth, "auth")] {
        let r = module(args.clone());
        assert_eq!(r["changed"], json!(true), "{what}: {r}");
        assert!(
            !r.to_string().contains(&reviewer),
            "the reviewer JWT leaked: {r}"
        );
        let r = module(args.clone());
        assert_eq!(r["changed"], json!(false), "{what} rerun: {r}");
    }
    assert_eq!(
        bao.root().read("auth/kubernetes/c1/config").unwrap()["data"]["token_reviewer_jwt_set"],
        json!(true)
    );

    // ESO's service account logs in with a TokenRequest token; OpenBao reviews it with the API.
    let eso = kube.service_account_token(NS, "external-secrets");
    let mut v = bao.client(None);
    let login = v
        .login(&Auth::Kubernetes {
            mount: "kubernetes/c1".into(),
            role: "external-secrets".into(),
            jwt: eso,
        })
        .expect("the service account logs in");
    assert!(login.policies.contains(&"eso-c1".to_string()), "{login:?}");
    let own = v
        .kv_read(KvVersion::V2, "secret", "clusters/c1/app", None)
        .unwrap();
    assert_eq!(
        own.unwrap().data.unwrap()["password"],
        json!("canary-c1-value")
    );
    let other = v
        .kv_read(KvVersion::V2, "secret", "clusters/c2/app", None)
        .expect_err("another cluster's path is denied");
    assert!(other.is_permission_denied(), "{other}");

    // Another service account of the same namespace is refused by the role.
    let intruder = kube.service_account_token(NS, "intruder");
    let e = bao
        .client(None)
        .login(&Auth::Kubernetes {
            mount: "kubernetes/c1".into(),
            role: "external-secrets".into(),
            jwt: intruder,
        })
        .expect_err("unbound service account");
    assert!(matches!(e.status(), Some(400) | Some(403)), "{e}");

    // A changed role field is converged alone.
    let moved = {
        let mut a = auth.clone();
        a["roles"][0]["token_ttl"] = json!(300);
        a
    };
    let r = module(moved);
    assert_eq!(
        r["auth_changes"],
        json!(["auth/kubernetes/c1/role/external-secrets: token_ttl"]),
        "{r}"
    );
}

#[test]
fn a_token_that_may_not_enable_auth_methods_fails_naming_the_mount_and_the_rerun_converges() {
    let bao = BaoServer::dev();
    let weak = bao.token_with_policy(
        "read-mounts",
        r#"path "sys/auth" { capabilities = ["read"] }"#,
    );
    let args = json!({"url": bao.addr, "token": weak, "retries": 0, "state": "kubernetes_auth",
        "auth_mount": "kubernetes/c9", "kubernetes_host": "https://api.c9.example.com:6443",
        "kubernetes_ca_cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"});
    let r = module(args.clone());
    assert_eq!(r["failed"], json!(true), "{r}");
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("enabling the kubernetes auth method at auth/kubernetes/c9: POST sys/auth/kubernetes/c9: Vault answered HTTP 403"),
        "{msg}"
    );
    let root = with(&args, json!({"token": bao.root_token}));
    let first = module(root.clone());
    assert_eq!(first["changed"], json!(true), "{first}");
    let again = module(root);
    assert_eq!(again["changed"], json!(false), "{again}");

    // Another method type at the path is not taken over.
    bao.enable_auth("approle/c9", "approle");
    let r = module(with(
        &args,
        json!({"token": bao.root_token, "auth_mount": "approle/c9"}),
    ));
    assert_eq!(
        r["msg"],
        json!("auth/approle/c9 is an auth method of type approle, not kubernetes; choose another auth_mount"),
        "{r}"
    );
}
