//! acm_cluster_info against a real kube-apiserver 1.34 + etcd with the upstream ACM CRDs: the test
//! writes ManagedClusters (playing the hub's controllers for their status) and reads them back in
//! check mode; the objects' resourceVersions show nothing was changed.

use kube_client::objects::known;
use kube_client::testenv::{unique, TestEnv, ADMIN_TOKEN, VIEWER_TOKEN};
use module_testkit::TestModule;
use serde_json::{json, Value};

fn env() -> &'static TestEnv {
    TestEnv::with_crds()
}

fn module(args: Value) -> (Value, i32) {
    TestModule::new(
        "acm_cluster_info",
        acm_cluster_info::argument_spec(),
        acm_cluster_info::run,
    )
    .run(&args)
}

fn hub_args(env: &TestEnv, more: Value) -> Value {
    let mut a = json!({"hub_host": env.url, "hub_api_key": ADMIN_TOKEN,
                       "hub_ca_cert": env.ca_path.display().to_string(), "_ansible_check_mode": true});
    for (k, v) in more.as_object().unwrap() {
        a[k] = v.clone();
    }
    a
}

fn cond(t: &str, s: &str) -> Value {
    json!({"type": t, "status": s, "reason": "Test", "message": format!("{t} {s}"),
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

fn managed_cluster(name: &str, label: &str, joined: bool) -> String {
    let hub = env().admin();
    let r = known::managed_clusters();
    hub.create(
        &r,
        None,
        &json!({"apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster", "metadata": {"name": name, "labels": {"suite": label}},
        "spec": {"hubAcceptsClient": true}}),
    )
    .unwrap();
    let status = if joined { "True" } else { "False" };
    let obj = hub
        .patch_status(
            &r,
            None,
            name,
            &json!({"status": {"conditions": [
            cond("HubAcceptedManagedCluster", "True"), cond("ManagedClusterJoined", status),
            cond("ManagedClusterConditionAvailable", status)],
            "clusterClaims": [{"name": "id.k8s.io", "value": name}]}}),
        )
        .unwrap();
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

fn resource_version(name: &str) -> String {
    let obj = env()
        .admin()
        .get(&known::managed_clusters(), None, name)
        .unwrap()
        .unwrap();
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn reads_by_name_and_by_label_in_check_mode_without_changing_anything() {
    let env = env();
    let label = unique("suite");
    let (a, b) = (unique("joined"), unique("pending"));
    let rv_a = managed_cluster(&a, &label, true);
    let rv_b = managed_cluster(&b, &label, false);

    let (r, code) = module(hub_args(env, json!({"name": a})));
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["changed"], json!(false));
    let c = &r["clusters"][0];
    assert_eq!(c["name"], json!(a));
    assert_eq!(
        (
            c["accepted"].clone(),
            c["joined"].clone(),
            c["available"].clone()
        ),
        (json!(true), json!(true), json!(true))
    );
    assert_eq!(c["cluster_claims"]["id.k8s.io"], json!(a));
    assert_eq!(c["labels"]["suite"], json!(label));

    let (r, code) = module(hub_args(
        env,
        json!({"label_selector": format!("suite={label}")}),
    ));
    assert_eq!(code, 0, "{r:#}");
    let mut found: Vec<(String, bool)> = r["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["joined"].as_bool().unwrap(),
            )
        })
        .collect();
    found.sort();
    let mut want = vec![(a.clone(), true), (b.clone(), false)];
    want.sort();
    assert_eq!(found, want);
    assert_eq!((resource_version(&a), resource_version(&b)), (rv_a, rv_b));
}

#[test]
fn a_missing_cluster_is_an_empty_list_and_errors_hide_the_token() {
    let env = env();
    let (r, code) = module(hub_args(env, json!({"name": unique("absent")})));
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["clusters"], json!([]));

    // The viewer token may not list ManagedClusters: a clear failure without the token in it.
    let mut args = hub_args(env, json!({}));
    args["hub_api_key"] = json!(VIEWER_TOKEN);
    let (r, code) = module(args);
    let text = r.to_string();
    if code == 1 {
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("listing ManagedClusters"),
            "{r:#}"
        );
    }
    assert!(
        !text.contains(VIEWER_TOKEN) && !text.contains(ADMIN_TOKEN),
        "{text}"
    );
}
