//! kube-client against a real kube-apiserver 1.34 + etcd (see `kube_client::testenv`).

use std::time::Duration;

use kube_client::objects::{known, Resource};
use kube_client::testenv::{unique, TestEnv, VIEWER_TOKEN};
use kube_client::{Client, ConnectionParams, KubeError, Method, PatchType, WaitError};
use serde_json::json;

fn env() -> &'static TestEnv {
    TestEnv::with_crds()
}

fn secret(ns: &str, name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}}, "data": {"k": "djE="}})
}

fn namespace(c: &Client) -> String {
    let ns = unique("kc");
    c.create(
        &known::namespaces(),
        None,
        &json!({"metadata": {"name": ns}}),
    )
    .unwrap();
    ns
}

#[test]
fn crud_patch_apply_delete() {
    let c = env().admin();
    let ns = namespace(&c);
    let s = known::secrets();
    assert!(c.get(&s, Some(&ns), "a").unwrap().is_none());
    c.create(&s, Some(&ns), &secret(&ns, "a")).unwrap();
    c.create(
        &s,
        Some(&ns),
        &json!({"metadata": {"name": "b", "namespace": ns}}),
    )
    .unwrap();
    let listed = c.list(&s, Some(&ns), Some("app=t")).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["metadata"]["name"], json!("a"));

    let p = c
        .patch(
            &s,
            Some(&ns),
            "a",
            &json!({"metadata": {"labels": {"extra": "1"}}}),
            PatchType::Merge,
        )
        .unwrap();
    assert_eq!(p["metadata"]["labels"], json!({"app": "t", "extra": "1"}));
    let p = c
        .patch(
            &s,
            Some(&ns),
            "a",
            &json!([{"op": "remove", "path": "/metadata/labels/extra"}]),
            PatchType::Json,
        )
        .unwrap();
    assert_eq!(p["metadata"]["labels"], json!({"app": "t"}));

    let cm = Resource::new("v1", "ConfigMap", "configmaps", true);
    let applied = c
        .apply(&cm, Some(&ns), "cfg", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns}, "data": {"x": "1"}}), false, false)
        .unwrap();
    assert_eq!(applied["data"]["x"], json!("1"));
    assert!(applied["metadata"]["managedFields"]
        .to_string()
        .contains("proxshift"));

    assert!(c.delete(&s, Some(&ns), "a").unwrap());
    assert!(!c.delete(&s, Some(&ns), "a").unwrap());
    assert!(c.get(&s, Some(&ns), "a").unwrap().is_none());
}

#[test]
fn ensure_creates_updates_and_leaves_alone() {
    let c = env().admin();
    let mc = known::managed_clusters();
    let name = unique("ens");
    let desired = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": {"a": "1"}}, "spec": {"hubAcceptsClient": true}});
    // Check mode writes nothing.
    let e = c.ensure(&mc, &desired, Method::Merge, true).unwrap();
    assert_eq!(e.action.as_str(), "created");
    assert!(c.get(&mc, None, &name).unwrap().is_none());
    let e = c.ensure(&mc, &desired, Method::Merge, false).unwrap();
    assert_eq!(e.action.as_str(), "created");
    let uid = e.object.unwrap()["metadata"]["uid"].clone();
    assert_eq!(
        c.ensure(&mc, &desired, Method::Merge, false)
            .unwrap()
            .action
            .as_str(),
        "unchanged"
    );
    // A label someone else added survives; ours is merged in; the object is the same one (same uid).
    c.patch(
        &mc,
        None,
        &name,
        &json!({"metadata": {"labels": {"other": "x"}}}),
        PatchType::Merge,
    )
    .unwrap();
    let mut d2 = desired.clone();
    d2["metadata"]["labels"]["b"] = json!("2");
    let e = c.ensure(&mc, &d2, Method::Merge, false).unwrap();
    assert_eq!(e.action.as_str(), "updated");
    let obj = e.object.unwrap();
    assert_eq!(
        obj["metadata"]["labels"],
        json!({"a": "1", "b": "2", "other": "x"})
    );
    assert_eq!(obj["metadata"]["uid"], uid);
    assert_eq!(e.before["metadata"]["labels"], json!({"a": "1"}));
    assert_eq!(e.after["metadata"]["labels"], json!({"a": "1", "b": "2"}));
}

#[test]
fn errors_carry_the_api_message() {
    let env = env();
    let admin = env.admin();
    let ns = namespace(&admin);
    let s = known::secrets();
    admin.create(&s, Some(&ns), &secret(&ns, "dup")).unwrap();

    // 409 AlreadyExists
    let e = admin
        .create(&s, Some(&ns), &secret(&ns, "dup"))
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.to_string().contains("already exists"), "{e}");

    // 409 Conflict on a stale resourceVersion
    let cur = admin.get(&s, Some(&ns), "dup").unwrap().unwrap();
    let mut stale = cur.clone();
    admin
        .patch(
            &s,
            Some(&ns),
            "dup",
            &json!({"metadata": {"labels": {"v": "2"}}}),
            PatchType::Merge,
        )
        .unwrap();
    stale["metadata"]["labels"]["v"] = json!("stale");
    let e = admin.replace(&s, Some(&ns), "dup", &stale).unwrap_err();
    assert!(
        e.to_string().contains("HTTP 409 conflict") && e.to_string().contains("has been modified"),
        "{e}"
    );

    // 403 for the RBAC-limited token
    let viewer = env.client(VIEWER_TOKEN);
    let e = viewer.list(&s, Some(&ns), None).unwrap_err();
    assert_eq!(e.status(), Some(403));
    assert!(
        e.to_string().contains("cannot list resource \"secrets\""),
        "{e}"
    );

    // 401 for a bad token
    let e = env
        .client("not-a-token")
        .list(&s, Some(&ns), None)
        .unwrap_err();
    assert_eq!(e.status(), Some(401));
    assert!(e.to_string().contains("credentials were rejected"), "{e}");

    // 422 from real CRD schema validation
    let e = admin
        .create(
            &known::managed_clusters(),
            None,
            &json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": unique("bad")}, "spec": {"hubAcceptsClient": "yes-please"}}),
        )
        .unwrap_err();
    assert_eq!(e.status(), Some(422));
    assert!(e.to_string().contains("must be of type boolean"), "{e}");

    // Server-side apply conflict with another field manager
    let cm = Resource::new("v1", "ConfigMap", "configmaps", true);
    let obj = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned", "namespace": ns}, "data": {"x": v}});
    admin
        .send(
            "PATCH",
            &format!("{}?fieldManager=someone-else", cm.item(Some(&ns), "owned")),
            Some((
                "application/apply-patch+yaml",
                obj("1").to_string().into_bytes(),
            )),
        )
        .unwrap();
    let e = admin
        .apply(&cm, Some(&ns), "owned", &obj("2"), false, false)
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.to_string().contains("someone-else"), "{e}");
    assert_eq!(
        admin
            .apply(&cm, Some(&ns), "owned", &obj("2"), true, false)
            .unwrap()["data"]["x"],
        json!("2")
    );
}

#[test]
fn tls_ca_wrong_ca_insecure_and_client_certificates() {
    let env = env();
    let ok = ConnectionParams {
        host: Some(env.url.clone()),
        api_key: Some(kube_client::testenv::ADMIN_TOKEN.into()),
        ca_cert: Some(env.ca_path.clone()),
        validate_certs: true,
        ..Default::default()
    };
    Client::new(&ok.resolve().unwrap())
        .unwrap()
        .get_path("/api")
        .unwrap();

    let wrong = ConnectionParams {
        ca_cert: Some(env.wrong_ca_path.clone()),
        ..ok.clone()
    };
    let mut c = Client::new(&wrong.resolve().unwrap()).unwrap();
    c.set_backoff(proxshift_http::Backoff::none());
    let e = c.get_path("/api").unwrap_err();
    assert!(matches!(e, KubeError::Transport { .. }), "{e}");
    assert!(
        e.to_string().contains("UnknownIssuer") || e.to_string().contains("certificate"),
        "{e}"
    );

    let insecure = ConnectionParams {
        validate_certs: false,
        ..wrong
    };
    Client::new(&insecure.resolve().unwrap())
        .unwrap()
        .get_path("/api")
        .unwrap();

    // Installer-style kubeconfig: client certificate of system:masters, CA inline.
    let kc = ConnectionParams {
        kubeconfig: Some(env.admin_cert_kubeconfig.display().to_string()),
        validate_certs: true,
        ..Default::default()
    };
    let c = Client::new(&kc.resolve().unwrap()).unwrap();
    c.list(&known::namespaces(), None, None).unwrap();
    // The same kubeconfig as text.
    let text = std::fs::read_to_string(&env.admin_cert_kubeconfig).unwrap();
    let kc = ConnectionParams {
        kubeconfig: Some(text),
        validate_certs: true,
        ..Default::default()
    };
    Client::new(&kc.resolve().unwrap())
        .unwrap()
        .list(&known::namespaces(), None, None)
        .unwrap();
}

#[test]
fn waits_for_conditions_and_reports_pending() {
    let env = env();
    let c = env.admin();
    let mc = known::managed_clusters();
    let name = unique("wait");
    c.create(&mc, None, &json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster", "metadata": {"name": name}, "spec": {"hubAcceptsClient": true}})).unwrap();
    let wanted = [("ManagedClusterJoined", "True")];
    let e = c
        .wait_for_conditions(
            &mc,
            None,
            &name,
            &wanted,
            Duration::from_millis(600),
            Duration::from_millis(200),
        )
        .unwrap_err();
    match e {
        WaitError::Timeout { pending, .. } => assert!(
            pending.contains("ManagedClusterJoined=True (not reported yet)"),
            "{pending}"
        ),
        other => panic!("{other}"),
    }
    let n2 = name.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        TestEnv::shared()
            .admin()
            .patch_status(&known::managed_clusters(), None, &n2, &json!({"status": {"conditions": [{"type": "ManagedClusterJoined", "status": "True", "reason": "Joined", "message": "joined", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
            .unwrap();
    });
    let obj = c
        .wait_for_conditions(
            &mc,
            None,
            &name,
            &wanted,
            Duration::from_secs(20),
            Duration::from_millis(200),
        )
        .unwrap();
    t.join().unwrap();
    assert_eq!(obj["status"]["conditions"][0]["status"], json!("True"));
}

#[test]
fn discovery_resolves_crd_kinds() {
    let c = env().admin();
    let r = c
        .resolve(
            "agent.open-cluster-management.io/v1",
            "KlusterletAddonConfig",
        )
        .unwrap();
    assert_eq!(r, known::klusterlet_addon_configs());
    assert_eq!(c.resolve("v1", "Namespace").unwrap(), known::namespaces());
    assert!(c
        .resolve("nope.example.com/v1", "Thing")
        .unwrap_err()
        .to_string()
        .contains("CRD"));
}

#[test]
fn subresources_by_discovery_and_field_selectors() {
    let c = env().admin();
    // Evictions are policy/v1 since Kubernetes 1.22 (policy/v1beta1 before): discovery says which.
    assert_eq!(
        c.subresource_kind("v1", "pods/eviction")
            .expect("discovery"),
        Some(("policy/v1".to_string(), "Eviction".to_string()))
    );
    assert_eq!(
        c.subresource_kind("v1", "pods/no-such").expect("discovery"),
        None
    );
    let ns = namespace(&c);
    c.create(&known::secrets(), Some(&ns), &secret(&ns, "a"))
        .expect("create a");
    c.create(&known::secrets(), Some(&ns), &secret(&ns, "b"))
        .expect("create b");
    let only_b = c
        .list_selected(&known::secrets(), Some(&ns), None, Some("metadata.name=b"))
        .expect("list");
    let names: Vec<&str> = only_b
        .iter()
        .filter_map(|s| s.pointer("/metadata/name").and_then(|n| n.as_str()))
        .collect();
    assert_eq!(names, ["b"]);
}

#[test]
fn dry_runs_store_nothing_and_field_managers_are_named() {
    let c = env().admin();
    let ns = namespace(&c);
    let cm = Resource::new("v1", "ConfigMap", "configmaps", true);
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d", "namespace": ns}, "data": {"x": "1"}});
    // A dry-run apply answers with the defaulted object (uid, creation time) and stores nothing.
    let dry = c
        .apply_as(&cm, Some(&ns), "d", &obj, "someone", false, true)
        .unwrap();
    assert!(dry["metadata"]["uid"].is_string());
    assert!(c.get(&cm, Some(&ns), "d").unwrap().is_none());
    let real = c
        .apply_as(&cm, Some(&ns), "d", &obj, "someone", false, false)
        .unwrap();
    assert_eq!(
        real["metadata"]["managedFields"][0]["manager"],
        json!("someone")
    );
    // A dry-run delete reports that the object existed and leaves it.
    assert!(c.delete_with(&cm, Some(&ns), "d", true).unwrap());
    assert!(c.get(&cm, Some(&ns), "d").unwrap().is_some());
    assert!(c.delete_with(&cm, Some(&ns), "d", false).unwrap());
    assert!(!c.delete_with(&cm, Some(&ns), "d", true).unwrap());
    let audit = env().audited(|e| {
        e["requestURI"]
            .as_str()
            .is_some_and(|u| u.contains(&format!("/namespaces/{ns}/configmaps/d")))
            && e["verb"] == "delete"
    });
    assert!(!audit.is_empty());
}

#[test]
fn wait_until_reports_the_values_still_missing() {
    let c = env().admin();
    let ns = namespace(&c);
    let cm = Resource::new("v1", "ConfigMap", "configmaps", true);
    c.create(
        &cm,
        Some(&ns),
        &json!({"metadata": {"name": "w"}, "data": {"phase": "Pending"}}),
    )
    .unwrap();
    let got = c
        .wait_until(
            &cm,
            Some(&ns),
            "w",
            |o| kube_client::objects::unmet_values(o, &[("data.phase", Some("Pending"))]),
            Duration::from_secs(5),
            Duration::from_millis(100),
        )
        .unwrap();
    assert_eq!(got["data"]["phase"], json!("Pending"));
    match c.wait_until(
        &cm,
        Some(&ns),
        "w",
        |o| kube_client::objects::unmet_values(o, &[("data.phase", Some("Done"))]),
        Duration::ZERO,
        Duration::from_millis(100),
    ) {
        Err(WaitError::Timeout { pending, .. }) => {
            assert_eq!(
                pending,
                format!("ConfigMap {ns}/w: data.phase=Done (now Pending)")
            )
        }
        other => panic!("{other:?}"),
    }
}
