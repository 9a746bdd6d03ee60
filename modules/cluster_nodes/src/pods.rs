//! Pods on a node and the PodDisruptionBudgets that cover them: pure, no I/O.

use serde_json::{Map, Value};

/// What a drain does with a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodClass {
    /// Evicted through the Eviction subresource.
    Evict,
    /// Owned by a DaemonSet: it would be recreated on the node at once; left running.
    DaemonSet,
    /// A static pod's mirror (`kubernetes.io/config.mirror`): the API cannot remove it; left alone.
    Mirror,
}

pub fn classify(pod: &Value) -> PodClass {
    if pod
        .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some()
    {
        return PodClass::Mirror;
    }
    let daemonset_owned = pod
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|o| {
            o.get("kind").and_then(Value::as_str) == Some("DaemonSet")
                && o.get("controller").and_then(Value::as_bool) == Some(true)
        });
    if daemonset_owned {
        PodClass::DaemonSet
    } else {
        PodClass::Evict
    }
}

/// Whether a node's kubelet is unreachable: its `Ready` condition `Unknown` (Cluster API
/// `noderefutil.IsNodeUnreachable`), or the node-lifecycle controller's `node.kubernetes.io/unreachable`
/// taint (kubernetes `pkg/controller/nodelifecycle`, `UnreachableTaintTemplate`).
pub fn node_unreachable(node: &Value) -> bool {
    let ready_unknown = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "Unknown");
    let tainted = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|t| t["key"] == "node.kubernetes.io/unreachable");
    ready_unknown || tainted
}

/// Whether a drain stops waiting for a pod being deleted: more than `after` seconds have passed
/// since its `deletionTimestamp` (the end of its grace period), `after` > 0 (k8s.io/kubectl
/// `pkg/drain/filters.go` `shouldSkipPod`). Only for pods on an unreachable node (the caller's part).
pub fn skip_wait(pod: &Value, now: i64, after: u64) -> bool {
    let deleted = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| crate::remediation::parse_time(t).ok());
    match deleted {
        Some(t) => after > 0 && now.saturating_sub(t) > after as i64,
        None => false,
    }
}

/// `namespace/name` of an object.
pub fn key(obj: &Value) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
}

/// Whether a `metav1.LabelSelector` selects these labels. An empty selector selects everything (as
/// a PodDisruptionBudget's does in policy/v1); a selector whose operator is unknown selects nothing.
pub fn selects(selector: &Value, labels: &Map<String, Value>) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k).is_some() && label(k) == v.as_str());
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let k = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => label(k).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(k).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(k).is_some(),
                Some("DoesNotExist") => label(k).is_none(),
                _ => false,
            }
        });
    match_labels && expressions
}

/// The budgets (`namespace/name` and their status) that cover `pod`, among `pdbs` of its namespace.
pub fn covering_budgets(pod: &Value, pdbs: &[Value]) -> Vec<String> {
    let empty = Map::new();
    let labels = pod
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    pdbs.iter()
        .filter(|b| {
            b.pointer("/spec/selector")
                .is_some_and(|sel| selects(sel, labels))
        })
        .map(|b| {
            let n = |p: &str| b.pointer(p).and_then(Value::as_i64).unwrap_or(0);
            format!(
                "{} (disruptionsAllowed {}, currentHealthy {}, desiredHealthy {})",
                key(b),
                n("/status/disruptionsAllowed"),
                n("/status/currentHealthy"),
                n("/status/desiredHealthy")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn daemonset_and_mirror_pods_are_kept() {
        let ds =
            json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": true}]}});
        let rs =
            json!({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "controller": true}]}});
        let mirror = json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "abc"}}});
        assert_eq!(classify(&ds), PodClass::DaemonSet);
        assert_eq!(classify(&rs), PodClass::Evict);
        assert_eq!(classify(&mirror), PodClass::Mirror);
        assert_eq!(classify(&json!({"metadata": {}})), PodClass::Evict);
    }

    #[test]
    fn unreachable_nodes_by_condition_or_taint() {
        let cond = |s: &str| json!({"status": {"conditions": [{"type": "Ready", "status": s}]}});
        assert!(node_unreachable(&cond("Unknown")));
        assert!(
            !node_unreachable(&cond("False")),
            "NotReady is reachable: its kubelet says so"
        );
        assert!(!node_unreachable(&cond("True")));
        let tainted = json!({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}});
        assert!(node_unreachable(&tainted));
        assert!(!node_unreachable(
            &json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready"}]}})
        ));
    }

    #[test]
    fn terminating_pods_are_skipped_only_past_deletion_plus_the_timeout() {
        // deletionTimestamp 2026-01-01T00:00:30Z = 1767225630: eviction at :00 with a 30 s grace period.
        let pod = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:30Z"}});
        let t = 1_767_225_630;
        assert!(!skip_wait(&pod, t - 20, 1), "still within its grace period");
        assert!(
            !skip_wait(&pod, t + 1, 1),
            "more than `after` seconds, as kubectl's `>`"
        );
        assert!(skip_wait(&pod, t + 2, 1));
        assert!(
            !skip_wait(&pod, t + 999, 0),
            "0 turns it off, as in kubectl"
        );
        assert!(
            !skip_wait(&json!({"metadata": {}}), t + 999, 1),
            "not being deleted"
        );
    }

    #[test]
    fn selectors_match_like_kubernetes() {
        let labels = json!({"app": "web", "tier": "front"});
        let l = labels.as_object().unwrap();
        assert!(selects(&json!({"matchLabels": {"app": "web"}}), l));
        assert!(!selects(&json!({"matchLabels": {"app": "db"}}), l));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "x"]}]}),
            l
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
            l
        ));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}),
            l
        ));
        assert!(selects(&json!({}), l));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]}),
            l
        ));
    }

    #[test]
    fn budgets_are_named_with_their_status() {
        let pod = json!({"metadata": {"namespace": "n", "name": "p", "labels": {"app": "web"}}});
        let pdbs = [
            json!({"metadata": {"namespace": "n", "name": "web-pdb"}, "spec": {"selector": {"matchLabels": {"app": "web"}}},
                   "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}}),
            json!({"metadata": {"namespace": "n", "name": "db-pdb"}, "spec": {"selector": {"matchLabels": {"app": "db"}}}}),
        ];
        assert_eq!(
            covering_budgets(&pod, &pdbs),
            ["n/web-pdb (disruptionsAllowed 0, currentHealthy 1, desiredHealthy 1)"]
        );
    }
}
