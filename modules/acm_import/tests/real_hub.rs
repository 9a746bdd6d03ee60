//! acm_import end to end against a real kube-apiserver 1.34 + etcd with the upstream ACM CRDs.
//! The test plays the hub's controllers: it renders `<cluster>-import`, patches ManagedCluster
//! conditions and deletes the auto-import-secret after "importing". The spoke is the same API server
//! reached under another name (`localhost` instead of `127.0.0.1`, both in its certificate), since
//! the hub's own URL is refused as a spoke; no test here creates a ClusterVersion, so the two share
//! no cluster ID either.

use std::time::Duration;

use base64::Engine;
use kube_client::objects::{known, Resource};
use kube_client::testenv::{unique, TestEnv, ADMIN_TOKEN, VIEWER_TOKEN};
use module_testkit::TestModule;
use serde_json::{json, Value};

const SPOKE_TOKEN: &str = "spoke-token-canary-3e8d";

fn env() -> &'static TestEnv {
    TestEnv::with_crds()
}

/// The module as Ansible runs it; no result may show the hub's or the spoke's token.
fn acm_import() -> TestModule {
    TestModule::new("acm_import", acm_import::argument_spec(), acm_import::run)
        .hiding(ADMIN_TOKEN)
        .hiding(SPOKE_TOKEN)
}

fn ok(args: Value) -> Value {
    acm_import().ok(&args)
}

fn failed(args: Value) -> Value {
    acm_import().failed(&args)
}

fn hub_args(env: &TestEnv, cluster: &str) -> Value {
    json!({"cluster_name": cluster, "hub_host": env.url, "hub_api_key": ADMIN_TOKEN,
           "hub_ca_cert": env.ca_path.display().to_string(), "poll_interval": 1, "wait_timeout": 20})
}

/// A kubeconfig for the same server under the name `localhost`: a spoke that is not the hub's URL.
fn spoke_kubeconfig(env: &TestEnv, token: &str) -> String {
    env.kubeconfig(token)
        .replace("https://127.0.0.1:", "https://localhost:")
}

fn merged(mut a: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        a[k] = v.clone();
    }
    a
}

fn cond(t: &str, s: &str) -> Value {
    json!({"type": t, "status": s, "reason": "Test", "message": format!("{t} {s}"), "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn actions(r: &Value) -> Vec<String> {
    r["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} {}",
                a["object"].as_str().unwrap(),
                a["action"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn auto_import_check_create_rerun_labels_and_join() {
    let env = env();
    let hub = env.admin();
    let c = unique("auto");
    let base = merged(
        hub_args(env, &c),
        json!({"spoke_host": "https://api.spoke.example.com:6443", "spoke_api_key": SPOKE_TOKEN,
        "labels": {"env": "lab"}, "clusterset": "lab-set", "addons": {"search_collector": false}}),
    );

    // Check mode with diff: reports everything, writes nothing.
    let r = ok(merged(
        base.clone(),
        json!({"_ansible_check_mode": true, "_ansible_diff": true}),
    ));
    assert_eq!(r["changed"], json!(true));
    assert_eq!(r["diff"].as_array().unwrap().len(), 4, "{r:#}");
    assert!(hub.get(&known::namespaces(), None, &c).unwrap().is_none());
    assert!(!r.to_string().contains(SPOKE_TOKEN));

    // The real run, in the documented order.
    let r = ok(base.clone());
    assert_eq!(r["changed"], json!(true));
    assert_eq!(
        actions(&r),
        vec![
            format!("Namespace {c} created"),
            format!("Secret {c}/auto-import-secret created"),
            format!("ManagedCluster {c} created"),
            format!("KlusterletAddonConfig {c}/{c} created"),
        ]
    );
    let secret = hub
        .get(&known::secrets(), Some(&c), "auto-import-secret")
        .unwrap()
        .unwrap();
    assert_eq!(secret["data"]["token"], json!(b64(SPOKE_TOKEN)));
    assert_eq!(secret["data"]["autoImportRetry"], json!(b64("5")));
    assert_eq!(
        secret["data"]["server"],
        json!(b64("https://api.spoke.example.com:6443"))
    );
    let mc = hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .unwrap();
    let uid = mc["metadata"]["uid"].clone();
    assert_eq!(mc["spec"]["hubAcceptsClient"], json!(true));
    assert_eq!(
        mc["metadata"]["labels"]["cluster.open-cluster-management.io/clusterset"],
        json!("lab-set")
    );
    assert_eq!(mc["metadata"]["labels"]["env"], json!("lab"));
    assert_eq!(mc["metadata"]["labels"]["cloud"], json!("auto-detect"));
    let kac = hub
        .get(&known::klusterlet_addon_configs(), Some(&c), &c)
        .unwrap()
        .unwrap();
    assert_eq!(kac["spec"]["searchCollector"]["enabled"], json!(false));
    assert_eq!(kac["spec"]["policyController"]["enabled"], json!(true));

    let w = r["warnings"].to_string();
    assert!(
        w.contains("ManagedClusterSet \\\"lab-set\\\" does not exist"),
        "{w}"
    );

    // Rerun: nothing to do. With the clusterset created, no warning either.
    hub.create(
        &Resource::new("cluster.open-cluster-management.io/v1beta2", "ManagedClusterSet", "managedclustersets", false),
        None,
        &json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet", "metadata": {"name": "lab-set"}, "spec": {}}),
    )
    .unwrap();
    let r = ok(base.clone());
    assert_eq!(r["changed"], json!(false), "{r:#}");
    assert!(r.get("warnings").is_none(), "{r:#}");

    // The hub detects cloud/vendor and adds its own label; a label change must merge, not reset them.
    hub.patch(&known::managed_clusters(), None, &c, &json!({"metadata": {"labels": {"cloud": "Other", "vendor": "OpenShift", "feature.open-cluster-management.io/addon-x": "available"}}}), kube_client::PatchType::Merge).unwrap();
    let r = ok(merged(
        base.clone(),
        json!({"labels": {"env": "prod", "team": "infra"}, "_ansible_diff": true}),
    ));
    assert_eq!(r["changed"], json!(true));
    assert_eq!(
        r["diff"]["before"]["metadata"]["labels"]["env"],
        json!("lab"),
        "{r:#}"
    );
    assert_eq!(
        r["diff"]["after"]["metadata"]["labels"]["env"],
        json!("prod")
    );
    let mc = hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .unwrap();
    assert_eq!(
        mc["metadata"]["uid"], uid,
        "the ManagedCluster must be updated in place"
    );
    let l = &mc["metadata"]["labels"];
    assert_eq!(
        (
            l["env"].clone(),
            l["team"].clone(),
            l["cloud"].clone(),
            l["vendor"].clone()
        ),
        (
            json!("prod"),
            json!("infra"),
            json!("Other"),
            json!("OpenShift")
        )
    );
    assert_eq!(
        l["feature.open-cluster-management.io/addon-x"],
        json!("available")
    );

    // wait: true times out while the klusterlet has not joined, and says which conditions are missing.
    let r = failed(merged(
        base.clone(),
        json!({"labels": {"env": "prod", "team": "infra"}, "wait": true, "wait_timeout": 2}),
    ));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("ManagedClusterJoined=True (not reported yet)")
            && msg.contains("ManagedClusterConditionAvailable=True"),
        "{msg}"
    );

    // The hub imports: conditions appear, the auto-import-secret is consumed.
    let c2 = c.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let hub = TestEnv::shared().admin();
        hub.patch_status(&known::managed_clusters(), None, &c2, &json!({"status": {"conditions": [
            cond("HubAcceptedManagedCluster", "True"), cond("ManagedClusterImportSucceeded", "True"),
            cond("ManagedClusterJoined", "True"), cond("ManagedClusterConditionAvailable", "True")]}})).unwrap();
        hub.delete(&known::secrets(), Some(&c2), "auto-import-secret")
            .unwrap();
    });
    let r = ok(merged(
        base.clone(),
        json!({"labels": {"env": "prod", "team": "infra"}, "wait": true, "wait_timeout": 30}),
    ));
    t.join().unwrap();
    assert_eq!(
        (r["joined"].clone(), r["available"].clone()),
        (json!(true), json!(true)),
        "{r:#}"
    );
    assert!(r["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "ManagedClusterImportSucceeded"));

    // Imported: the consumed auto-import-secret is not recreated, and nothing changes.
    let r = ok(merged(
        base,
        json!({"labels": {"env": "prod", "team": "infra"}}),
    ));
    assert_eq!(r["changed"], json!(false), "{r:#}");
    assert!(actions(&r)
        .iter()
        .any(|a| a.contains("auto-import-secret skipped")));
    assert!(hub
        .get(&known::secrets(), Some(&c), "auto-import-secret")
        .unwrap()
        .is_none());
}

#[test]
fn auto_import_with_spoke_kubeconfig_and_keep_annotation() {
    let env = env();
    let c = unique("kc");
    let kc = spoke_kubeconfig(env, SPOKE_TOKEN);
    let r = ok(merged(
        hub_args(env, &c),
        json!({"spoke_kubeconfig": kc, "keep_auto_import_secret": true, "klusterlet_addon_config": false}),
    ));
    assert_eq!(actions(&r).len(), 3);
    let s = env
        .admin()
        .get(&known::secrets(), Some(&c), "auto-import-secret")
        .unwrap()
        .unwrap();
    let decoded = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(s["data"]["kubeconfig"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(decoded, kc);
    assert!(s["metadata"]["annotations"].get("managedcluster-import-controller.open-cluster-management.io/keeping-auto-import-secret").is_some());
    assert!(!r.to_string().contains(SPOKE_TOKEN));
    // A broken spoke kubeconfig is caught before anything is written.
    let r = failed(merged(
        hub_args(env, &unique("bad")),
        json!({"spoke_kubeconfig": "apiVersion: v1\nclusters: []\n"}),
    ));
    assert!(
        r["msg"].as_str().unwrap().contains("spoke_kubeconfig"),
        "{r}"
    );
}

fn klusterlet_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        // Like controller-gen output: a null creationTimestamp and an empty status.
        "metadata": {"name": "klusterlets.operator.open-cluster-management.io", "creationTimestamp": null},
        "status": {"acceptedNames": {"kind": "", "plural": ""}, "conditions": [], "storedVersions": []},
        "spec": {"group": "operator.open-cluster-management.io", "scope": "Cluster",
            "names": {"kind": "Klusterlet", "listKind": "KlusterletList", "plural": "klusterlets", "singular": "klusterlet"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
}

/// What the hub's import controller renders into `<cluster>-import` (trimmed to a few objects).
fn import_secret(c: &str, agent_ns: &str, bootstrap: &str) -> Value {
    let crds = serde_yaml_ng::to_string(&klusterlet_crd()).unwrap();
    let docs = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": agent_ns}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "klusterlet", "namespace": agent_ns}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "bootstrap-hub-kubeconfig", "namespace": agent_ns},
            "data": {"kubeconfig": b64(bootstrap)}}),
        json!({"apiVersion": "operator.open-cluster-management.io/v1", "kind": "Klusterlet", "metadata": {"name": format!("klusterlet-{c}")},
            "spec": {"clusterName": c, "namespace": agent_ns, "deployOption": {"mode": "Singleton"}}}),
    ];
    let import: Vec<String> = docs
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).unwrap())
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{c}-import"), "namespace": c},
        "data": {"crds.yaml": b64(&format!("---\n{crds}")), "import.yaml": b64(&format!("---\n{}", import.join("---\n"))),
                 "expiration": b64("2027-11-27T00:00:00Z"), "creation": b64("2026-12-02T00:00:00Z")}})
}

/// The hub rotates the import manifests (a new bootstrap kubeconfig).
fn rerender_import(c: &str, agent_ns: &str, bootstrap: &str) {
    let hub = TestEnv::shared().admin();
    let sec = known::secrets();
    let name = format!("{c}-import");
    let mut s = import_secret(c, agent_ns, bootstrap);
    s["metadata"]["resourceVersion"] =
        hub.get(&sec, Some(c), &name).unwrap().unwrap()["metadata"]["resourceVersion"].clone();
    hub.replace(&sec, Some(c), &name, &s).unwrap();
}

/// Someone edits the bootstrap secret by hand with server-side apply (field manager `kubectl-edit`).
fn hand_edit(agent_ns: &str, force: bool) -> Result<Vec<u8>, kube_client::KubeError> {
    let sec = known::secrets();
    let body = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "bootstrap-hub-kubeconfig", "namespace": agent_ns},
        "data": {"kubeconfig": b64("edited-by-hand")}});
    let path = format!(
        "{}?fieldManager=kubectl-edit{}",
        sec.item(Some(agent_ns), "bootstrap-hub-kubeconfig"),
        if force { "&force=true" } else { "" }
    );
    TestEnv::shared().admin().send(
        "PATCH",
        &path,
        Some((
            "application/apply-patch+yaml",
            body.to_string().into_bytes(),
        )),
    )
}

#[test]
fn manual_import_waits_for_the_import_secret_and_applies_it() {
    let env = env();
    let hub = env.admin();
    let c = unique("man");
    let agent_ns = format!("ocm-agent-{c}");
    let args = merged(
        hub_args(env, &c),
        json!({"mode": "manual", "spoke_kubeconfig": spoke_kubeconfig(env, ADMIN_TOKEN), "wait_timeout": 30}),
    );

    // The hub renders the import secret a moment after the ManagedCluster appears.
    let (c2, ns2) = (c.clone(), agent_ns.clone());
    let t = std::thread::spawn(move || {
        let hub = TestEnv::shared().admin();
        for _ in 0..100 {
            if hub
                .get(&known::managed_clusters(), None, &c2)
                .unwrap()
                .is_some()
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(1200));
        hub.create(
            &known::secrets(),
            Some(&c2),
            &import_secret(&c2, &ns2, "bootstrap-v1"),
        )
        .unwrap();
    });
    let r = ok(args.clone());
    t.join().unwrap();
    assert_eq!(r["changed"], json!(true));
    let spoke: Vec<String> = r["spoke_objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{} {} ({})",
                o["object"].as_str().unwrap(),
                o["action"].as_str().unwrap(),
                o["from"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(spoke, vec![
        "CustomResourceDefinition klusterlets.operator.open-cluster-management.io created (crds.yaml)".to_string(),
        format!("Namespace {agent_ns} created (import.yaml)"),
        format!("ServiceAccount {agent_ns}/klusterlet created (import.yaml)"),
        format!("Secret {agent_ns}/bootstrap-hub-kubeconfig created (import.yaml)"),
        format!("Klusterlet klusterlet-{c} created (import.yaml)"),
    ]);
    let kl = Resource::new(
        "operator.open-cluster-management.io/v1",
        "Klusterlet",
        "klusterlets",
        false,
    );
    let obj = hub
        .get(&kl, None, &format!("klusterlet-{c}"))
        .unwrap()
        .unwrap();
    assert_eq!(obj["spec"]["clusterName"], json!(c));
    assert!(
        hub.get(&known::secrets(), Some(&c), "auto-import-secret")
            .unwrap()
            .is_none(),
        "manual mode writes no auto-import-secret"
    );

    // Rerun: unchanged everywhere.
    let r = ok(args.clone());
    assert_eq!(r["changed"], json!(false), "{r:#}");

    // Someone else owns a field of the bootstrap secret now; a new bootstrap from the hub conflicts.
    let sec = known::secrets();
    // A plain apply by another manager over our field is itself a conflict; force it, as a human would.
    assert!(hand_edit(&agent_ns, false).unwrap_err().is_conflict());
    hand_edit(&agent_ns, true).unwrap();
    rerender_import(&c, &agent_ns, "bootstrap-v2");
    let r = failed(args.clone());
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("HTTP 409 conflict")
            && msg.contains("kubectl-edit")
            && msg.contains("force_conflicts"),
        "{msg}"
    );
    let r = ok(merged(args.clone(), json!({"force_conflicts": true})));
    assert_eq!(r["changed"], json!(true));
    let s = hub
        .get(&sec, Some(&agent_ns), "bootstrap-hub-kubeconfig")
        .unwrap()
        .unwrap();
    assert_eq!(s["data"]["kubeconfig"], json!(b64("bootstrap-v2")));

    // Once joined, the (rotating) import manifests are not reapplied.
    hub.patch_status(&known::managed_clusters(), None, &c, &json!({"status": {"conditions": [cond("ManagedClusterJoined", "True"), cond("ManagedClusterConditionAvailable", "True")]}})).unwrap();
    rerender_import(&c, &agent_ns, "bootstrap-v3");
    let r = ok(merged(args, json!({"wait": true})));
    assert_eq!(r["changed"], json!(false), "{r:#}");
    assert_eq!(r["joined"], json!(true));
}

#[test]
fn manual_import_check_mode_predicts_without_writing() {
    let env = env();
    let hub = env.admin();
    let c = unique("mchk");
    let agent_ns = format!("ocm-agent-{c}");
    let args = merged(
        hub_args(env, &c),
        json!({"mode": "manual", "spoke_kubeconfig": spoke_kubeconfig(env, ADMIN_TOKEN), "wait_timeout": 30}),
    );
    // Nothing on the hub yet: check mode neither waits for the import secret nor writes.
    let r = ok(merged(args.clone(), json!({"_ansible_check_mode": true})));
    assert_eq!(r["changed"], json!(true));
    assert!(
        actions(&r)
            .iter()
            .any(|a| a == "import manifests would be applied once the hub renders them"),
        "check mode must predict the spoke's objects instead of waiting: {r:#}"
    );
    assert!(hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .is_none());
    // The hub objects exist and the import secret is rendered, with a kind the spoke does not know yet.
    hub.create(
        &known::namespaces(),
        None,
        &json!({"metadata": {"name": c}}),
    )
    .unwrap();
    hub.create(&known::managed_clusters(), None, &resources_mc(&c))
        .unwrap();
    let mut secret = import_secret(&c, &agent_ns, "bootstrap-v1");
    let unknown_kind = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "example.proxshift.io/v1", "kind": "Gadget", "metadata": {"name": "g1"}}]});
    let docs = format!(
        "{}---\n{}",
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"]["crds.yaml"].as_str().unwrap())
                .unwrap()
        )
        .unwrap(),
        serde_yaml_ng::to_string(&unknown_kind).unwrap()
    );
    secret["data"]["crds.yaml"] = json!(b64(&docs));
    hub.create(&known::secrets(), Some(&c), &secret).unwrap();
    let r = ok(merged(args, json!({"_ansible_check_mode": true})));
    assert_eq!(r["changed"], json!(true));
    let objs = r["spoke_objects"].to_string();
    assert!(
        objs.contains("Gadget g1") && objs.contains(&format!("Namespace {agent_ns}")),
        "{objs}"
    );
    assert!(
        hub.get(&known::namespaces(), None, &agent_ns)
            .unwrap()
            .is_none(),
        "check mode wrote to the spoke"
    );
}

/// `site.yaml --check` on a cluster never installed: its kubeconfig is a file the install has not written yet.
/// The hub is read and the import predicted from it (both modes, the wait asked for but not awaited); outside
/// check mode the missing file is an error.
#[test]
fn check_mode_on_a_cluster_not_installed_yet_predicts_from_the_hub_alone() {
    let env = env();
    let hub = env.admin();
    let c = unique("fresh");
    let missing = std::env::temp_dir()
        .join(format!("{c}-never-installed"))
        .join("kubeconfig");
    let args = merged(
        hub_args(env, &c),
        json!({"spoke_kubeconfig": missing.display().to_string(), "wait": true}),
    );
    let check = json!({"_ansible_check_mode": true, "_ansible_diff": true});
    let r = ok(merged(args.clone(), check.clone()));
    assert_eq!(r["changed"], json!(true));
    assert_eq!(
        actions(&r),
        vec![
            format!("Namespace {c} created"),
            format!("Secret {c}/auto-import-secret would be created from the cluster's kubeconfig once the install writes it"),
            format!("ManagedCluster {c} created"),
            format!("KlusterletAddonConfig {c}/{c} created"),
        ]
    );
    assert_eq!(r["diff"].as_array().unwrap().len(), 3, "{r:#}");
    assert_eq!(r["spoke_cluster_id"], Value::Null);
    assert!(r["spoke_cluster_id_error"]
        .as_str()
        .unwrap()
        .starts_with("not installed yet"));
    let r = ok(merged(
        merged(args.clone(), check),
        json!({"mode": "manual"}),
    ));
    assert!(
        actions(&r).contains(&"import manifests would be applied once the cluster is installed and the hub renders them".to_string()),
        "{r:#}"
    );
    assert!(hub.get(&known::namespaces(), None, &c).unwrap().is_none());
    let r = failed(args);
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .starts_with("cannot read spoke_kubeconfig"),
        "{r:#}"
    );
}

fn resources_mc(c: &str) -> Value {
    json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster", "metadata": {"name": c}, "spec": {"hubAcceptsClient": true}})
}

#[test]
fn manual_import_times_out_without_the_import_secret() {
    let env = env();
    let c = unique("noimp");
    let r = failed(merged(
        hub_args(env, &c),
        json!({"mode": "manual", "spoke_kubeconfig": spoke_kubeconfig(env, ADMIN_TOKEN), "wait_timeout": 2}),
    ));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!("Secret {c}/{c}-import to be rendered")),
        "{msg}"
    );
    assert_eq!(
        r["changed"],
        json!(true),
        "the hub objects were written before the wait"
    );
}

#[test]
fn rbac_forbidden_on_the_hub() {
    let env = env();
    let c = unique("rbac");
    let r = failed(merged(
        hub_args(env, &c),
        json!({"hub_api_key": VIEWER_TOKEN, "spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN}),
    ));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("HTTP 403 forbidden")
            && msg.contains("User \"viewer\" cannot get resource \"managedclusters\""),
        "{msg}"
    );
    assert_eq!(r["changed"], json!(false));
}

#[test]
fn detach_deletes_and_waits_and_times_out_on_stuck_namespaces() {
    let env = env();
    assert!(env.controller_manager, "detach tests need kube-controller-manager (namespace deletion) in KUBEBUILDER_ASSETS; run scripts/deps/kube.sh");
    let hub = env.admin();
    let c = unique("det");
    let present = merged(
        hub_args(env, &c),
        json!({"spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN}),
    );
    ok(present.clone());
    let absent = merged(
        hub_args(env, &c),
        json!({"state": "absent", "wait_timeout": 60}),
    );

    let r = ok(merged(absent.clone(), json!({"_ansible_check_mode": true})));
    assert_eq!(r["changed"], json!(true));
    assert!(hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .is_some());

    let r = ok(absent.clone());
    assert_eq!(r["changed"], json!(true));
    assert_eq!(
        actions(&r),
        vec![
            format!("ManagedCluster {c} deleted"),
            format!("Namespace {c} deleted")
        ]
    );
    assert!(hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .is_none());
    assert!(hub.get(&known::namespaces(), None, &c).unwrap().is_none());
    let r = ok(absent);
    assert_eq!(r["changed"], json!(false));

    // A namespace that cannot finish deleting (the import's own KlusterletAddonConfig has a finalizer
    // nobody removes).
    let c = unique("stuck");
    ok(merged(
        hub_args(env, &c),
        json!({"spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN}),
    ));
    let kac = known::klusterlet_addon_configs();
    hub.patch(
        &kac,
        Some(&c),
        &c,
        &json!({"metadata": {"finalizers": ["example.com/hold"]}}),
        kube_client::PatchType::Merge,
    )
    .unwrap();
    let r = failed(merged(
        hub_args(env, &c),
        json!({"state": "absent", "wait_timeout": 4}),
    ));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!("Namespace {c} to be deleted")) && msg.contains("Terminating"),
        "{msg}"
    );
    assert_eq!(r["changed"], json!(true));
    // Re-importing into a namespace that is still terminating is refused with a clear message.
    let r = failed(merged(
        hub_args(env, &c),
        json!({"spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN}),
    ));
    assert!(r["msg"].as_str().unwrap().contains("being deleted"), "{r}");
    hub.patch(
        &kac,
        Some(&c),
        &c,
        &json!({"metadata": {"finalizers": null}}),
        kube_client::PatchType::Merge,
    )
    .unwrap();
    ok(merged(
        hub_args(env, &c),
        json!({"state": "absent", "wait_timeout": 60}),
    ));
}

#[test]
fn importing_the_hub_into_itself_is_refused_before_any_write() {
    let env = env();
    let c = unique("self");
    for spoke in [
        json!({"spoke_kubeconfig": env.kubeconfig(ADMIN_TOKEN)}),
        json!({"spoke_host": format!("{}/", env.url), "spoke_api_key": SPOKE_TOKEN}),
    ] {
        let r = failed(merged(hub_args(env, &c), spoke));
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("refusing to import the hub into itself")
                && msg.contains(&format!("API URL {} is the hub's", env.url)),
            "{msg}"
        );
        assert_eq!(r["changed"], json!(false));
        assert_eq!(r["actions"], json!([]));
    }
    let hub = env.admin();
    assert!(hub.get(&known::namespaces(), None, &c).unwrap().is_none());
    assert!(hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .is_none());
}

#[test]
fn the_spoke_cluster_id_is_recorded_on_the_managed_cluster() {
    // The spoke here is not OpenShift (no ClusterVersion): nothing to record, and no re-import.
    let env = env();
    let c = unique("noid");
    let args = merged(
        hub_args(env, &c),
        json!({"spoke_kubeconfig": spoke_kubeconfig(env, ADMIN_TOKEN), "klusterlet_addon_config": false}),
    );
    let r = ok(args.clone());
    assert_eq!(r["changed"], json!(true));
    let mc = env
        .admin()
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .unwrap();
    assert!(mc.pointer("/metadata/annotations").is_none(), "{mc:#}");
    assert_eq!(ok(args)["changed"], json!(false));
}

#[test]
fn imported_means_joined_and_available() {
    let env = env();
    let hub = env.admin();
    let c = unique("joinav");
    let args = merged(
        hub_args(env, &c),
        json!({"spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN, "auto_import_retry": 2}),
    );
    ok(args.clone());
    let sec = known::secrets();
    let secret = hub
        .get(&sec, Some(&c), "auto-import-secret")
        .unwrap()
        .unwrap();
    assert_eq!(secret["data"]["autoImportRetry"], json!(b64("2")));

    // The hub's import controller retried once and counted down: a rerun leaves its count alone.
    hub.patch(
        &sec,
        Some(&c),
        "auto-import-secret",
        &json!({"data": {"autoImportRetry": b64("1")}}),
        kube_client::PatchType::Merge,
    )
    .unwrap();
    let r = ok(args.clone());
    assert_eq!(r["changed"], json!(false), "{r:#}");
    let secret = hub
        .get(&sec, Some(&c), "auto-import-secret")
        .unwrap()
        .unwrap();
    assert_eq!(secret["data"]["autoImportRetry"], json!(b64("1")));

    // The klusterlet was deployed and joined but the cluster is not available: not imported yet, so
    // the consumed auto-import-secret is written again (with the option's count).
    hub.patch_status(
        &known::managed_clusters(),
        None,
        &c,
        &json!({"status": {"conditions": [
        cond("ManagedClusterImportSucceeded", "True"), cond("ManagedClusterJoined", "True"),
        cond("ManagedClusterConditionAvailable", "Unknown")]}}),
    )
    .unwrap();
    hub.delete(&sec, Some(&c), "auto-import-secret").unwrap();
    let r = ok(args.clone());
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert!(
        actions(&r).contains(&format!("Secret {c}/auto-import-secret created")),
        "{r:#}"
    );
    assert_eq!(
        (r["joined"].clone(), r["available"].clone()),
        (json!(true), json!(false))
    );
    let secret = hub
        .get(&sec, Some(&c), "auto-import-secret")
        .unwrap()
        .unwrap();
    assert_eq!(secret["data"]["autoImportRetry"], json!(b64("2")));

    // Joined and available: imported; the secret is no longer written.
    hub.patch_status(
        &known::managed_clusters(),
        None,
        &c,
        &json!({"status": {"conditions": [
        cond("ManagedClusterImportSucceeded", "True"), cond("ManagedClusterJoined", "True"),
        cond("ManagedClusterConditionAvailable", "True")]}}),
    )
    .unwrap();
    hub.delete(&sec, Some(&c), "auto-import-secret").unwrap();
    let r = ok(args.clone());
    assert_eq!(r["changed"], json!(false), "{r:#}");
    assert!(actions(&r).contains(&format!(
        "Secret {c}/auto-import-secret skipped (cluster already imported)"
    )));
    assert!(hub
        .get(&sec, Some(&c), "auto-import-secret")
        .unwrap()
        .is_none());

    // A count the import controller cannot use is refused, naming the option.
    let r = failed(merged(args, json!({"auto_import_retry": -1})));
    assert!(
        r["msg"].as_str().unwrap().contains("auto_import_retry"),
        "{r}"
    );
}

#[test]
fn detach_keeps_a_namespace_holding_other_objects() {
    let env = env();
    assert!(env.controller_manager, "detach tests need kube-controller-manager (namespace deletion) in KUBEBUILDER_ASSETS; run scripts/deps/kube.sh");
    let hub = env.admin();
    let c = unique("keep");
    ok(merged(
        hub_args(env, &c),
        json!({"spoke_host": "https://s:6443", "spoke_api_key": SPOKE_TOKEN}),
    ));
    // What the hub's import controller adds, and what a person added.
    let sec = known::secrets();
    hub.create(
        &sec,
        Some(&c),
        &json!({"metadata": {"name": format!("{c}-import")}, "data": {}}),
    )
    .unwrap();
    hub.create(
        &sec,
        Some(&c),
        &json!({"metadata": {"name": "bmc-credentials"}, "type": "Opaque",
        "data": {"password": b64("x")}}),
    )
    .unwrap();
    let cm = Resource::new("v1", "ConfigMap", "configmaps", true);
    hub.create(
        &cm,
        Some(&c),
        &json!({"metadata": {"name": "notes"}, "data": {"a": "b"}}),
    )
    .unwrap();
    let absent = merged(
        hub_args(env, &c),
        json!({"state": "absent", "wait_timeout": 60}),
    );

    // Check mode already says what would be kept, and deletes nothing.
    let r = ok(merged(absent.clone(), json!({"_ansible_check_mode": true})));
    assert_eq!(r["changed"], json!(true));
    let kept = json!([
        format!("Secret {c}/bmc-credentials"),
        format!("ConfigMap {c}/notes")
    ]);
    assert_eq!(r["kept_objects"], kept, "{r:#}");
    assert!(hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .is_some());

    let r = ok(absent.clone());
    assert_eq!(r["changed"], json!(true));
    assert_eq!(r["kept_objects"], kept, "{r:#}");
    let a = actions(&r);
    assert_eq!(a[0], format!("ManagedCluster {c} deleted"));
    assert!(a[1].starts_with(&format!("Namespace {c} kept (it holds objects the import did not create: Secret {c}/bmc-credentials, ConfigMap {c}/notes")), "{a:?}");
    assert!(r["msg"].as_str().unwrap().contains("kept"), "{r}");
    assert!(r["warnings"].to_string().contains("bmc-credentials"), "{r}");
    assert!(hub
        .get(&known::managed_clusters(), None, &c)
        .unwrap()
        .is_none());
    let ns = hub.get(&known::namespaces(), None, &c).unwrap().unwrap();
    assert!(
        ns.pointer("/metadata/deletionTimestamp").is_none(),
        "{ns:#}"
    );
    assert!(hub
        .get(&sec, Some(&c), "bmc-credentials")
        .unwrap()
        .is_some());

    // Once they are gone the namespace goes too (the hub's own objects do not hold it).
    hub.delete(&sec, Some(&c), "bmc-credentials").unwrap();
    hub.delete(&cm, Some(&c), "notes").unwrap();
    let r = ok(absent);
    assert_eq!(actions(&r), vec![format!("Namespace {c} deleted")]);
    assert_eq!(r["kept_objects"], json!([]));
    assert!(hub.get(&known::namespaces(), None, &c).unwrap().is_none());
}
