//! `proxshift.openshift.acm_cluster_info`: list the ManagedClusters of an ACM / open-cluster-management
//! hub (one by name, or by label selector) with their labels, conditions and the states a playbook
//! waits for (accepted, joined, available). Read-only: check mode runs the same GETs.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};
use kube_client::connect::hub_opts;
use kube_client::objects::{conditions, known};
use kube_client::{Client, HubOptions};
use serde::Deserialize;
use serde_json::{json, Value};

/// The module's options; the documentation stub `plugins/modules/acm_cluster_info.py` documents exactly these.
/// The hub connection options are named as `acm_import`'s, so one `module_defaults` serves both.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("name").aliases(&["cluster_name"]),
        Opt::str("label_selector"),
    ])
    .with(hub_opts())
    .required_one_of(&["hub_kubeconfig", "hub_host"])
    .mutually_exclusive(&["name", "label_selector"])
}

#[derive(Deserialize)]
struct Options {
    name: Option<String>,
    label_selector: Option<String>,
    #[serde(flatten)]
    hub: HubOptions,
}

fn condition_true(obj: &Value, type_: &str) -> bool {
    conditions(obj)
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The summary of one ManagedCluster a playbook needs, with the raw conditions kept.
pub fn summary(obj: &Value) -> Value {
    let claims: serde_json::Map<String, Value> = obj
        .pointer("/status/clusterClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some((
                c.get("name")?.as_str()?.to_string(),
                c.get("value")?.clone(),
            ))
        })
        .collect();
    json!({
        "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "labels": obj.pointer("/metadata/labels").cloned().unwrap_or(json!({})),
        "hub_accepts_client": obj.pointer("/spec/hubAcceptsClient").and_then(Value::as_bool).unwrap_or(false),
        "accepted": condition_true(obj, "HubAcceptedManagedCluster"),
        "joined": condition_true(obj, "ManagedClusterJoined"),
        "available": condition_true(obj, "ManagedClusterConditionAvailable"),
        "conditions": conditions(obj),
        "version": obj.pointer("/status/version/kubernetes").cloned().unwrap_or(Value::Null),
        "cluster_claims": claims,
    })
}

fn hub(o: &Options, m: &mut Module) -> Result<Client, Failure> {
    let hub =
        kube_client::connect("hub", &o.hub.params()).map_err(|e| Failure::new(e.to_string()))?;
    if let Some(t) = hub.token {
        m.add_secret(t);
    }
    if let Some(w) = hub.warning {
        m.warn(w);
    }
    Ok(hub.client)
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let client = hub(&o, m)?;
    let r = known::managed_clusters();
    let items = match o.name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => client
            .get(&r, None, name)
            .map_err(|e| Failure::new(format!("reading ManagedCluster {name}: {e}")))?
            .into_iter()
            .collect(),
        None => client
            .list(&r, None, o.label_selector.as_deref())
            .map_err(|e| {
                let hint = if e.is_not_found() {
                    " (the hub serves no cluster.open-cluster-management.io/v1 ManagedCluster API: is ACM or open-cluster-management installed?)"
                } else {
                    ""
                };
                Failure::new(format!("listing ManagedClusters: {e}{hint}"))
            })?,
    };
    let clusters: Vec<Value> = items.iter().map(summary).collect();
    let n = clusters.len();
    Ok(Outcome::new(false)
        .msg(format!(
            "found {n} ManagedCluster{}",
            if n == 1 { "" } else { "s" }
        ))
        .with("clusters", Value::Array(clusters)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "openshift",
            "acm_cluster_info",
        );
    }

    #[test]
    fn summary_reads_conditions_and_claims() {
        let mc = json!({
            "metadata": {"name": "sno", "labels": {"cloud": "Other"}},
            "spec": {"hubAcceptsClient": true},
            "status": {
                "conditions": [
                    {"type": "HubAcceptedManagedCluster", "status": "True"},
                    {"type": "ManagedClusterJoined", "status": "True"},
                    {"type": "ManagedClusterConditionAvailable", "status": "Unknown", "reason": "Lease"}],
                "clusterClaims": [{"name": "id.k8s.io", "value": "abc"}],
                "version": {"kubernetes": "v1.31.4"}}
        });
        let s = summary(&mc);
        assert_eq!(s["name"], json!("sno"));
        assert_eq!(s["accepted"], json!(true));
        assert_eq!(s["joined"], json!(true));
        assert_eq!(s["available"], json!(false));
        assert_eq!(s["cluster_claims"], json!({"id.k8s.io": "abc"}));
        assert_eq!(s["conditions"][2]["reason"], json!("Lease"));
        assert_eq!(s["version"], json!("v1.31.4"));
    }
}
