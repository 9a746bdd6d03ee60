//! `state: absent`: delete the ManagedCluster and wait until it is gone, then the cluster namespace —
//! unless it holds objects the import did not create ([`foreign_objects`]): it is then kept and the
//! result says what it holds.

use std::time::Instant;

use ansible_module::Module;
use kube_client::objects::known;
use kube_client::{Client, KubeError, Resource};
use serde_json::{json, Value};

use crate::error::ImportError;
use crate::resources::AUTO_IMPORT_SECRET;
use crate::{Opts, Report};

/// Delete (or, for a namespace the hub removes itself, wait for) each hub object in turn.
pub fn detach(
    m: &mut Module,
    o: &Opts,
    hub: &Client,
    report: &mut Report,
) -> Result<(), ImportError> {
    let name = o.cluster_name.as_str();
    let steps: Vec<(Resource, bool)> = vec![
        (known::managed_clusters(), true),
        (known::namespaces(), o.delete_namespace),
    ];
    // One deadline for both waits.
    let start = Instant::now();
    for (res, delete) in steps {
        let Some(obj) = hub.get(&res, None, name)? else {
            continue;
        };
        let terminating = obj.pointer("/metadata/deletionTimestamp").is_some();
        if delete && !terminating && res.kind == "Namespace" {
            let foreign = foreign_objects(hub, name)?;
            if !foreign.is_empty() {
                keep_namespace(m, report, name, foreign);
                continue;
            }
        }
        if delete && !terminating {
            m.add_diff(
                json!({"kind": res.kind, "name": name, "state": "present"}),
                json!({"kind": res.kind, "name": name, "state": "absent"}),
                &format!("hub: {}", res.describe(None, name)),
                "",
            );
            report.changed = true;
            report.actions.push(
                json!({"side": "hub", "object": res.describe(None, name), "action": "deleted"}),
            );
            if !m.check_mode {
                hub.delete(&res, None, name)?;
            }
        } else if !delete && !terminating {
            // The hub removes the namespace itself once the cluster is gone; wait only if it is on its way.
            continue;
        }
        if !m.check_mode {
            let left = o.timeout().saturating_sub(start.elapsed());
            hub.wait_deleted(&res, None, name, left, o.interval())
                .map_err(ImportError::from_wait)?;
        }
    }
    Ok(())
}

fn keep_namespace(m: &mut Module, report: &mut Report, name: &str, foreign: Vec<String>) {
    let list = foreign.join(", ");
    report
        .actions
        .push(json!({"side": "hub", "object": format!("Namespace {name}"),
        "action": format!("kept (it holds objects the import did not create: {list})"),
        "kept_objects": foreign}));
    m.warn(format!(
        "namespace {name} on the hub was not deleted: it holds objects the import did not create ({list}); delete them, or the namespace, yourself"
    ));
}

/// The kinds looked at in a cluster namespace: what people and other tools keep there (credentials,
/// workloads, Hive and assisted-installer objects). The hub's own per-cluster objects (ManifestWorks,
/// ManagedClusterAddOns, leases, role bindings, service accounts) are not listed: they are the import's.
const LOOKED_AT: [(&str, &str, &str); 11] = [
    ("v1", "Secret", "secrets"),
    ("v1", "ConfigMap", "configmaps"),
    ("v1", "Pod", "pods"),
    ("v1", "Service", "services"),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ("apps/v1", "Deployment", "deployments"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    (
        "hive.openshift.io/v1",
        "ClusterDeployment",
        "clusterdeployments",
    ),
    (
        "extensions.hive.openshift.io/v1beta1",
        "AgentClusterInstall",
        "agentclusterinstalls",
    ),
    (
        "agent-install.openshift.io/v1beta1",
        "InfraEnv",
        "infraenvs",
    ),
    ("metal3.io/v1alpha1", "BareMetalHost", "baremetalhosts"),
];

/// `Kind namespace/name` of every object in the cluster namespace that the import did not create. A
/// kind the hub does not serve (no Hive, no metal3) is skipped; any other read error stops the
/// detach before the namespace is deleted.
pub fn foreign_objects(hub: &Client, ns: &str) -> Result<Vec<String>, KubeError> {
    let mut found = Vec::new();
    for (api_version, kind, plural) in LOOKED_AT {
        let res = Resource::new(api_version, kind, plural, true);
        let items = match hub.list(&res, Some(ns), None) {
            Ok(items) => items,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        for obj in items.iter().filter(|o| !made_by_the_import(ns, kind, o)) {
            let n = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            found.push(format!("{kind} {ns}/{n}"));
        }
    }
    Ok(found)
}

/// Whether an object in the cluster namespace `ns` came with the import: what this module writes,
/// what the hub's import controller renders (`<cluster>-import`, the `<cluster>-bootstrap-sa`
/// token), what Kubernetes and OpenShift put in every namespace (service account tokens and pull
/// secrets, the CA config maps), objects owned by another object (they go with their owner, which
/// is looked at itself when it is of a kind worth keeping), and objects the hub's controllers label
/// or annotate as theirs (`*open-cluster-management.io/*` keys).
pub fn made_by_the_import(ns: &str, kind: &str, obj: &Value) -> bool {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let owned = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|o| !o.is_empty());
    let hub_keys = ["labels", "annotations"].iter().any(|f| {
        obj.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_object)
            .is_some_and(|m| m.keys().any(|k| k.contains("open-cluster-management.io/")))
    });
    if owned || hub_keys {
        return true;
    }
    match kind {
        "Secret" => {
            let t = obj.get("type").and_then(Value::as_str).unwrap_or_default();
            name == AUTO_IMPORT_SECRET
                || name == format!("{ns}-import")
                || name.starts_with(&format!("{ns}-bootstrap-sa"))
                || t == "kubernetes.io/service-account-token"
                || t == "kubernetes.io/dockercfg"
        }
        "ConfigMap" => matches!(name, "kube-root-ca.crt" | "openshift-service-ca.crt"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_imports_own_objects_do_not_keep_the_namespace() {
        let c = "lab";
        for (kind, o) in [
            (
                "Secret",
                json!({"metadata": {"name": "auto-import-secret"}, "type": "Opaque"}),
            ),
            ("Secret", json!({"metadata": {"name": "lab-import"}})),
            (
                "Secret",
                json!({"metadata": {"name": "lab-bootstrap-sa-token-x1"}}),
            ),
            (
                "Secret",
                json!({"metadata": {"name": "default-token-abc"}, "type": "kubernetes.io/service-account-token"}),
            ),
            (
                "Secret",
                json!({"metadata": {"name": "builder-dockercfg-q"}, "type": "kubernetes.io/dockercfg"}),
            ),
            (
                "ConfigMap",
                json!({"metadata": {"name": "kube-root-ca.crt"}}),
            ),
            (
                "ConfigMap",
                json!({"metadata": {"name": "openshift-service-ca.crt"}}),
            ),
            (
                "Pod",
                json!({"metadata": {"name": "p", "ownerReferences": [{"kind": "Job", "name": "j"}]}}),
            ),
            (
                "Secret",
                json!({"metadata": {"name": "obs", "labels": {"addon.open-cluster-management.io/name": "x"}}}),
            ),
        ] {
            assert!(made_by_the_import(c, kind, &o), "{kind} {o}");
        }
    }

    #[test]
    fn anything_else_keeps_it() {
        let c = "lab";
        for (kind, o) in [
            (
                "Secret",
                json!({"metadata": {"name": "bmc-credentials"}, "type": "Opaque"}),
            ),
            // Another cluster's import secret is not this one's.
            ("Secret", json!({"metadata": {"name": "other-import"}})),
            ("ConfigMap", json!({"metadata": {"name": "notes"}})),
            ("ClusterDeployment", json!({"metadata": {"name": "lab"}})),
            (
                "Deployment",
                json!({"metadata": {"name": "app", "labels": {"app": "x"}}}),
            ),
        ] {
            assert!(!made_by_the_import(c, kind, &o), "{kind} {o}");
        }
    }
}
