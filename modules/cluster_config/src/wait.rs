//! `wait`: what an object must show before the task is done (conditions and JSONPath-like values),
//! and what it still lacks. Pure; the polling is `proxshift_http::wait_for` through kube-client.

use serde::Deserialize;
use serde_json::Value;

use crate::error::{ConfigError, WaitProblem};
use crate::plan::Target;
use kube_client::objects::{conditions, unmet, unmet_values};

/// One `wait` entry as the options give it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitOpt {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub status: Option<String>,
    pub path: Option<String>,
    pub value: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
}

/// kubernetes.core's `wait_condition`: a condition `type` with `status` (default True) and, when
/// given, `reason`.
#[derive(Debug, Clone, Deserialize)]
pub struct WaitCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// `status.conditions` has `type` with this `status`.
    Condition { type_: String, status: String },
    /// The condition `type` has this `reason` (kubernetes.core's `wait_condition.reason`).
    Reason { type_: String, reason: String },
    /// kubernetes.core's `wait: true` without a condition: the kind's own readiness (see [`unready`]).
    Ready,
    /// The value at `path` is `value` (as text), or with `None` is set at all.
    Value { path: String, value: Option<String> },
}

/// A check and the objects it is for (every object of the task unless `kind`/`name` narrow it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub want: Want,
    pub kind: Option<String>,
    pub name: Option<String>,
}

impl Check {
    pub fn applies_to(&self, t: &Target) -> bool {
        self.kind.as_deref().is_none_or(|k| k == t.kind)
            && self
                .name
                .as_deref()
                .is_none_or(|n| Some(n) == t.name.as_deref())
    }
}

/// The checks from the `wait` option: a list of entries (see [`checks`]), or kubernetes.core's boolean
/// — `true` waits for `wait_condition` when given, else for each object's readiness; `false` for nothing.
pub fn from_options(
    wait: &Value,
    condition: Option<&WaitCondition>,
    targets: &[Target],
) -> Result<Vec<Check>, ConfigError> {
    let all = |want| Check {
        want,
        kind: None,
        name: None,
    };
    match wait {
        Value::Null | Value::Bool(false) => Ok(Vec::new()),
        Value::Bool(true) => Ok(match condition {
            None => vec![all(Want::Ready)],
            Some(c) => {
                let mut out = vec![all(Want::Condition {
                    type_: c.type_.clone(),
                    status: c.status.clone().unwrap_or_else(|| "True".into()),
                })];
                if let Some(reason) = c.reason.clone().filter(|r| !r.is_empty()) {
                    out.push(all(Want::Reason {
                        type_: c.type_.clone(),
                        reason,
                    }));
                }
                out
            }
        }),
        Value::Array(items) => {
            let mut opts = Vec::new();
            for (index, item) in items.iter().enumerate() {
                let o: WaitOpt =
                    serde_json::from_value(item.clone()).map_err(|e| ConfigError::BadWait {
                        index,
                        problem: WaitProblem::NotAnEntry(e.to_string()),
                    })?;
                opts.push(o);
            }
            checks(&opts, targets)
        }
        Value::String(_) => Err(ConfigError::WaitType("a string")),
        Value::Number(_) => Err(ConfigError::WaitType("a number")),
        Value::Object(_) => Err(ConfigError::WaitType("a mapping")),
    }
}

/// What keeps `obj` from being ready as kubernetes.core's waiter judges its kind (module_utils
/// `k8s/waiter.py`: `deployment_ready`, `daemonset_ready`, `statefulset_ready`, `pod_ready`); any
/// other kind is ready once it exists.
pub fn unready(obj: &Value) -> Vec<String> {
    let int = |p: &str| obj.pointer(p).and_then(Value::as_i64);
    let generation = int("/metadata/generation");
    let observed = int("/status/observedGeneration");
    let mut out = Vec::new();
    let mut need = |ok: bool, what: String| {
        if !ok {
            out.push(what)
        }
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    match kind {
        "Deployment" | "StatefulSet" => {
            let want = int("/spec/replicas").unwrap_or(1);
            let ready = if kind == "Deployment" {
                int("/status/availableReplicas").unwrap_or(0)
            } else {
                int("/status/readyReplicas").unwrap_or(0)
            };
            need(
                observed == generation,
                "the controller to observe the newest generation".into(),
            );
            need(
                int("/status/updatedReplicas").unwrap_or(0) == want,
                format!("{want} updated replica(s)"),
            );
            need(
                ready == want,
                format!("{want} ready replica(s), {ready} so far"),
            );
            need(
                int("/status/unavailableReplicas").unwrap_or(0) == 0,
                "no unavailable replica".into(),
            );
        }
        "DaemonSet" => {
            let desired = int("/status/desiredNumberScheduled").unwrap_or(0);
            let ready = int("/status/numberReady").unwrap_or(0);
            need(
                observed == generation,
                "the controller to observe the newest generation".into(),
            );
            need(
                int("/status/updatedNumberScheduled").unwrap_or(0) == desired,
                format!("{desired} updated pod(s)"),
            );
            need(
                ready == desired,
                format!("{desired} ready pod(s), {ready} so far"),
            );
            need(
                int("/status/numberUnavailable").unwrap_or(0) == 0,
                "no unavailable pod".into(),
            );
        }
        "Pod" => {
            let statuses = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array);
            let all_ready = statuses.is_some_and(|s| {
                s.iter()
                    .all(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
            });
            need(all_ready, "every container ready".into());
        }
        _ => {}
    }
    out
}

/// The checks, each validated; a check that narrows to no object of the task is a mistake.
pub fn checks(opts: &[WaitOpt], targets: &[Target]) -> Result<Vec<Check>, ConfigError> {
    let mut out = Vec::new();
    for (index, o) in opts.iter().enumerate() {
        let bad = |problem| ConfigError::BadWait { index, problem };
        let some = |s: &Option<String>| s.as_deref().is_some_and(|x| !x.trim().is_empty());
        let want = match (some(&o.type_), some(&o.path)) {
            (true, false) if o.value.is_some() => return Err(bad(WaitProblem::ValueWithoutPath)),
            (true, false) => Want::Condition {
                type_: o.type_.clone().unwrap_or_default(),
                status: o.status.clone().unwrap_or_else(|| "True".into()),
            },
            (false, true) if o.status.is_some() => return Err(bad(WaitProblem::StatusWithoutType)),
            (false, true) => Want::Value {
                path: o.path.clone().unwrap_or_default(),
                value: o.value.clone(),
            },
            _ => return Err(bad(WaitProblem::TypeOrPath)),
        };
        let c = Check {
            want,
            kind: o.kind.clone().filter(|k| !k.is_empty()),
            name: o.name.clone().filter(|n| !n.is_empty()),
        };
        if (c.kind.is_some() || c.name.is_some()) && !targets.iter().any(|t| c.applies_to(t)) {
            let what = match (&c.kind, &c.name) {
                (Some(k), Some(n)) => format!("{k} {n}"),
                (Some(k), None) => k.clone(),
                (None, n) => format!("* {}", n.as_deref().unwrap_or_default()),
            };
            return Err(bad(WaitProblem::NoSuchObject(what)));
        }
        out.push(c);
    }
    Ok(out)
}

/// What `obj` still lacks of `checks`; when something is pending and the object reports
/// conditions, the newest one (by `lastTransitionTime`) is added: the controller's last word.
pub fn pending(obj: &Value, checks: &[&Check]) -> Vec<String> {
    let conds: Vec<(&str, &str)> = checks
        .iter()
        .filter_map(|c| match &c.want {
            Want::Condition { type_, status } => Some((type_.as_str(), status.as_str())),
            _ => None,
        })
        .collect();
    let values: Vec<(&str, Option<&str>)> = checks
        .iter()
        .filter_map(|c| match &c.want {
            Want::Value { path, value } => Some((path.as_str(), value.as_deref())),
            _ => None,
        })
        .collect();
    let mut out = unmet(obj, &conds);
    for c in checks {
        match &c.want {
            Want::Ready => out.extend(unready(obj)),
            Want::Reason { type_, reason } => {
                let has = conditions(obj)
                    .iter()
                    .any(|x| &x.type_ == type_ && x.reason.as_deref() == Some(reason.as_str()));
                if !has {
                    out.push(format!("{type_} with reason {reason}"));
                }
            }
            _ => {}
        }
    }
    let value_misses = unmet_values(obj, &values);
    let any_values = !value_misses.is_empty();
    out.extend(value_misses);
    if any_values {
        if let Some(last) = last_condition(obj) {
            out.push(format!("last condition: {last}"));
        }
    }
    out
}

/// The newest condition as `Type=Status (Reason: message)`.
pub fn last_condition(obj: &Value) -> Option<String> {
    let raw = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)?;
    let newest = raw
        .iter()
        .enumerate()
        .max_by_key(|(i, c)| {
            (
                c.get("lastTransitionTime")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                *i,
            )
        })?
        .0;
    let c = conditions(obj).into_iter().nth(newest)?;
    let mut s = format!("{}={}", c.type_, c.status);
    let detail: Vec<&str> = [c.reason.as_deref(), c.message.as_deref()]
        .into_iter()
        .flatten()
        .filter(|x| !x.is_empty())
        .collect();
    if !detail.is_empty() {
        s.push_str(&format!(" ({})", detail.join(": ")));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::targets;
    use serde_json::json;

    fn opt(v: Value) -> WaitOpt {
        serde_json::from_value(v).unwrap()
    }

    fn two() -> Vec<Target> {
        targets(
            &[
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "a"}}),
            ],
            None,
            false,
        )
        .unwrap()
    }

    #[test]
    fn checks_are_conditions_or_values_and_narrow_by_kind_and_name() {
        let t = two();
        let c = checks(
            &[
                opt(json!({"type": "Complete"})),
                opt(json!({"path": "status.phase", "value": "Active", "kind": "Namespace"})),
            ],
            &t,
        )
        .unwrap();
        assert_eq!(
            c[0].want,
            Want::Condition {
                type_: "Complete".into(),
                status: "True".into()
            }
        );
        assert!(c[0].applies_to(&t[0]) && c[0].applies_to(&t[1]));
        assert!(c[1].applies_to(&t[0]) && !c[1].applies_to(&t[1]));
        for (bad, problem) in [
            (json!({}), WaitProblem::TypeOrPath),
            (json!({"type": "A", "path": "b"}), WaitProblem::TypeOrPath),
            (
                json!({"type": "A", "value": "b"}),
                WaitProblem::ValueWithoutPath,
            ),
            (
                json!({"path": "a", "status": "True"}),
                WaitProblem::StatusWithoutType,
            ),
            (
                json!({"type": "A", "kind": "Pod"}),
                WaitProblem::NoSuchObject("Pod".into()),
            ),
        ] {
            match checks(&[opt(json!({"type": "Ok"})), opt(bad.clone())], &t) {
                Err(ConfigError::BadWait {
                    index: 1,
                    problem: p,
                }) => assert_eq!(p, problem, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    /// kubernetes.core's `wait: true` (readiness per kind, or `wait_condition` with its reason).
    #[test]
    fn boolean_wait_is_kubernetes_cores() {
        let t = two();
        assert!(from_options(&json!(false), None, &t).unwrap().is_empty());
        let ready = from_options(&json!(true), None, &t).unwrap();
        assert_eq!(ready[0].want, Want::Ready);
        let cond = WaitCondition {
            type_: "Complete".into(),
            status: None,
            reason: Some("Done".into()),
        };
        let c = from_options(&json!(true), Some(&cond), &t).unwrap();
        let refs: Vec<&Check> = c.iter().collect();
        let job = json!({"status": {"conditions": [{"type": "Complete", "status": "True", "reason": "Other"}]}});
        assert_eq!(pending(&job, &refs), ["Complete with reason Done"]);
        let done = json!({"status": {"conditions": [{"type": "Complete", "status": "True", "reason": "Done"}]}});
        assert!(pending(&done, &refs).is_empty());
        assert!(matches!(
            from_options(&json!("yes"), None, &t),
            Err(ConfigError::WaitType("a string"))
        ));
        assert!(matches!(
            from_options(&json!([{"type": "A", "statsu": "True"}]), None, &t),
            Err(ConfigError::BadWait {
                index: 0,
                problem: WaitProblem::NotAnEntry(_)
            })
        ));
    }

    #[test]
    fn readiness_follows_kubernetes_cores_waiter() {
        let dep = |status: Value| {
            json!({"kind": "Deployment", "metadata": {"generation": 2},
                                         "spec": {"replicas": 2}, "status": status})
        };
        let rolling = dep(
            json!({"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 1,
                                 "unavailableReplicas": 1}),
        );
        assert_eq!(
            unready(&rolling),
            ["2 ready replica(s), 1 so far", "no unavailable replica"]
        );
        let stale =
            dep(json!({"observedGeneration": 1, "updatedReplicas": 2, "availableReplicas": 2}));
        assert_eq!(
            unready(&stale),
            ["the controller to observe the newest generation"]
        );
        assert!(unready(&dep(
            json!({"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2})
        ))
        .is_empty());
        let ds = json!({"kind": "DaemonSet", "metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberReady": 2, "numberUnavailable": 1}});
        assert_eq!(
            unready(&ds),
            ["3 ready pod(s), 2 so far", "no unavailable pod"]
        );
        let pod = json!({"kind": "Pod", "status": {"containerStatuses": [{"ready": true}, {"ready": false}]}});
        assert_eq!(unready(&pod), ["every container ready"]);
        assert_eq!(
            unready(&json!({"kind": "Pod", "status": {}})),
            ["every container ready"]
        );
        assert!(unready(&json!({"kind": "ConfigMap"})).is_empty());
    }

    #[test]
    fn pending_names_what_is_missing_and_the_last_condition() {
        let t = two();
        let c = checks(
            &[
                opt(json!({"type": "Complete"})),
                opt(json!({"path": "status.succeeded", "value": "1"})),
            ],
            &t,
        )
        .unwrap();
        let refs: Vec<&Check> = c.iter().collect();
        let job = json!({"status": {"conditions": [
            {"type": "Started", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit",
             "lastTransitionTime": "2026-01-01T00:05:00Z"}]}});
        assert_eq!(
            pending(&job, &refs),
            vec![
                "Complete=True (not reported yet)".to_string(),
                "status.succeeded=1 (not set yet)".to_string(),
                "last condition: Failed=True (BackoffLimitExceeded: Job has reached the specified backoff limit)".to_string(),
            ]
        );
        let done = json!({"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}});
        assert!(pending(&done, &refs).is_empty());
        assert_eq!(last_condition(&json!({})), None);
    }
}
