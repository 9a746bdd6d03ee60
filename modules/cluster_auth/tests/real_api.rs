//! cluster_auth end to end (the module's `run` through the Ansible protocol layer) against a real
//! kube-apiserver 1.34 + etcd, and against the repository's fake OpenShift OAuth endpoint.

use kube_client::objects::known;
use kube_client::testenv::{FakeOAuth, TestEnv, ADMIN_TOKEN, KUBECONFIG_TOKEN, VIEWER_TOKEN};
use module_testkit::TestModule;
use serde_json::{json, Value};

const PASSWORD: &str = "Canary-Pass-12345-abcde";

fn env() -> &'static TestEnv {
    TestEnv::with_crds()
}

/// Run the module with these args; returns (result, exit code).
fn module(args: Value) -> (Value, i32) {
    cluster_auth().run(&args)
}

fn cluster_auth() -> TestModule {
    TestModule::new(
        "cluster_auth",
        cluster_auth::argument_spec(),
        cluster_auth::run,
    )
}

fn ok(args: Value) -> Value {
    let (r, code) = module(args);
    assert_eq!(code, 0, "module failed: {r:#}");
    r
}

fn failed(args: Value) -> Value {
    let (r, code) = module(args);
    assert_eq!(code, 1, "module should have failed: {r:#}");
    assert_eq!(r["failed"], json!(true));
    r
}

fn ca(env: &TestEnv) -> String {
    env.ca_path.display().to_string()
}

#[test]
fn api_key_and_kubeconfigs() {
    let env = env();
    let r = ok(
        json!({"api_url": env.url, "api_key": ADMIN_TOKEN, "ca_cert": ca(env), "wait_for": ["api"], "timeout": 30, "poll_interval": 1}),
    );
    assert_eq!(r["changed"], json!(false));
    assert_eq!(r["host"], json!(env.url));
    assert_eq!(r["auth_method"], json!("api_key"));
    assert_eq!(r["readiness"]["api"]["ready"], json!(true));
    // The token came in as a no_log option: masked in every output.
    assert!(!r.to_string().contains(ADMIN_TOKEN), "{r}");

    // Token kubeconfig given as text.
    let r = ok(json!({"kubeconfig": env.kubeconfig(KUBECONFIG_TOKEN)}));
    assert_eq!(r["auth_method"], json!("kubeconfig"));
    assert_eq!(r["username"], json!("test"));
    // The kubeconfig's token is returned for later tasks; the kubeconfig text itself is no_log.
    assert_eq!(r["api_key"], json!(KUBECONFIG_TOKEN));
    assert_eq!(
        r["invocation"]["module_args"]["kubeconfig"],
        json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
    );

    // Installer-style kubeconfig file with a client certificate.
    let r = ok(
        json!({"kubeconfig": env.admin_cert_kubeconfig.display().to_string(), "wait_for": ["api"], "timeout": 10}),
    );
    assert_eq!(r["api_key"], Value::Null);
    assert_eq!(r["username"], json!("admin"));
}

#[test]
fn bad_credentials_and_tls() {
    let env = env();
    let r =
        failed(json!({"api_url": env.url, "api_key": "wrong-token-canary", "ca_cert": ca(env)}));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("401") && msg.contains("credentials were rejected"),
        "{msg}"
    );
    assert!(!r.to_string().contains("wrong-token-canary"));

    let r = failed(
        json!({"api_url": env.url, "api_key": ADMIN_TOKEN, "ca_cert": env.wrong_ca_path.display().to_string(), "validate_certs": true}),
    );
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("certificate") || msg.contains("UnknownIssuer"),
        "{msg}"
    );

    // Without a CA the OS store does not know the test CA either.
    let r = failed(json!({"api_url": env.url, "api_key": ADMIN_TOKEN}));
    assert!(
        r["msg"].as_str().unwrap().contains("UnknownIssuer")
            || r["msg"].as_str().unwrap().contains("certificate"),
        "{r}"
    );

    let r = ok(json!({"api_url": env.url, "api_key": ADMIN_TOKEN, "validate_certs": false}));
    assert!(r["warnings"][0]
        .as_str()
        .unwrap()
        .contains("validate_certs is off"));

    let r =
        failed(json!({"api_url": env.url, "password": "pw-canary-77", "api_key": "key-canary-77"}));
    assert!(
        r["msg"].as_str().unwrap().contains("mutually exclusive"),
        "{r}"
    );
}

#[test]
fn password_login_and_revocation_via_oauth() {
    let env = env();
    let oauth = FakeOAuth::start(env, "kubeadmin", PASSWORD, true);
    let base = json!({"api_url": oauth.url, "username": "kubeadmin", "password": PASSWORD, "ca_cert": ca(env)});
    let r = ok(base.clone());
    assert_eq!(r["auth_method"], json!("password"));
    assert_eq!(r["username"], json!("kube:admin"));
    assert_eq!(r["token_expires_in"], json!(86400));
    assert!(r["token_expiry"].as_str().unwrap().ends_with('Z'));
    // The obtained token is returned for later tasks (and works); the password never shows.
    let tok = r["api_key"].as_str().unwrap().to_string();
    assert!(tok.starts_with("sha256~"), "{r}");
    assert_eq!(r["k8s_auth"]["api_key"], json!(tok));
    assert!(!r.to_string().contains(PASSWORD));
    let r = ok(json!({"api_url": oauth.url, "api_key": tok, "ca_cert": ca(env)}));
    assert_eq!(r["username"], json!("kube:admin"));
    // A failure after the login (here: the wait times out) masks the token.
    let mut slow = base.clone();
    slow["wait_for"] = json!(["nodes"]);
    slow["timeout"] = json!(0);
    let r = failed(slow);
    assert!(r["msg"].as_str().unwrap().contains("timed out"), "{r}");
    assert_eq!(
        r["api_key"],
        json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"),
        "{r}"
    );

    // Get a real token to revoke: call the login directly.
    let conn = kube_client::ConnectionParams {
        host: Some(oauth.url.clone()),
        ca_cert: Some(env.ca_path.clone()),
        validate_certs: true,
        ..Default::default()
    }
    .resolve()
    .unwrap();
    let tok = kube_client::oauth::login(&conn, &conn.tls, "kubeadmin", PASSWORD)
        .unwrap()
        .access_token;
    assert!(tok.starts_with("sha256~"));
    let revoke =
        json!({"state": "absent", "api_url": oauth.url, "api_key": tok, "ca_cert": ca(env)});
    // Check mode: reported, not done.
    let mut check = revoke.clone();
    check["_ansible_check_mode"] = json!(true);
    let r = ok(check);
    assert_eq!(
        (r["changed"].clone(), r["revoked"].clone()),
        (json!(true), json!(false))
    );
    ok(json!({"api_url": oauth.url, "api_key": tok, "ca_cert": ca(env)}));
    let r = ok(revoke.clone());
    assert_eq!(
        (r["changed"].clone(), r["revoked"].clone()),
        (json!(true), json!(true))
    );
    // The token is dead now, and a second revoke changes nothing.
    let r = failed(json!({"api_url": oauth.url, "api_key": tok, "ca_cert": ca(env)}));
    assert!(r["msg"].as_str().unwrap().contains("401"), "{r}");
    let r = ok(revoke);
    assert_eq!(r["changed"], json!(false));

    // Wrong password.
    let mut wrong = base.clone();
    wrong["password"] = json!("not-the-password");
    let r = failed(wrong);
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("wrong username or password"),
        "{r}"
    );
    // OAuth host with a wrong CA.
    let mut bad_ca = base.clone();
    bad_ca["ca_cert"] = json!(env.wrong_ca_path.display().to_string());
    let r = failed(bad_ca);
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("oauth-authorization-server"),
        "{r}"
    );
}

#[test]
fn password_login_without_challenge_or_oauth() {
    let env = env();
    let oauth = FakeOAuth::start(env, "kubeadmin", PASSWORD, false);
    let r = failed(json!({"api_url": oauth.url, "password": PASSWORD, "ca_cert": ca(env)}));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("without a Basic challenge"),
        "{r}"
    );
    // Plain Kubernetes has no OAuth server.
    let r = failed(json!({"api_url": env.url, "password": PASSWORD, "ca_cert": ca(env)}));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("no OpenShift OAuth login"),
        "{r}"
    );
}

fn cond(t: &str, s: &str, msg: &str) -> Value {
    json!({"type": t, "status": s, "reason": "Test", "message": msg, "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// One test for the cluster-wide objects (ClusterVersion, ClusterOperators, Nodes), which parallel
/// tests would otherwise fight over: first not ready (timeouts list what is pending), then ready.
#[test]
fn wait_targets_time_out_with_pending_then_succeed() {
    let env = env();
    let admin = env.admin();
    let base = json!({"api_url": env.url, "api_key": ADMIN_TOKEN, "ca_cert": ca(env), "timeout": 2, "poll_interval": 1, "stable_polls": 1});
    let with = |targets: Value, extra: Value| {
        let mut a = base.clone();
        a["wait_for"] = targets;
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };

    // Nothing there yet.
    let r = failed(with(
        json!(["clusterversion", "operators", "machineconfigpools", "nodes"]),
        json!({}),
    ));
    let pending: Vec<String> = serde_json::from_value(r["pending"].clone()).unwrap();
    assert!(
        pending
            .iter()
            .any(|p| p.contains("ClusterVersion 'version' does not exist")),
        "{pending:?}"
    );
    assert!(
        pending.iter().any(|p| p.contains("no ClusterOperators")),
        "{pending:?}"
    );
    assert!(
        pending.iter().any(|p| p.contains("no nodes registered")),
        "{pending:?}"
    );
    assert!(
        pending.iter().any(|p| p.contains("no MachineConfigPools")),
        "{pending:?}"
    );
    assert!(
        r["msg"].as_str().unwrap().contains("timed out after"),
        "{r}"
    );

    // Play the cluster: a ClusterVersion still progressing, one degraded operator, one NotReady node.
    let cv = known::cluster_versions();
    admin.create(&cv, None, &json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
        "spec": {"clusterID": "6c1f5a2e-0000-4000-8000-000000000001"}})).unwrap();
    admin
        .patch_status(&cv, None, "version", &cv_status("True"))
        .unwrap();
    let co = known::cluster_operators();
    for name in ["dns", "ingress"] {
        admin.create(&co, None, &json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": name}, "spec": {}})).unwrap();
    }
    admin
        .patch_status(&co, None, "dns", &co_status("False"))
        .unwrap();
    admin.patch_status(&co, None, "ingress", &json!({"status": {"conditions": [cond("Available", "True", "up"), cond("Progressing", "False", "done"), cond("Degraded", "True", "router pods crash")]}})).unwrap();
    let mcp = known::machine_config_pools();
    for name in ["master", "worker"] {
        admin.create(&mcp, None, &json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool", "metadata": {"name": name}, "spec": {}})).unwrap();
    }
    admin
        .patch_status(&mcp, None, "master", &mcp_status(true))
        .unwrap();
    admin
        .patch_status(&mcp, None, "worker", &mcp_status(false))
        .unwrap();
    let nodes = known::nodes();
    for n in ["master-0", "worker-0"] {
        admin
            .create(
                &nodes,
                None,
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}}),
            )
            .unwrap();
    }
    let node_ready = |n: &str, s: &str| {
        admin.patch_status(&nodes, None, n, &json!({"status": {"conditions": [
            {"type": "Ready", "status": s, "reason": "KubeletReady", "message": format!("kubelet {s}"), "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})).unwrap();
    };
    node_ready("master-0", "True");
    node_ready("worker-0", "False");

    let r = failed(with(
        json!(["clusterversion", "operators", "machineconfigpools", "nodes"]),
        json!({"expected_nodes": 3, "version": "4.20.0"}),
    ));
    let pending: Vec<String> = serde_json::from_value(r["pending"].clone()).unwrap();
    assert_eq!(pending, vec![
        "clusterversion: Progressing=False (now True, Test: Working towards 4.19.3: 500 of 900 done)".to_string(),
        "clusterversion: at 4.19.3, not at the requested 4.20.0".to_string(),
        "operator ingress: Degraded=False (now True, Test: router pods crash)".to_string(),
        "machineconfigpool worker: Updated=True (now False, Test: rendering worker-2), 0 of 1 machines updated".to_string(),
        "node worker-0: Ready=True (now False, KubeletReady: kubelet False)".to_string(),
        "nodes: 2 of 3 expected nodes registered".to_string(),
    ]);
    assert_eq!(
        r["readiness"]["machineconfigpools"]["not_ready"],
        json!(["worker"])
    );
    assert_eq!(r["readiness"]["operators"]["not_ready"], json!(["ingress"]));
    assert_eq!(r["readiness"]["nodes"]["ready_count"], json!(1));
    assert_eq!(r["version"], json!("4.19.3"));

    // RBAC: the viewer may not read ClusterOperators — fails at once, not as a timeout.
    let mut v = with(json!(["operators"]), json!({"timeout": 60}));
    v["api_key"] = json!(VIEWER_TOKEN);
    let r = failed(v);
    // At once, not as a timeout: the viewer's one read of ClusterOperators was refused and the
    // module did not ask again (the API server's audit log has every request).
    let reads = env.audited(|e| {
        e["user"]["username"] == "viewer"
            && e["requestURI"]
                .as_str()
                .is_some_and(|u| u.contains("clusteroperators"))
    });
    let answers: Vec<&Value> = reads.iter().map(|e| &e["responseStatus"]["code"]).collect();
    assert_eq!(answers, [&json!(403)], "{reads:#?}");
    assert!(r["msg"].as_str().unwrap().contains("403 forbidden"), "{r}");
    assert!(
        r["msg"].as_str().unwrap().contains("clusteroperators"),
        "{r}"
    );

    // The cluster settles while the module waits.
    let t = std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let env = TestEnv::shared();
        let admin = env.admin();
        admin
            .patch_status(
                &known::cluster_versions(),
                None,
                "version",
                &cv_status("False"),
            )
            .unwrap();
        admin
            .patch_status(
                &known::cluster_operators(),
                None,
                "ingress",
                &co_status("False"),
            )
            .unwrap();
        admin
            .patch_status(
                &known::machine_config_pools(),
                None,
                "worker",
                &mcp_status(true),
            )
            .unwrap();
        admin.patch_status(&known::nodes(), None, "worker-0", &json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})).unwrap();
    });
    let all = json!([
        "api",
        "clusterversion",
        "operators",
        "machineconfigpools",
        "nodes"
    ]);
    let r = ok(with(
        all.clone(),
        json!({"timeout": 60, "expected_nodes": 2, "version": "4.19.3", "stable_polls": 2}),
    ));
    t.join().unwrap();
    assert_eq!(r["version"], json!("4.19.3"));
    for t in all.as_array().unwrap() {
        let t = t.as_str().unwrap();
        assert_eq!(r["readiness"][t]["ready"], json!(true), "{t}: {r:#}");
    }
    assert_eq!(r["readiness"]["nodes"]["total"], json!(2));
    assert_eq!(r["readiness"]["operators"]["stable_polls"], json!(2));
    assert!(r["msg"].as_str().unwrap().contains("is ready"));

    stability_window_counts_looks(env);
}

/// The ClusterVersion status (as the CVO writes it) at 4.19.3, still progressing or done.
fn cv_status(progressing: &str) -> Value {
    json!({"status": {
    "desired": {"version": "4.19.3", "image": "quay.io/openshift-release-dev/ocp-release@sha256:0000"},
    "history": [{"state": if progressing == "True" {"Partial"} else {"Completed"}, "version": "4.19.3", "image": "x",
        "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T01:00:00Z", "verified": false}],
    "observedGeneration": 1, "versionHash": "x", "availableUpdates": [],
    "conditions": [cond("Available", "True", "Done"), cond("Progressing", progressing, "Working towards 4.19.3: 500 of 900 done"), cond("Failing", "False", "no failure")]}})
}

/// A ClusterOperator's status: available, not degraded, progressing or not.
fn co_status(progressing: &str) -> Value {
    json!({"status": {"conditions": [cond("Available", "True", "up"), cond("Progressing", progressing, "rolling out"), cond("Degraded", "False", "fine")]}})
}

/// A MachineConfigPool of one machine, updated or still rendering.
fn mcp_status(updated: bool) -> Value {
    let (u, msg, n) = if updated {
        ("True", "all nodes updated", 1)
    } else {
        ("False", "rendering worker-2", 0)
    };
    json!({"status": {"machineCount": 1, "updatedMachineCount": n, "readyMachineCount": n, "unavailableMachineCount": 1 - n, "degradedMachineCount": 0,
        "conditions": [cond("Updated", u, msg), cond("Degraded", "False", "fine")]}})
}

/// ClusterOperator lists by the kubeconfig user (only [`stability_window_counts_looks`] uses it for
/// operators), read from the API server's audit log until there are `n` (bounded: 300 reads).
fn operator_lists(env: &TestEnv, n: usize) -> usize {
    let is_list = |e: &Value| {
        e["user"]["username"] == "kc-admin"
            && e["verb"] == "list"
            && e["requestURI"]
                .as_str()
                .is_some_and(|u| u.contains("clusteroperators"))
    };
    let mut found = 0;
    for _ in 0..300 {
        found = env.audit_events().iter().filter(|e| is_list(e)).count();
        if found >= n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    found
}

/// `stable_polls` is a number of looks in a row, as `oc adm wait-for-stable-cluster`'s window: counted
/// by the module (`readiness.operators.polls`) and by the API server (its audit log), never by a clock.
fn stability_window_counts_looks(env: &TestEnv) {
    let args = |stable: u32, interval: u32| {
        json!({"kubeconfig": env.kubeconfig(KUBECONFIG_TOKEN), "wait_for": ["operators"], "timeout": 60,
            "poll_interval": interval, "stable_polls": stable})
    };
    // Stable from the first look: ready at the third.
    assert_eq!(operator_lists(env, 0), 0);
    let r = ok(args(3, 1));
    assert_eq!(r["readiness"]["operators"]["polls"], json!(3), "{r:#}");
    assert_eq!(r["readiness"]["operators"]["stable_polls"], json!(3));
    assert_eq!(operator_lists(env, 3), 3);

    // An operator starts progressing after the second look and settles after the third: the window
    // starts again, so the module looks 3 + 3 times. The flips follow the module's looks in the audit
    // log (2 s apart), not a clock.
    let flipper = std::thread::spawn(|| {
        let env = TestEnv::shared();
        let admin = env.admin();
        let co = known::cluster_operators();
        assert_eq!(operator_lists(env, 5), 5, "the module's second look");
        admin
            .patch_status(&co, None, "dns", &co_status("True"))
            .unwrap();
        assert_eq!(operator_lists(env, 6), 6, "the module's third look");
        admin
            .patch_status(&co, None, "dns", &co_status("False"))
            .unwrap();
    });
    let r = ok(args(3, 2));
    flipper.join().unwrap();
    assert_eq!(r["readiness"]["operators"]["polls"], json!(6), "{r:#}");
    assert_eq!(operator_lists(env, 9), 9);

    // The window must fit in the timeout (oc: "--timeout must be greater than the --minimum-stable-period").
    let r = failed(
        json!({"kubeconfig": env.kubeconfig(KUBECONFIG_TOKEN), "wait_for": ["operators"], "timeout": 300}),
    );
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("stable_polls=31") && msg.contains("(300s)"),
        "{msg}"
    );
}

/// The OAuth server is the `oauth-openshift.apps…` route: another host name than the API, served with
/// the ingress CA. Its CA comes from `ingress_ca` (file or PEM) or from the kubeconfig's CA bundle.
#[test]
fn password_login_against_the_oauth_route_with_the_ingress_ca() {
    let env = env();
    let oauth = FakeOAuth::start_routed(env, "kubeadmin", PASSWORD);
    let route = oauth.oauth_url.clone().unwrap();
    assert!(route.starts_with("https://localhost:"), "{route}");
    let base = json!({"api_url": oauth.url, "password": PASSWORD, "ca_cert": ca(env)});
    let with = |k: &str, v: Value| {
        let mut a = base.clone();
        a[k] = v;
        a
    };

    // The API's CA does not vouch for the route.
    let r = failed(base.clone());
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "cannot reach the OAuth server at {route}/oauth/authorize"
        )) && msg.contains("ingress_ca"),
        "{msg}"
    );
    assert!(!r.to_string().contains(PASSWORD));

    // ingress_ca as a file, and as the PEM text.
    let ingress_pem = std::fs::read_to_string(&env.ingress_ca_path).unwrap();
    for v in [
        json!(env.ingress_ca_path.display().to_string()),
        json!(ingress_pem),
    ] {
        let r = ok(with("ingress_ca", v));
        assert_eq!(r["auth_method"], json!("password"));
        assert_eq!(r["username"], json!("kube:admin"));
        assert!(r["api_key"].as_str().unwrap().starts_with("sha256~"), "{r}");
    }

    // The ingress CA does not vouch for the API (the discovery document is read from the API).
    let mut only_ingress = base.clone();
    only_ingress["ca_cert"] = json!(env.ingress_ca_path.display().to_string());
    only_ingress["ingress_ca"] = json!(ingress_pem);
    let r = failed(only_ingress);
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("oauth-authorization-server"),
        "{r}"
    );

    // A kubeconfig used for its server and CA bundle only (install-complete puts the router CA into
    // it): every certificate of the bundle is trusted; its user's token is not used for the login.
    let api_ca = std::fs::read_to_string(&env.ca_path).unwrap();
    let kubeconfig = |bundle: &str| {
        kube_client::kubeconfig::render_token_kubeconfig(
            &oauth.url,
            Some(bundle.as_bytes()),
            false,
            KUBECONFIG_TOKEN,
            "test",
        )
    };
    let r = ok(
        json!({"kubeconfig": kubeconfig(&format!("{api_ca}{ingress_pem}")), "password": PASSWORD}),
    );
    assert_eq!(r["auth_method"], json!("password"));
    assert_eq!(r["username"], json!("kube:admin"));
    assert_ne!(r["api_key"], json!(KUBECONFIG_TOKEN));
    let r = failed(json!({"kubeconfig": kubeconfig(&api_ca), "password": PASSWORD}));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("cannot reach the OAuth server"),
        "{r}"
    );

    // A bad ingress_ca is named.
    let r = failed(with("ingress_ca", json!("/nonexistent/ingress-ca.crt")));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .starts_with("ingress_ca: cannot read /nonexistent/ingress-ca.crt"),
        "{r}"
    );
}

#[test]
fn waits_for_the_api_to_come_up_before_logging_in() {
    let env = env();
    let port = kube_client::testenv::free_port();
    let url = format!("https://127.0.0.1:{port}");
    let args = json!({"api_url": url, "password": PASSWORD, "ca_cert": ca(env), "wait_for": ["api"], "timeout": 2, "poll_interval": 1});
    // Nothing listens yet: a timeout that says why.
    let r = failed(args.clone());
    let pending = r["pending"].to_string();
    assert!(
        pending.contains("api /readyz") && pending.to_lowercase().contains("refused"),
        "{r:#}"
    );
    assert_eq!(r["readiness"]["api"]["ready"], json!(false));

    // The API (with its OAuth server) comes up while the module waits; then the login happens.
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        FakeOAuth::start_on(TestEnv::shared(), "kubeadmin", PASSWORD, true, port)
    });
    let mut args = args;
    args["timeout"] = json!(30);
    let r = ok(args);
    let _server = t.join().unwrap();
    assert_eq!(r["readiness"]["api"]["ready"], json!(true));
    assert_eq!(r["username"], json!("kube:admin"));
    assert!(r["api_key"].as_str().unwrap().starts_with("sha256~"));
}
