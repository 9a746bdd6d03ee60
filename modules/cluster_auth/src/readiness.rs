//! Pure readiness rules: what counts as "ready" for each `wait_for` target, and what is still pending.

use kube_client::objects::unmet;
use serde_json::{json, Value};

/// The state of one target after one look.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetState {
    pub ready: bool,
    /// Human-readable items still pending (empty when ready).
    pub pending: Vec<String>,
    /// Target-specific facts for the result (version, counts, …).
    pub facts: Value,
}

impl TargetState {
    pub fn pending(what: impl Into<String>) -> Self {
        TargetState {
            ready: false,
            pending: vec![what.into()],
            facts: json!({}),
        }
    }
    pub fn to_json(&self) -> Value {
        let mut v = json!({"ready": self.ready, "pending": self.pending});
        if let (Some(m), Some(f)) = (v.as_object_mut(), self.facts.as_object()) {
            for (k, x) in f {
                m.insert(k.clone(), x.clone());
            }
        }
        v
    }
}

/// `/readyz` body: `ok`, or the list of failed checks.
pub fn api(readyz: Result<&str, &str>) -> TargetState {
    match readyz {
        Ok(t) if t.trim() == "ok" => TargetState {
            ready: true,
            pending: vec![],
            facts: json!({}),
        },
        Ok(t) | Err(t) => {
            let failed: Vec<&str> = t.lines().filter(|l| l.contains("failed")).collect();
            let detail = if failed.is_empty() {
                t.trim().lines().next().unwrap_or("no answer").to_string()
            } else {
                failed.join("; ")
            };
            TargetState::pending(format!("api /readyz: {detail}"))
        }
    }
}

/// Whether an OpenShift release `version` is the requested `want`: the same release, or any z-stream of
/// a requested minor (`4.19` is met by `4.19.7`, never by `4.190.1` or `4.1.9`).
pub fn is_requested_version(version: &str, want: &str) -> bool {
    if version == want {
        return true;
    }
    let is_minor = want.split('.').count() == 2
        && want
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    is_minor
        && version
            .strip_prefix(want)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// ClusterVersion `version`: Available=True, Progressing=False, Failing=False; with `want` (a release or a
/// minor), the cluster is at that version: it is the desired one and the newest history entry, `Completed`.
pub fn clusterversion(obj: &Value, want: Option<&str>) -> TargetState {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).map(str::to_string);
    let version = text("/status/desired/version");
    // The cluster's identity: the installer's ClusterID, which a record in Vault is checked against.
    let cluster_id = text("/spec/clusterID");
    let history_state = text("/status/history/0/state");
    let mut pending: Vec<String> = unmet(
        obj,
        &[
            ("Available", "True"),
            ("Progressing", "False"),
            ("Failing", "False"),
        ],
    )
    .into_iter()
    .map(|u| format!("clusterversion: {u}"))
    .collect();
    if let Some(want) = want {
        let newest = text("/status/history/0/version");
        let at = |v: &Option<String>| v.as_deref().is_some_and(|v| is_requested_version(v, want));
        if !at(&version) {
            pending.push(format!(
                "clusterversion: at {}, not at the requested {want}",
                version.as_deref().unwrap_or("no version yet")
            ));
        } else if !at(&newest) || history_state.as_deref() != Some("Completed") {
            pending.push(format!(
                "clusterversion: {want} is desired but not completed (newest history entry: {} {})",
                newest.as_deref().unwrap_or("none"),
                history_state.as_deref().unwrap_or("-")
            ));
        }
    }
    TargetState {
        ready: pending.is_empty(),
        pending,
        facts: json!({"version": version, "history_state": history_state, "cluster_id": cluster_id}),
    }
}

/// Every ClusterOperator stable as `oc adm wait-for-stable-cluster` means it: Available=True,
/// Progressing=False and Degraded=False, a condition not reported counting as unmet (openshift/oc
/// `pkg/cli/admin/waitforstable/command.go`, `unstableOperatorReason`). That the state holds long
/// enough is the caller's business (`stable_polls`).
pub fn operators(items: &[Value]) -> TargetState {
    if items.is_empty() {
        return TargetState::pending("operators: no ClusterOperators reported yet");
    }
    let mut pending = Vec::new();
    let mut not_ready = Vec::new();
    for o in items {
        let name = name_of(o);
        let bad = unmet(
            o,
            &[
                ("Available", "True"),
                ("Progressing", "False"),
                ("Degraded", "False"),
            ],
        );
        if !bad.is_empty() {
            pending.push(format!("operator {name}: {}", bad.join(", ")));
            not_ready.push(name.to_string());
        }
    }
    TargetState {
        ready: pending.is_empty(),
        pending,
        facts: json!({"total": items.len(), "not_ready": not_ready}),
    }
}

/// Every MachineConfigPool Updated=True and Degraded=False, with all its machines updated
/// (`status.updatedMachineCount == status.machineCount` when the pool reports them).
pub fn machine_config_pools(items: &[Value]) -> TargetState {
    if items.is_empty() {
        return TargetState::pending("machineconfigpools: no MachineConfigPools reported yet");
    }
    let mut pending = Vec::new();
    let mut not_ready = Vec::new();
    for p in items {
        let name = name_of(p);
        let mut bad = unmet(p, &[("Updated", "True"), ("Degraded", "False")]);
        let count = |k: &str| p.pointer(&format!("/status/{k}")).and_then(Value::as_u64);
        if let (Some(all), Some(updated)) = (count("machineCount"), count("updatedMachineCount")) {
            if updated != all {
                bad.push(format!("{updated} of {all} machines updated"));
            }
        }
        if !bad.is_empty() {
            pending.push(format!("machineconfigpool {name}: {}", bad.join(", ")));
            not_ready.push(name.to_string());
        }
    }
    TargetState {
        ready: pending.is_empty(),
        pending,
        facts: json!({"total": items.len(), "not_ready": not_ready}),
    }
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?")
}

/// Every Node Ready=True, and at least `expected` of them.
pub fn nodes(items: &[Value], expected: Option<u64>) -> TargetState {
    let mut pending = Vec::new();
    let mut not_ready = Vec::new();
    for n in items {
        let name = name_of(n);
        let bad = unmet(n, &[("Ready", "True")]);
        if !bad.is_empty() {
            pending.push(format!("node {name}: {}", bad.join(", ")));
            not_ready.push(name.to_string());
        }
    }
    let total = items.len() as u64;
    if let Some(want) = expected {
        if total < want {
            pending.push(format!(
                "nodes: {total} of {want} expected nodes registered"
            ));
        }
    } else if total == 0 {
        pending.push("nodes: no nodes registered yet".into());
    }
    TargetState {
        ready: pending.is_empty(),
        pending,
        facts: json!({"total": total, "ready_count": total - not_ready.len() as u64, "not_ready": not_ready}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(t: &str, s: &str) -> Value {
        json!({"type": t, "status": s, "reason": "R", "message": format!("{t} is {s}")})
    }

    #[test]
    fn readyz() {
        assert!(api(Ok("ok")).ready);
        let s = api(Ok(
            "[+]ping ok\n[-]poststarthook/x failed: reason withheld\nreadyz check failed",
        ));
        assert!(!s.ready);
        assert!(
            s.pending[0].contains("poststarthook/x failed"),
            "{:?}",
            s.pending
        );
        assert!(api(Err("connection refused")).pending[0].contains("connection refused"));
    }

    #[test]
    fn clusterversion_needs_all_three() {
        let mut cv = json!({"status": {"desired": {"version": "4.19.3"}, "history": [{"state": "Completed"}],
            "conditions": [cond("Available", "True"), cond("Progressing", "False"), cond("Failing", "False")]}});
        let s = clusterversion(&cv, None);
        assert!(s.ready);
        assert_eq!(s.facts["version"], json!("4.19.3"));
        assert_eq!(s.facts["cluster_id"], Value::Null);
        cv["status"]["conditions"][1] = cond("Progressing", "True");
        let s = clusterversion(&cv, None);
        assert!(!s.ready);
        assert_eq!(
            s.pending,
            vec!["clusterversion: Progressing=False (now True, R: Progressing is True)"]
        );
    }

    #[test]
    fn a_minor_is_met_by_its_z_streams_only() {
        assert!(is_requested_version("4.19.7", "4.19.7"));
        assert!(is_requested_version("4.19.7", "4.19"));
        assert!(!is_requested_version("4.190.1", "4.19"));
        assert!(!is_requested_version("4.1.9", "4.1.90"));
        assert!(!is_requested_version("4.19.7", "4.19.6"));
        assert!(!is_requested_version("4.20.0", "4.19"));
        assert!(!is_requested_version("4.19.7", "4"));
        assert!(!is_requested_version("4.19.7-rc.1", "4.19.7"));
    }

    #[test]
    fn clusterversion_at_a_requested_minor() {
        let cv = json!({"status": {"desired": {"version": "4.19.7"},
            "history": [{"state": "Completed", "version": "4.19.7"}],
            "conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "False"},
                           {"type": "Failing", "status": "False"}]}});
        assert!(clusterversion(&cv, Some("4.19")).ready);
        assert_eq!(
            clusterversion(&cv, Some("4.18")).pending,
            vec!["clusterversion: at 4.19.7, not at the requested 4.18"]
        );
    }

    #[test]
    fn clusterversion_at_the_requested_version() {
        let cv = |desired: &str, newest: &str, state: &str| {
            json!({"status": {"desired": {"version": desired}, "history": [{"state": state, "version": newest}],
            "conditions": [cond("Available", "True"), cond("Progressing", "False"), cond("Failing", "False")]}})
        };
        assert!(clusterversion(&cv("4.19.3", "4.19.3", "Completed"), Some("4.19.3")).ready);
        let s = clusterversion(&cv("4.19.3", "4.19.3", "Completed"), Some("4.19.4"));
        assert_eq!(
            s.pending,
            vec!["clusterversion: at 4.19.3, not at the requested 4.19.4"]
        );
        let s = clusterversion(&cv("4.19.4", "4.19.4", "Partial"), Some("4.19.4"));
        assert_eq!(
            s.pending,
            vec!["clusterversion: 4.19.4 is desired but not completed (newest history entry: 4.19.4 Partial)"]
        );
        assert_eq!(
            clusterversion(&json!({}), Some("4.19.4")).pending[3],
            "clusterversion: at no version yet, not at the requested 4.19.4"
        );
    }

    #[test]
    fn operators_stable_as_oc_means_it() {
        let co = |name: &str, conds: Vec<Value>| json!({"metadata": {"name": name}, "status": {"conditions": conds}});
        let ok = co(
            "dns",
            vec![
                cond("Available", "True"),
                cond("Progressing", "False"),
                cond("Degraded", "False"),
            ],
        );
        let degraded = co(
            "ingress",
            vec![
                cond("Available", "True"),
                cond("Progressing", "False"),
                cond("Degraded", "True"),
            ],
        );
        let progressing = co(
            "etcd",
            vec![
                cond("Available", "True"),
                cond("Progressing", "True"),
                cond("Degraded", "False"),
            ],
        );
        // Degraded and Progressing not reported: not stable (IsStatusConditionFalse is false).
        let silent = co("console", vec![cond("Available", "True")]);
        let s = operators(&[ok.clone(), degraded, progressing, silent]);
        assert!(!s.ready);
        assert_eq!(s.facts["not_ready"], json!(["ingress", "etcd", "console"]));
        assert_eq!(
            s.pending,
            vec![
                "operator ingress: Degraded=False (now True, R: Degraded is True)",
                "operator etcd: Progressing=False (now True, R: Progressing is True)",
                "operator console: Progressing=False (not reported yet), Degraded=False (not reported yet)",
            ]
        );
        assert!(operators(&[ok]).ready);
        assert!(!operators(&[]).ready);
    }

    #[test]
    fn pools_updated_not_degraded_all_machines() {
        let pool = |name: &str, updated: &str, degraded: &str, counts: Option<(u64, u64)>| {
            let mut p = json!({"metadata": {"name": name}, "status": {"conditions": [cond("Updated", updated), cond("Degraded", degraded)]}});
            if let Some((all, up)) = counts {
                p["status"]["machineCount"] = json!(all);
                p["status"]["updatedMachineCount"] = json!(up);
            }
            p
        };
        assert!(
            machine_config_pools(&[
                pool("master", "True", "False", Some((3, 3))),
                pool("worker", "True", "False", None)
            ])
            .ready
        );
        let s = machine_config_pools(&[
            pool("master", "True", "False", Some((3, 2))),
            pool("worker", "False", "True", Some((2, 2))),
        ]);
        assert_eq!(
            s.pending,
            vec![
                "machineconfigpool master: 2 of 3 machines updated",
                "machineconfigpool worker: Updated=True (now False, R: Updated is False), Degraded=False (now True, R: Degraded is True)",
            ]
        );
        assert_eq!(s.facts["not_ready"], json!(["master", "worker"]));
        assert!(!machine_config_pools(&[]).ready);
    }

    #[test]
    fn nodes_ready_and_counted() {
        let n = |name: &str, s: &str| json!({"metadata": {"name": name}, "status": {"conditions": [cond("Ready", s)]}});
        assert!(nodes(&[n("a", "True"), n("b", "True")], Some(2)).ready);
        let s = nodes(&[n("a", "True"), n("b", "False")], Some(3));
        assert_eq!(s.pending.len(), 2);
        assert_eq!(s.facts["ready_count"], json!(1));
        assert!(s.pending[1].contains("2 of 3"));
        assert!(!nodes(&[], None).ready);
    }
}
