//! vault-client against a real OpenBao server (see `vault_client::testserver`): every test starts
//! its own server on a free loopback port and kills it at the end.

use std::time::Duration;

use serde_json::{json, Map, Value};
use vault_client::testserver::{now, BaoServer, JwtSigner, Scratch};
use vault_client::{Auth, Backoff, Config, Error, KvVersion, Tls, Vault};

fn data(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn kv2_versions_cas_delete_destroy() {
    let bao = BaoServer::dev();
    let v = bao.root();
    let put =
        |d: Value, cas: Option<u64>| v.kv_write(KvVersion::V2, "secret", "app/db", &data(d), cas);
    let get = |version: Option<u64>| {
        v.kv_read(KvVersion::V2, "secret", "app/db", version)
            .unwrap()
    };
    assert_eq!(v.mount_info("secret").unwrap().kv, Some(KvVersion::V2));
    assert_eq!(get(None), None);

    assert_eq!(put(json!({"user": "a"}), Some(0)).unwrap(), Some(1));
    // cas 0 = create only: a second create must fail as a CAS mismatch.
    let e = put(json!({"user": "x"}), Some(0)).unwrap_err();
    assert!(e.is_cas_mismatch(), "{e}");
    assert_eq!(put(json!({"user": "b"}), Some(1)).unwrap(), Some(2));

    let latest = get(None).unwrap();
    assert_eq!(
        (latest.version, latest.data.unwrap()["user"].clone()),
        (Some(2), json!("b"))
    );
    let old = get(Some(1)).unwrap();
    assert_eq!(
        (old.version, old.data.unwrap()["user"].clone()),
        (Some(1), json!("a"))
    );
    assert_eq!(
        v.kv_metadata("secret", "app/db").unwrap().unwrap()["current_version"],
        json!(2)
    );

    v.kv_delete(KvVersion::V2, "secret", "app/db").unwrap();
    let gone = get(None).expect("metadata survives a soft delete");
    assert!(gone.is_deleted());
    assert_eq!(gone.version, Some(2));
    // Older versions survive a soft delete of the latest.
    assert!(get(Some(1)).unwrap().data.is_some());
    // The next write must name the deleted version.
    let e = put(json!({"user": "c"}), Some(0)).unwrap_err();
    assert!(e.is_cas_mismatch(), "{e}");

    v.kv_destroy(KvVersion::V2, "secret", "app/db").unwrap();
    assert_eq!(get(None), None);
    assert_eq!(v.kv_metadata("secret", "app/db").unwrap(), None);
}

#[test]
fn kv1_mount_is_detected_and_works() {
    let bao = BaoServer::dev();
    let v = bao.root();
    v.write(
        "sys/mounts/kv",
        &json!({"type": "kv", "options": {"version": "1"}}),
    )
    .unwrap();
    v.write("sys/mounts/pki", &json!({"type": "pki"})).unwrap();
    let m = v.mount_info("kv/some/deep/path").unwrap();
    assert_eq!((m.path.as_str(), m.kv), ("kv", Some(KvVersion::V1)));
    assert_eq!(v.mount_info("pki").unwrap().kv, None);

    assert_eq!(
        v.kv_write(
            KvVersion::V1,
            "kv",
            "team/app",
            &data(json!({"k": "v"})),
            None
        )
        .unwrap(),
        None
    );
    let s = v
        .kv_read(KvVersion::V1, "kv", "team/app", None)
        .unwrap()
        .unwrap();
    assert_eq!(s.data.unwrap(), data(json!({"k": "v"})));
    assert!(v
        .kv_write(KvVersion::V1, "kv", "team/app", &Map::new(), Some(1))
        .unwrap_err()
        .to_string()
        .contains("no check-and-set"));
    assert!(v.kv_read(KvVersion::V1, "kv", "team/app", Some(1)).is_err());
    v.kv_delete(KvVersion::V1, "kv", "team/app").unwrap();
    assert_eq!(
        v.kv_read(KvVersion::V1, "kv", "team/app", None).unwrap(),
        None
    );
}

#[test]
fn tokens_and_a_limited_policy() {
    let bao = BaoServer::dev();
    let root = bao.root();
    assert_eq!(root.lookup_self().unwrap()["policies"], json!(["root"]));
    let bad = bao.client(Some("not-a-token"));
    let e = bad.lookup_self().unwrap_err();
    assert!(e.is_permission_denied(), "{e}");
    assert!(e.to_string().contains("403"), "{e}");

    root.kv_write(
        KvVersion::V2,
        "secret",
        "app/cfg",
        &data(json!({"a": "1"})),
        None,
    )
    .unwrap();
    root.kv_write(
        KvVersion::V2,
        "secret",
        "other/cfg",
        &data(json!({"b": "2"})),
        None,
    )
    .unwrap();
    let t = bao.token_with_policy(
        "app-read",
        r#"path "secret/data/app/*" { capabilities = ["read"] }"#,
    );
    let limited = bao.client(Some(&t));
    // Mount detection works with any capability under the mount.
    assert_eq!(
        limited.mount_info("secret").unwrap().kv,
        Some(KvVersion::V2)
    );
    assert!(limited
        .kv_read(KvVersion::V2, "secret", "app/cfg", None)
        .unwrap()
        .is_some());
    let e = limited
        .kv_read(KvVersion::V2, "secret", "other/cfg", None)
        .unwrap_err();
    assert!(e.is_permission_denied(), "{e}");
    let e = limited
        .kv_write(
            KvVersion::V2,
            "secret",
            "app/cfg",
            &data(json!({"a": "2"})),
            Some(1),
        )
        .unwrap_err();
    assert!(e.is_permission_denied(), "{e}");
    assert!(
        e.to_string()
            .contains("POST secret/data/app/cfg: Vault answered HTTP 403"),
        "{e}"
    );
}

#[test]
fn approle_and_userpass_logins_on_default_and_custom_mounts() {
    let bao = BaoServer::dev();
    let root = bao.root();
    bao.policy(
        "rw",
        r#"path "secret/*" { capabilities = ["create","read","update"] }"#,
    );
    for mount in ["approle", "ci-approle"] {
        bao.enable_auth(mount, "approle");
        root.write(
            &format!("auth/{mount}/role/builder"),
            &json!({"token_policies": ["rw"]}),
        )
        .unwrap();
        let role_id = root
            .read(&format!("auth/{mount}/role/builder/role-id"))
            .unwrap()["data"]["role_id"]
            .as_str()
            .unwrap()
            .to_string();
        let secret_id = root
            .write(&format!("auth/{mount}/role/builder/secret-id"), &json!({}))
            .unwrap()["data"]["secret_id"]
            .as_str()
            .unwrap()
            .to_string();
        let mut v = bao.client(None);
        let login = v
            .login(&Auth::AppRole {
                mount: mount.into(),
                role_id: role_id.clone(),
                secret_id: Some(secret_id),
            })
            .unwrap();
        assert!(login.policies.contains(&"rw".to_string()), "{login:?}");
        assert_eq!(v.token(), Some(login.token.as_str()));
        v.kv_write(
            KvVersion::V2,
            "secret",
            &format!("from-{mount}"),
            &data(json!({"ok": true})),
            None,
        )
        .unwrap();

        let e = bao
            .client(None)
            .login(&Auth::AppRole {
                mount: mount.into(),
                role_id,
                secret_id: Some("wrong".into()),
            })
            .unwrap_err();
        assert!(
            e.to_string().starts_with("approle login (POST auth/"),
            "{e}"
        );
    }

    bao.enable_auth("userpass", "userpass");
    root.write(
        "auth/userpass/users/ops",
        &json!({"password": "canary-pass-1", "token_policies": ["rw"]}),
    )
    .unwrap();
    let mut v = bao.client(None);
    v.login(&Auth::Userpass {
        mount: "userpass".into(),
        username: "ops".into(),
        password: "canary-pass-1".into(),
    })
    .unwrap();
    assert!(v.lookup_self().unwrap()["policies"]
        .as_array()
        .unwrap()
        .contains(&json!("rw")));
    let e = bao
        .client(None)
        .login(&Auth::Userpass {
            mount: "userpass".into(),
            username: "ops".into(),
            password: "nope".into(),
        })
        .unwrap_err();
    assert!(!e.to_string().contains("canary-pass-1"));
    assert!(matches!(e.status(), Some(400) | Some(403)), "{e}");
}

/// JWT auth, and the Kubernetes method's payload (`role` + service-account JWT) against a JWT auth
/// mount named `kubernetes` — the same login call; a real Kubernetes mount would also need a
/// kube-apiserver for the TokenReview.
#[test]
fn jwt_and_kubernetes_style_logins() {
    let bao = BaoServer::dev();
    let root = bao.root();
    let keys = Scratch::new("jwt");
    let signer = JwtSigner::create(&keys.0);
    bao.policy(
        "rw",
        r#"path "secret/*" { capabilities = ["create","read","update"] }"#,
    );
    for mount in ["jwt", "kubernetes"] {
        bao.enable_auth(mount, "jwt");
        root.write(
            &format!("auth/{mount}/config"),
            &json!({"jwt_validation_pubkeys": [signer.public_pem]}),
        )
        .unwrap();
        root.write(
            &format!("auth/{mount}/role/proxshift"),
            &json!({"role_type": "jwt", "bound_audiences": ["proxshift"], "user_claim": "sub", "token_policies": ["rw"]}),
        )
        .unwrap();
    }
    root.write(
        "auth/jwt/config",
        &json!({"jwt_validation_pubkeys": [signer.public_pem], "default_role": "proxshift"}),
    )
    .unwrap();
    let jwt = signer.sign(&json!({"sub": "system:serviceaccount:ci:proxshift", "aud": "proxshift", "iat": now(), "exp": now() + 600}));

    let mut v = bao.client(None);
    v.login(&Auth::Jwt {
        mount: "jwt".into(),
        role: None,
        jwt: jwt.clone(),
    })
    .unwrap();
    v.kv_write(
        KvVersion::V2,
        "secret",
        "jwt-ok",
        &data(json!({"a": 1})),
        None,
    )
    .unwrap();

    let mut k = bao.client(None);
    k.login(&Auth::Kubernetes {
        mount: "kubernetes".into(),
        role: "proxshift".into(),
        jwt: jwt.clone(),
    })
    .unwrap();
    assert!(k.lookup_self().unwrap()["policies"]
        .as_array()
        .unwrap()
        .contains(&json!("rw")));

    let expired = signer
        .sign(&json!({"sub": "x", "aud": "proxshift", "iat": now() - 7200, "exp": now() - 3600}));
    let e = bao
        .client(None)
        .login(&Auth::Jwt {
            mount: "jwt".into(),
            role: None,
            jwt: expired,
        })
        .unwrap_err();
    assert!(e.to_string().contains("jwt login"), "{e}");
}

#[test]
fn namespaces_isolate_secrets() {
    let bao = BaoServer::dev();
    let root = bao.root();
    root.write("sys/namespaces/team-a", &json!({})).unwrap();
    let mut cfg = bao.config();
    cfg.namespace = Some("team-a/".into());
    // A fresh KV v2 mount may answer "upgrading" for a moment; that is retried.
    cfg.backoff = Backoff {
        attempts: 10,
        initial: Duration::from_millis(100),
        max: Duration::from_millis(500),
        factor: 2,
    };
    let mut ns = Vault::new(&cfg).unwrap();
    ns.set_token(&bao.root_token);
    ns.write(
        "sys/mounts/kv2",
        &json!({"type": "kv", "options": {"version": "2"}}),
    )
    .unwrap();
    assert_eq!(ns.mount_info("kv2").unwrap().kv, Some(KvVersion::V2));
    ns.kv_write(
        KvVersion::V2,
        "kv2",
        "app",
        &data(json!({"in": "ns"})),
        Some(0),
    )
    .unwrap();
    assert_eq!(
        ns.kv_read(KvVersion::V2, "kv2", "app", None)
            .unwrap()
            .unwrap()
            .data
            .unwrap()["in"],
        json!("ns")
    );
    // The root namespace has no such mount.
    assert!(root.mount_info("kv2").is_err());
    assert!(
        root.kv_read(KvVersion::V2, "kv2", "app", None).is_err()
            || root
                .kv_read(KvVersion::V2, "kv2", "app", None)
                .unwrap()
                .is_none()
    );

    // Logins happen in the namespace too.
    ns.write("sys/auth/userpass", &json!({"type": "userpass"}))
        .unwrap();
    ns.write(
        "sys/policies/acl/r",
        &json!({"policy": r#"path "kv2/data/*" { capabilities = ["read"] }"#}),
    )
    .unwrap();
    ns.write(
        "auth/userpass/users/dev",
        &json!({"password": "pw-ns", "token_policies": ["r"]}),
    )
    .unwrap();
    let mut user = Vault::new(&cfg).unwrap();
    user.login(&Auth::Userpass {
        mount: "userpass".into(),
        username: "dev".into(),
        password: "pw-ns".into(),
    })
    .unwrap();
    assert!(user
        .kv_read(KvVersion::V2, "kv2", "app", None)
        .unwrap()
        .is_some());
    assert!(bao
        .client(None)
        .login(&Auth::Userpass {
            mount: "userpass".into(),
            username: "dev".into(),
            password: "pw-ns".into()
        })
        .is_err());
}

#[test]
fn concurrent_cas_writers_exactly_one_wins() {
    let bao = BaoServer::dev();
    let root = bao.root();
    root.kv_write(
        KvVersion::V2,
        "secret",
        "race",
        &data(json!({"n": 0})),
        None,
    )
    .unwrap();
    let results: Vec<Result<Option<u64>, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=6)
            .map(|i| {
                let v = bao.root();
                s.spawn(move || {
                    v.kv_write(
                        KvVersion::V2,
                        "secret",
                        "race",
                        &data(json!({"n": i})),
                        Some(1),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<_> = results.iter().filter(|r| r.is_ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    assert_eq!(*won[0].as_ref().unwrap(), Some(2));
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(Error::is_cas_mismatch),
        "{results:?}"
    );
}

#[test]
fn tls_sealed_and_unseal_on_a_raft_server() {
    let bao = BaoServer::raft_tls();
    let root = bao.root();
    root.kv_write(
        KvVersion::V2,
        "secret",
        "tls",
        &data(json!({"a": "b"})),
        None,
    )
    .unwrap();

    // Without the test CA the certificate is rejected; validate_certs=false accepts it.
    let mut cfg = bao.config();
    cfg.tls = Tls::verified();
    let e = Vault::new(&cfg).unwrap().lookup_self().unwrap_err();
    assert!(matches!(e, Error::Transport { .. }), "{e}");
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    // Not retried (no retry can fix it), and the message names the options that do, as community.hashi_vault's.
    assert!(!e.is_transient(), "{e}");
    for option in ["ca_cert", "ANSIBLE_HASHI_VAULT_CA_CERT", "validate_certs"] {
        assert!(e.to_string().contains(option), "{option} missing from {e}");
    }
    cfg.tls = Tls {
        validate_certs: false,
        ..Default::default()
    };
    let mut insecure = Vault::new(&cfg).unwrap();
    insecure.set_token(&bao.root_token);
    assert!(insecure
        .kv_read(KvVersion::V2, "secret", "tls", None)
        .unwrap()
        .is_some());

    bao.seal();
    let e = root
        .kv_read(KvVersion::V2, "secret", "tls", None)
        .unwrap_err();
    assert!(matches!(e, Error::Sealed { .. }), "{e:?}");
    assert!(e.to_string().contains("Vault is sealed"), "{e}");
    assert_eq!(bao.client(None).health().unwrap().0, 503);

    // A sealed server is retried with backoff: unseal while the client waits and the read succeeds.
    let patient = bao.root_retrying(8, Duration::from_millis(300));
    let got = std::thread::scope(|s| {
        let reader = s.spawn(|| patient.kv_read(KvVersion::V2, "secret", "tls", None));
        std::thread::sleep(Duration::from_millis(700));
        bao.unseal();
        reader.join().unwrap()
    });
    assert_eq!(got.unwrap().unwrap().data.unwrap()["a"], json!("b"));
}

#[test]
fn unreachable_server_is_a_transport_error_naming_the_call() {
    let cfg = Config {
        backoff: Backoff::none(),
        ..Config::new(format!(
            "http://127.0.0.1:{}",
            vault_client::testserver::free_port()
        ))
    };
    let e = Vault::new(&cfg).unwrap().lookup_self().unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(
        e.to_string()
            .starts_with("GET auth/token/lookup-self: cannot reach Vault"),
        "{e}"
    );
}

/// The Kubernetes auth method end to end: OpenBao's kubernetes mount sends a TokenReview to a real
/// kube-apiserver, which checks the service-account token it issued.
#[test]
fn kubernetes_login_against_a_real_apiserver() {
    let kube = vault_client::testserver::KubeApi::start();
    let bao = BaoServer::dev();
    let root = bao.root();
    bao.policy(
        "rw",
        r#"path "secret/*" { capabilities = ["create","read","update"] }"#,
    );
    bao.enable_auth("kubernetes", "kubernetes");
    root.write(
        "auth/kubernetes/config",
        &json!({"kubernetes_host": kube.url, "kubernetes_ca_cert": kube.ca_pem,
                "token_reviewer_jwt": kube.admin_token, "disable_local_ca_jwt": true}),
    )
    .unwrap();
    root.write(
        "auth/kubernetes/role/proxshift",
        &json!({"bound_service_account_names": ["proxshift"], "bound_service_account_namespaces": ["default"],
                "token_policies": ["rw"]}),
    )
    .unwrap();

    let good = kube.service_account_token("default", "proxshift");
    let mut v = bao.client(None);
    let login = v
        .login(&Auth::Kubernetes {
            mount: "kubernetes".into(),
            role: "proxshift".into(),
            jwt: good,
        })
        .unwrap();
    assert!(login.policies.contains(&"rw".to_string()), "{login:?}");
    v.kv_write(
        KvVersion::V2,
        "secret",
        "from-k8s",
        &data(json!({"ok": true})),
        None,
    )
    .unwrap();

    // A real token of a service account the role does not bind is refused.
    let other = kube.service_account_token("default", "intruder");
    let e = bao
        .client(None)
        .login(&Auth::Kubernetes {
            mount: "kubernetes".into(),
            role: "proxshift".into(),
            jwt: other,
        })
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("kubernetes login (POST auth/kubernetes/login)"),
        "{e}"
    );
    assert!(matches!(e.status(), Some(400) | Some(403)), "{e}");
}
