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
