//! The worker pools of a Control Plane Only update (OpenShift's EUS-to-EUS procedure, "Performing a
//! Control Plane Only update"): before the first of several minor hops, every machine config pool but
//! `master` is paused (`spec.paused: true`), so the workers do not update and reboot once per hop; once
//! the control plane is at the target they are resumed and update once, from the first release to the
//! last. Pure: which pools to pause, which this module paused, and whether resumed pools are done.
//!
//! A pool this module paused carries [`PAUSED_BY`] (the request it was paused for), so a rerun after a
//! failure resumes exactly those and never one an administrator paused for reasons of their own.

use serde_json::{json, Value};

use crate::decide::Request;

/// The annotation on a pool this module paused; its value is the requested version.
pub const PAUSED_BY: &str = "proxshift.io/paused-for-update";

/// More than one minor between `from` and the request: the hops pass a minor the workers need not run.
pub fn control_plane_only(from: &str, req: &Request) -> bool {
    let Ok(from) = semver::Version::parse(from) else {
        return false;
    };
    let (major, minor) = match req {
        Request::Minor { major, minor } => (*major, *minor),
        Request::Exact(v) => (v.major, v.minor),
    };
    major == from.major && minor >= from.minor + 2
}

fn name(pool: &Value) -> Option<&str> {
    pool.pointer("/metadata/name").and_then(Value::as_str)
}

fn paused(pool: &Value) -> bool {
    pool.pointer("/spec/paused").and_then(Value::as_bool) == Some(true)
}

/// The pools to pause: every pool but `master` that is not paused already (one an administrator paused
/// stays theirs).
pub fn to_pause(pools: &[Value]) -> Vec<String> {
    pools
        .iter()
        .filter(|p| !paused(p))
        .filter_map(name)
        .filter(|n| *n != "master")
        .map(str::to_string)
        .collect()
}

/// The pools this module paused (any run): paused and carrying [`PAUSED_BY`].
pub fn ours(pools: &[Value]) -> Vec<String> {
    pools
        .iter()
        .filter(|p| {
            paused(p)
                && p.pointer("/metadata/annotations")
                    .and_then(|a| a.get(PAUSED_BY))
                    .is_some()
        })
        .filter_map(name)
        .map(str::to_string)
        .collect()
}

/// The merge patch that pauses a pool for `req` (`true`) or resumes it and drops the mark (`false`).
pub fn patch(pause: bool, req: &Request) -> Value {
    let mark = if pause {
        json!(req.to_string())
    } else {
        Value::Null
    };
    json!({"metadata": {"annotations": {PAUSED_BY: mark}}, "spec": {"paused": pause}})
}

/// What a resumed pool still lacks before its machines run the new configuration: the controller has
/// seen the resume (`status.observedGeneration`), every machine is updated, and `Updated=True` (what
/// `oc wait mcp/worker --for condition=Updated` waits for). None when it is done.
pub fn rolling(pool: &Value) -> Option<String> {
    let n = name(pool).unwrap_or("?");
    let num = |p: &str| pool.pointer(p).and_then(Value::as_i64);
    if num("/status/observedGeneration") < num("/metadata/generation") {
        return Some(format!("MachineConfigPool {n}: the resume not seen yet"));
    }
    let (updated, total) = (
        num("/status/updatedMachineCount").unwrap_or(0),
        num("/status/machineCount").unwrap_or(0),
    );
    let ready = pool
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Updated"))
        .is_some_and(|c| c["status"] == "True");
    (!ready || updated < total)
        .then(|| format!("MachineConfigPool {n}: {updated} of {total} machines updated"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, paused: bool, mark: bool) -> Value {
        let mut p = json!({"metadata": {"name": name}, "spec": {"paused": paused}});
        if mark {
            p["metadata"]["annotations"] = json!({PAUSED_BY: "4.18"});
        }
        p
    }

    #[test]
    fn only_a_jump_over_a_minor_is_control_plane_only() {
        let minor = |m| Request::Minor { major: 4, minor: m };
        assert!(control_plane_only("4.16.20", &minor(18)));
        assert!(!control_plane_only("4.16.20", &minor(17)));
        assert!(!control_plane_only("4.16.20", &minor(16)));
        assert!(control_plane_only(
            "4.16.20",
            &Request::Exact(semver::Version::new(4, 18, 3))
        ));
        assert!(!control_plane_only("not a version", &minor(18)));
    }

    #[test]
    fn workers_are_paused_and_only_ours_resumed() {
        let pools = [
            pool("master", false, false),
            pool("worker", false, false),
            pool("infra", true, false),
        ];
        assert_eq!(to_pause(&pools), ["worker"]);
        let later = [
            pool("master", false, false),
            pool("worker", true, true),
            pool("infra", true, false),
        ];
        assert_eq!(ours(&later), ["worker"]);
        let req = Request::Minor {
            major: 4,
            minor: 18,
        };
        assert_eq!(
            patch(true, &req),
            json!({"metadata": {"annotations": {PAUSED_BY: "4.18"}}, "spec": {"paused": true}})
        );
        assert_eq!(
            patch(false, &req)["metadata"]["annotations"][PAUSED_BY],
            Value::Null
        );
    }

    #[test]
    fn a_resumed_pool_is_done_once_seen_and_every_machine_updated() {
        let mut p = json!({"metadata": {"name": "worker", "generation": 3},
                           "status": {"observedGeneration": 2, "machineCount": 3, "updatedMachineCount": 0,
                                      "conditions": [{"type": "Updated", "status": "True"}]}});
        assert_eq!(
            rolling(&p).unwrap(),
            "MachineConfigPool worker: the resume not seen yet"
        );
        p["status"]["observedGeneration"] = json!(3);
        p["status"]["conditions"][0]["status"] = json!("False");
        assert_eq!(
            rolling(&p).unwrap(),
            "MachineConfigPool worker: 0 of 3 machines updated"
        );
        p["status"]["updatedMachineCount"] = json!(3);
        p["status"]["conditions"][0]["status"] = json!("True");
        assert_eq!(rolling(&p), None);
    }
}
