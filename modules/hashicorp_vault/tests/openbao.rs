//! The module binary against a real OpenBao server: each test starts its own server (see
//! `vault_client::testserver`) and runs the built `hashicorp_vault` binary the way ansible-core
//! does (`MODULE ARGS_FILE`), with a clean environment.

use std::path::Path;

use serde_json::{json, Map, Value};
use vault_client::testserver::{BaoServer, Scratch};
use vault_client::KvVersion;

/// Run the module with `args` (plus Ansible's internal flags) and `env`; the parsed result.
fn module(args: Value, env: &[(&str, &str)]) -> Value {
    module_testkit::run_binary(Path::new(env!("CARGO_BIN_EXE_hashicorp_vault")), &args, env)
}

fn conn(bao: &BaoServer) -> Value {
    json!({"url": bao.addr, "token": bao.root_token, "retries": 0})
}

fn with(base: Value, more: Value) -> Value {
    let mut m = base.as_object().unwrap().clone();
    m.extend(more.as_object().unwrap().clone());
    Value::Object(m)
}

fn stored(bao: &BaoServer, mount: &str, path: &str) -> Option<Map<String, Value>> {
    bao.root()
        .kv_read(KvVersion::V2, mount, path, None)
        .unwrap()
        .and_then(|s| s.data)
}

fn assert_absent(result: &Value, canaries: &[&str]) {
    let text = result.to_string();
    for c in canaries {
        assert!(!text.contains(c), "secret value {c} leaked: {text}");
    }
}

#[test]
fn present_is_idempotent_with_check_mode_diff_merge_and_masking() {
    let bao = BaoServer::dev();
    let c = conn(&bao);
    let desired = json!({"api": "canary-api-1", "kubeadmin": "canary-kubeadmin-1"});
    let args = with(c.clone(), json!({"path": "openshift/c1", "data": desired}));

    // Check mode predicts a change and writes nothing.
    let r = module(
        with(
            args.clone(),
            json!({"_ansible_check_mode": true, "_ansible_diff": true}),
        ),
        &[],
    );
    assert_eq!(r["changed"], json!(true), "{r}");
    assert_eq!(r["changes"]["added"], json!(["api", "kubeadmin"]));
    assert_eq!(r["diff"]["before"], json!({}));
    assert_eq!(stored(&bao, "secret", "openshift/c1"), None);
    assert_absent(&r, &["canary-api-1", "canary-kubeadmin-1"]);

    let r = module(args.clone(), &[]);
    assert_eq!(
        (
            r["changed"].clone(),
            r["version"].clone(),
            r["kv_version"].clone()
        ),
        (json!(true), json!(1), json!(2)),
        "{r}"
    );
    assert_eq!(
        stored(&bao, "secret", "openshift/c1").unwrap(),
        desired.as_object().unwrap().clone()
    );
    assert_absent(&r, &["canary-api-1", "canary-kubeadmin-1"]);
    assert_eq!(
        r["invocation"]["module_args"]["data"],
        json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
    );

    // Same data again: no write, no new version.
    let r = module(args.clone(), &[]);
    assert_eq!(
        (r["changed"].clone(), r["version"].clone()),
        (json!(false), json!(1)),
        "{r}"
    );

    // One key changes: the diff names it, values stay masked (old ones too).
    let r = module(
        with(
            c.clone(),
            json!({"path": "openshift/c1", "merge": true, "data": {"kubeadmin": "canary-kubeadmin-2"}, "_ansible_diff": true}),
        ),
        &[],
    );
    assert_eq!(r["changed"], json!(true));
    assert_eq!(
        r["changes"],
        json!({"added": [], "changed": ["kubeadmin"], "removed": []})
    );
    assert_eq!(r["diff"]["after"]["kubeadmin"], json!("<masked> (changed)"));
    assert_eq!(r["diff"]["after"]["api"], json!("<masked>"));
    assert_absent(
        &r,
        &["canary-api-1", "canary-kubeadmin-1", "canary-kubeadmin-2"],
    );
    assert_eq!(
        stored(&bao, "secret", "openshift/c1").unwrap()["api"],
        json!("canary-api-1"),
        "merge kept the other key"
    );

    // merge with a matching subset: unchanged. Without merge the other key goes.
    let r = module(
        with(
            c.clone(),
            json!({"path": "openshift/c1", "merge": true, "data": {"api": "canary-api-1"}}),
        ),
        &[],
    );
    assert_eq!(r["changed"], json!(false));
    let r = module(
        with(
            c.clone(),
            json!({"path": "openshift/c1", "data": {"api": "canary-api-1"}}),
        ),
        &[],
    );
    assert_eq!(r["changes"]["removed"], json!(["kubeadmin"]));
    assert_eq!(r["version"], json!(3));
}

#[test]
fn read_many_secrets_in_one_call() {
    let bao = BaoServer::dev();
    let root = bao.root();
    bao.put("infra/pull", json!({"pullSecret": "{\"auths\":{}}"}));
    bao.put("infra/ssh", json!({"public_key": "ssh-ed25519 AAAA-old"}));
    bao.put(
        "infra/ssh",
        json!({"public_key": "ssh-ed25519 AAAA-new", "comment": "ops"}),
    );
    root.write(
        "sys/mounts/kv",
        &json!({"type": "kv", "options": {"version": "1"}}),
    )
    .unwrap();
    root.kv_write(
        KvVersion::V1,
        "kv",
        "legacy",
        json!({"user": "admin"}).as_object().unwrap(),
        None,
    )
    .unwrap();

    let c = conn(&bao);
    let r = module(
        with(
            c.clone(),
            json!({"state": "read", "secrets": [
                {"name": "pull", "path": "infra/pull", "key": "pullSecret"},
                {"name": "ssh_all", "path": "infra/ssh"},
                {"name": "ssh_v1", "path": "infra/ssh", "key": "public_key", "version": 1},
                {"name": "legacy_user", "path": "legacy", "key": "user", "engine_mount_point": "kv"},
                {"name": "no_path", "path": "infra/nothing", "default": "fallback"},
                {"name": "no_key", "path": "infra/ssh", "key": "nokey", "default": ""},
            ]}),
        ),
        &[],
    );
    assert_eq!(r["changed"], json!(false), "{r}");
    assert_eq!(
        r["secrets"],
        json!({
            "pull": "{\"auths\":{}}",
            "ssh_all": {"public_key": "ssh-ed25519 AAAA-new", "comment": "ops"},
            "ssh_v1": "ssh-ed25519 AAAA-old",
            "legacy_user": "admin",
            "no_path": "fallback",
            "no_key": "",
        })
    );
    assert_eq!(r["secrets_info"]["ssh_v1"]["version"], json!(1));
    assert_eq!(r["secrets_info"]["ssh_all"]["version"], json!(2));
    assert_eq!(r["secrets_info"]["legacy_user"]["kv_version"], json!(1));
    assert_eq!(r["secrets_info"]["no_path"]["defaulted"], json!(true));

    // A given kv_version skips detection (for tokens that may not read sys/internal/ui/mounts).
    let t = bao.token_with_policy("kv-only", r#"path "kv/legacy" { capabilities = ["read"] }"#);
    let item = json!([{"name": "u", "path": "legacy", "key": "user"}]);
    let given = json!({"url": bao.addr, "token": t, "state": "read", "engine_mount_point": "kv",
                       "kv_version": 1, "secrets": item});
    assert_eq!(module(given, &[])["secrets"]["u"], json!("admin"));

    let fail = |items: Value| {
        module(
            with(c.clone(), json!({"state": "read", "secrets": items})),
            &[],
        )
    };
    let r = fail(json!([{"name": "x", "path": "infra/ssh", "key": "nokey"}]));
    assert_eq!(r["msg"], json!("secrets[x]: the secret at secret/infra/ssh has no key 'nokey' (set default to allow this)"));
    let r = fail(json!([{"name": "y", "path": "infra/nothing"}]));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("no secret at secret/infra/nothing"),
        "{r}"
    );
    let r =
        fail(json!([{"name": "z", "path": "legacy", "version": 1, "engine_mount_point": "kv"}]));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("KV v1, which has no versions"),
        "{r}"
    );
    let r = fail(json!([{"name": "p", "path": "x", "engine_mount_point": "nomount"}]));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("cannot detect the KV version of mount 'nomount'"),
        "{r}"
    );
    let r = fail(json!([{"name": "d", "path": "infra/pull"}, {"name": "d", "path": "infra/ssh"}]));
    assert!(r["msg"].as_str().unwrap().contains("used twice"), "{r}");
}

#[test]
fn absent_soft_delete_then_destroy() {
    let bao = BaoServer::dev();
    let root = bao.root();
    bao.put("gone", json!({"k": "canary-del-1"}));
    let c = conn(&bao);
    let args = with(c.clone(), json!({"state": "absent", "path": "gone"}));

    let r = module(
        with(args.clone(), json!({"_ansible_check_mode": true})),
        &[],
    );
    assert_eq!(r["changed"], json!(true));
    assert!(
        stored(&bao, "secret", "gone").is_some(),
        "check mode deleted"
    );

    let r = module(args.clone(), &[]);
    assert_eq!(
        (r["changed"].clone(), r["destroyed"].clone()),
        (json!(true), json!(false)),
        "{r}"
    );
    assert_absent(&r, &["canary-del-1"]);
    assert_eq!(stored(&bao, "secret", "gone"), None);
    assert!(
        root.kv_metadata("secret", "gone").unwrap().is_some(),
        "a soft delete keeps the metadata"
    );
    assert_eq!(module(args.clone(), &[])["changed"], json!(false));

    // Writing again after a soft delete uses the deleted version for CAS.
    let r = module(
        with(
            c.clone(),
            json!({"path": "gone", "data": {"k": "canary-del-2"}}),
        ),
        &[],
    );
    assert_eq!(
        (r["changed"].clone(), r["version"].clone()),
        (json!(true), json!(2)),
        "{r}"
    );

    let destroy = with(args, json!({"destroy": true}));
    let r = module(destroy.clone(), &[]);
    assert_eq!(
        (r["changed"].clone(), r["destroyed"].clone()),
        (json!(true), json!(true)),
        "{r}"
    );
    assert_eq!(root.kv_metadata("secret", "gone").unwrap(), None);
    assert_eq!(module(destroy, &[])["changed"], json!(false));
}

#[test]
fn explicit_cas_and_a_limited_token() {
    let bao = BaoServer::dev();
    let c = conn(&bao);
    let r = module(
        with(
            c.clone(),
            json!({"path": "c", "data": {"a": "canary-cas-1"}, "cas": 0}),
        ),
        &[],
    );
    assert_eq!(r["version"], json!(1), "{r}");
    let r = module(
        with(
            c.clone(),
            json!({"path": "c", "data": {"a": "canary-cas-2"}, "cas": 0}),
        ),
        &[],
    );
    assert_eq!(r["failed"], json!(true));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("check-and-set conflict writing secret/c: the cas option (0)"),
        "{msg}"
    );
    assert_absent(&r, &["canary-cas-1", "canary-cas-2"]);
    let r = module(
        with(
            c.clone(),
            json!({"path": "c", "data": {"a": "canary-cas-2"}, "cas": 1}),
        ),
        &[],
    );
    assert_eq!(r["version"], json!(2), "{r}");

    let t = bao.token_with_policy("ro", r#"path "secret/data/*" { capabilities = ["read"] }"#);
    let r = module(
        json!({"url": bao.addr, "token": t, "retries": 0, "path": "c", "data": {"a": "canary-cas-3"}}),
        &[],
    );
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("writing secret/c: POST secret/data/c: Vault answered HTTP 403"),
        "{msg}"
    );
    assert_absent(&r, &["canary-cas-1", "canary-cas-2", "canary-cas-3", &t]);
}

/// Several writers merge their own key into one secret at once. With CAS and one retry each either
/// succeeds or fails with a clear conflict, and no successful write is lost.
#[test]
fn concurrent_writers_lose_no_update() {
    let bao = BaoServer::dev();
    let c = conn(&bao);
    module(
        with(c.clone(), json!({"path": "shared", "data": {"seed": "0"}})),
        &[],
    );
    let results: Vec<(usize, Value)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..6)
            .map(|i| {
                let args = with(c.clone(), json!({"path": "shared", "merge": true, "data": {format!("w{i}"): format!("v{i}")}}));
                s.spawn(move || (i, module(args, &[])))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let final_data = stored(&bao, "secret", "shared").unwrap();
    let mut ok = 0;
    for (i, r) in &results {
        if r.get("failed").is_some() {
            assert!(
                r["msg"]
                    .as_str()
                    .unwrap()
                    .contains("check-and-set conflict"),
                "{r}"
            );
        } else {
            ok += 1;
            assert_eq!(
                final_data[&format!("w{i}")],
                json!(format!("v{i}")),
                "writer {i}'s update was lost: {final_data:?}"
            );
        }
    }
    assert!(ok >= 1, "{results:?}");
    assert_eq!(final_data["seed"], json!("0"));
    let versions = bao.root().kv_metadata("secret", "shared").unwrap().unwrap()["current_version"]
        .as_u64()
        .unwrap();
    assert_eq!(versions, 1 + ok, "one version per successful writer");
}

#[test]
fn token_sources_and_auth_methods() {
    let bao = BaoServer::dev();
    let root = bao.root();
    bao.put("t", json!({"a": "b"}));
    let read =
        json!({"state": "read", "retries": 0, "secrets": [{"name": "a", "path": "t", "key": "a"}]});

    // VAULT_ADDR + VAULT_TOKEN from the environment.
    let r = module(
        read.clone(),
        &[("VAULT_ADDR", &bao.addr), ("VAULT_TOKEN", &bao.root_token)],
    );
    assert_eq!(r["secrets"]["a"], json!("b"), "{r}");
    // The token file.
    let home = Scratch::new("home");
    std::fs::write(home.path("tok"), format!("{}\n", bao.root_token)).unwrap();
    let r = module(
        with(
            read.clone(),
            json!({"url": bao.addr, "token_path": home.path("tok")}),
        ),
        &[],
    );
    assert_eq!(r["secrets"]["a"], json!("b"), "{r}");
    // ~/.vault-token, where `vault login` / `bao login` leave it.
    std::fs::write(home.path(".vault-token"), &bao.root_token).unwrap();
    let home_dir = home.0.to_str().unwrap();
    let r = module(
        with(read.clone(), json!({"url": bao.addr})),
        &[("HOME", home_dir)],
    );
    assert_eq!(r["secrets"]["a"], json!("b"), "{r}");
    // token_validate catches a bad token up front, and the token is masked.
    let r = module(
        with(
            read.clone(),
            json!({"url": bao.addr, "token": "canary-bad-token", "token_validate": true}),
        ),
        &[],
    );
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.starts_with(
            "token validation failed: GET auth/token/lookup-self: Vault answered HTTP 403"
        ),
        "{msg}"
    );
    assert_absent(&r, &["canary-bad-token"]);

    // AppRole on a custom mount.
    bao.policy("r", r#"path "secret/*" { capabilities = ["read"] }"#);
    bao.enable_auth("ar", "approle");
    root.write("auth/ar/role/x", &json!({"token_policies": ["r"]}))
        .unwrap();
    let role_id = root.read("auth/ar/role/x/role-id").unwrap()["data"]["role_id"]
        .as_str()
        .unwrap()
        .to_string();
    let secret_id = root.write("auth/ar/role/x/secret-id", &json!({})).unwrap()["data"]
        ["secret_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = module(
        with(
            read.clone(),
            json!({"url": bao.addr, "auth_method": "approle", "mount_point": "ar", "role_id": role_id, "secret_id": secret_id}),
        ),
        &[],
    );
    assert_eq!(r["secrets"]["a"], json!("b"), "{r}");
    assert_absent(&r, &[&secret_id]);
    let r = module(
        with(
            read.clone(),
            json!({"url": bao.addr, "auth_method": "approle", "mount_point": "ar", "role_id": role_id, "secret_id": "canary-wrong-sid"}),
        ),
        &[],
    );
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .starts_with("approle login (POST auth/ar/login): Vault answered HTTP"),
        "{r}"
    );
    assert_absent(&r, &["canary-wrong-sid"]);

    // userpass.
    bao.enable_auth("userpass", "userpass");
    root.write(
        "auth/userpass/users/ops",
        &json!({"password": "canary-up-pw", "token_policies": ["r"]}),
    )
    .unwrap();
    let r = module(
        with(
            read.clone(),
            json!({"url": bao.addr, "auth_method": "userpass", "username": "ops", "password": "canary-up-pw"}),
        ),
        &[],
    );
    assert_eq!(r["secrets"]["a"], json!("b"), "{r}");

    // Kubernetes-style login reading the service-account token file (JWT mount named kubernetes).
    let keys = Scratch::new("sa");
    let signer = vault_client::testserver::JwtSigner::create(&keys.0);
    bao.enable_auth("kubernetes", "jwt");
    root.write(
        "auth/kubernetes/config",
        &json!({"jwt_validation_pubkeys": [signer.public_pem]}),
    )
    .unwrap();
    root.write(
        "auth/kubernetes/role/proxshift",
        &json!({"role_type": "jwt", "bound_audiences": ["vault"], "user_claim": "sub", "token_policies": ["r"]}),
    )
    .unwrap();
    let now = vault_client::testserver::now();
    let sa = signer.sign(&json!({"sub": "system:serviceaccount:ci:proxshift", "aud": "vault", "iat": now, "exp": now + 600}));
    std::fs::write(keys.path("token"), &sa).unwrap();
    let r = module(
        with(
            read.clone(),
            json!({"url": bao.addr, "auth_method": "kubernetes", "role": "proxshift",
                                  "service_account_token_path": keys.path("token")}),
        ),
        &[],
    );
    assert_eq!(r["secrets"]["a"], json!("b"), "{r}");
    assert_absent(&r, &[&sa]);
}

#[test]
fn namespace_from_the_environment() {
    let bao = BaoServer::dev();
    bao.root()
        .write("sys/namespaces/platform", &json!({}))
        .unwrap();
    let mut cfg = bao.config();
    cfg.namespace = Some("platform".into());
    let mut ns = vault_client::Vault::new(&cfg).unwrap();
    ns.set_token(&bao.root_token);
    ns.write(
        "sys/mounts/secret",
        &json!({"type": "kv", "options": {"version": "2"}}),
    )
    .unwrap();

    let args = with(
        conn(&bao),
        json!({"path": "only-in-ns", "data": {"k": "ns-value-1"}, "retries": 5}),
    );
    let r = module(args.clone(), &[("VAULT_NAMESPACE", "platform")]);
    assert_eq!(r["changed"], json!(true), "{r}");
    assert!(ns
        .kv_read(KvVersion::V2, "secret", "only-in-ns", None)
        .unwrap()
        .is_some());
    assert_eq!(
        stored(&bao, "secret", "only-in-ns"),
        None,
        "written outside the namespace"
    );
    assert_eq!(
        module(with(args, json!({"namespace": "platform"})), &[])["changed"],
        json!(false)
    );
}

#[test]
fn tls_options_and_a_sealed_server() {
    let bao = BaoServer::raft_tls();
    let ca = bao.ca_cert.clone().unwrap();
    let ca = ca.to_str().unwrap();
    let args = json!({"url": bao.addr, "token": bao.root_token, "retries": 0, "path": "tls", "data": {"k": "tls-value-1"}});

    let r = module(with(args.clone(), json!({"ca_cert": ca})), &[]);
    assert_eq!(r["changed"], json!(true), "{r}");
    let r = module(args.clone(), &[("VAULT_CACERT", ca)]);
    assert_eq!(r["changed"], json!(false), "{r}");
    let r = module(args.clone(), &[]);
    assert!(r["msg"].as_str().unwrap().contains("certificate"), "{r}");
    let r = module(args.clone(), &[("VAULT_SKIP_VERIFY", "true")]);
    assert_eq!(r["changed"], json!(false), "{r}");
    assert!(
        r["warnings"][0].as_str().unwrap().contains("not checked"),
        "{r}"
    );
    // An explicit validate_certs wins over VAULT_SKIP_VERIFY.
    let r = module(
        with(args.clone(), json!({"validate_certs": true})),
        &[("VAULT_SKIP_VERIFY", "1")],
    );
    assert_eq!(r["failed"], json!(true), "{r}");

    bao.seal();
    let r = module(
        with(args.clone(), json!({"ca_cert": ca, "retries": 1})),
        &[],
    );
    let msg = r["msg"].as_str().unwrap();
    assert!(msg.contains("Vault is sealed"), "{msg}");
    bao.unseal();
    let r = module(with(args, json!({"ca_cert": ca})), &[]);
    assert_eq!(r["changed"], json!(false), "{r}");
    let _ = Path::new(ca);
}
