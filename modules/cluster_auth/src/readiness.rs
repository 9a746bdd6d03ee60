//! Pure readiness rules: what counts as "ready" for each `wait_for` target, and what is still pending.

use kube_client::objects::{conditions, unmet};
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

/// ClusterVersion `version`: Available=True, Progressing=False, Failing=False.
pub fn clusterversion(obj: &Value) -> TargetState {
    let version = obj
        .pointer("/status/desired/version")
        .and_then(Value::as_str)
        .map(str::to_string);
    // The cluster's identity: the installer's ClusterID, which a record in Vault is checked against.
    let cluster_id = obj
        .pointer("/spec/clusterID")
        .and_then(Value::as_str)
        .map(str::to_string);
    let history_state = obj
        .pointer("/status/history/0/state")
        .and_then(Value::as_str)
        .map(str::to_string);
    let pending: Vec<String> = unmet(
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
    TargetState {
        ready: pending.is_empty(),
        pending,
        facts: json!({"version": version, "history_state": history_state, "cluster_id": cluster_id}),
    }
}

/// Every ClusterOperator Available=True and not Degraded.
pub fn operators(items: &[Value]) -> TargetState {
    if items.is_empty() {
        return TargetState::pending("operators: no ClusterOperators reported yet");
    }
    let mut pending = Vec::new();
    let mut not_ready = Vec::new();
    for o in items {
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?");
        // Degraded may be absent (fine) but not True.
        let mut bad = unmet(o, &[("Available", "True")]);
        if let Some(d) = conditions(o)
            .into_iter()
            .find(|c| c.type_ == "Degraded" && c.status == "True")
        {
            let mut why = "Degraded=True".to_string();
            if let Some(m) = d.message.filter(|m| !m.is_empty()) {
                why.push_str(&format!(" ({m})"));
            }
            bad.push(why);
        }
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

/// Every Node Ready=True, and at least `expected` of them.
pub fn nodes(items: &[Value], expected: Option<u64>) -> TargetState {
    let mut pending = Vec::new();
    let mut not_ready = Vec::new();
    for n in items {
        let name = n
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?");
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
        let s = clusterversion(&cv);
        assert!(s.ready);
        assert_eq!(s.facts["version"], json!("4.19.3"));
        assert_eq!(s.facts["cluster_id"], Value::Null);
        cv["status"]["conditions"][1] = cond("Progressing", "True");
        let s = clusterversion(&cv);
        assert!(!s.ready);
        assert_eq!(
            s.pending,
            vec!["clusterversion: Progressing=False (now True, R: Progressing is True)"]
        );
    }

    #[test]
    fn operators_list_the_bad_ones() {
        let ok = json!({"metadata": {"name": "dns"}, "status": {"conditions": [cond("Available", "True"), cond("Degraded", "False")]}});
        let degraded = json!({"metadata": {"name": "ingress"}, "status": {"conditions": [cond("Available", "True"), cond("Degraded", "True")]}});
        let missing = json!({"metadata": {"name": "console"}, "status": {}});
        let s = operators(&[ok.clone(), degraded, missing]);
        assert!(!s.ready);
        assert_eq!(s.facts["not_ready"], json!(["ingress", "console"]));
        assert!(
            s.pending[0].contains("ingress: Degraded=True (Degraded is True)"),
            "{:?}",
            s.pending
        );
        assert!(s.pending[1].contains("console: Available=True (not reported yet)"));
        assert!(operators(&[ok]).ready);
        assert!(!operators(&[]).ready);
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
