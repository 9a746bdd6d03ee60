//! What to change, from what Proxmox has and what is wanted: pure, no I/O.
//!
//! Ownership is the `comment`: every HA resource and rule this module creates carries
//! [`marker`] (`proxshift:<cluster>`), and only those are ever updated or removed. A VM that is
//! already an HA resource of someone else is left as it is (it may still be named in a rule:
//! naming a resource does not change it).

use std::collections::{BTreeMap, BTreeSet};

use pve_client::{HaResource, HaRule};
use serde_json::{json, Value};

/// The `comment` that marks what this module created for `cluster`.
pub fn marker(cluster: &str) -> String {
    format!("proxshift:{cluster}")
}

/// A VM of the cluster, as the selection found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterVm {
    pub vmid: u32,
    pub name: Option<String>,
}

/// What is wanted.
#[derive(Debug, Clone)]
pub struct Desired {
    pub present: bool,
    /// The `comment` of owned resources and rules.
    pub marker: String,
    /// Requested HA state of the resources (`started`, `stopped`, …).
    pub ha_state: String,
    /// Names or VMIDs of the VMs to keep on different nodes.
    pub control_plane: Vec<String>,
    /// Keep the other VMs (workers) on different nodes too.
    pub spread_workers: bool,
    pub control_plane_rule: String,
    pub workers_rule: String,
}

/// What Proxmox has.
#[derive(Debug, Clone)]
pub struct Observed {
    pub vms: Vec<ClusterVm>,
    pub resources: Vec<HaResource>,
    /// `None` on PVE 8 (no rules there).
    pub rules: Option<Vec<HaRule>>,
    pub node_count: usize,
}

/// One change, in the order it must be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    CreateResource { vmid: u32 },
    UpdateResource { vmid: u32 },
    DeleteResource { vmid: u32 },
    CreateRule { id: String, vmids: BTreeSet<u32> },
    UpdateRule { id: String, vmids: BTreeSet<u32> },
    DeleteRule { id: String },
}

/// The changes and what the user should know.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub warnings: Vec<String>,
}

/// A wish the plan cannot follow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("control_plane names {0:?}, which is no VM of the selection")]
    UnknownControlPlane(Vec<String>),
    #[error("rule '{0}' exists and was not created by proxshift (its comment is not '{1}'); rename rule_prefix or remove it")]
    ForeignRule(String, String),
}

fn sid(vmid: u32) -> String {
    format!("vm:{vmid}")
}

/// The control-plane VMs among `vms` (by name or VMID), or the names that match none.
fn control_plane(vms: &[ClusterVm], wanted: &[String]) -> Result<BTreeSet<u32>, PlanError> {
    let mut out = BTreeSet::new();
    let mut unknown = Vec::new();
    for w in wanted {
        let hits: Vec<u32> = vms
            .iter()
            .filter(|v| v.name.as_deref() == Some(w.as_str()) || v.vmid.to_string() == *w)
            .map(|v| v.vmid)
            .collect();
        if hits.is_empty() {
            unknown.push(w.clone());
        }
        out.extend(hits);
    }
    if unknown.is_empty() {
        Ok(out)
    } else {
        Err(PlanError::UnknownControlPlane(unknown))
    }
}

/// The negative rule `id` should name `vmids`: created, updated, removed or left alone.
fn plan_rule(
    obs: &[HaRule],
    marker: &str,
    id: &str,
    vmids: Option<BTreeSet<u32>>,
    actions: &mut Vec<Action>,
) -> Result<(), PlanError> {
    let current = obs.iter().find(|r| r.rule == id);
    if let Some(r) = current {
        if r.comment.as_deref() != Some(marker) {
            return Err(PlanError::ForeignRule(id.to_string(), marker.to_string()));
        }
    }
    let id = id.to_string();
    match (current, vmids) {
        (None, Some(vmids)) => actions.push(Action::CreateRule { id, vmids }),
        (Some(r), Some(vmids)) => {
            let same = r.vmids() == vmids
                && r.affinity.as_deref() == Some("negative")
                && r.kind == "resource-affinity"
                && !r.disable;
            if !same {
                actions.push(Action::UpdateRule { id, vmids });
            }
        }
        (Some(_), None) => actions.push(Action::DeleteRule { id }),
        (None, None) => {}
    }
    Ok(())
}

/// Which VMs a negative rule may keep apart: at least two, and no more than there are nodes
/// (PVE refuses more: `check_negative_resource_affinity_resources_count`).
fn apart(
    what: &str,
    vmids: BTreeSet<u32>,
    nodes: usize,
    warnings: &mut Vec<String>,
) -> Option<BTreeSet<u32>> {
    if vmids.len() < 2 {
        return None;
    }
    if vmids.len() > nodes {
        warnings.push(format!(
            "{} {what} VMs cannot be kept on different nodes of a {nodes}-node Proxmox cluster: no rule for them",
            vmids.len()
        ));
        return None;
    }
    Some(vmids)
}

/// The changes that bring Proxmox to `want`.
pub fn plan(obs: &Observed, want: &Desired) -> Result<Plan, PlanError> {
    let mut p = Plan::default();
    let ours = |r: &HaResource| r.comment.as_deref() == Some(want.marker.as_str());
    let selected: BTreeSet<u32> = obs.vms.iter().map(|v| v.vmid).collect();
    let by_vmid: BTreeMap<u32, &HaResource> = obs
        .resources
        .iter()
        .filter_map(|r| r.vmid().map(|v| (v, r)))
        .collect();
    let (cp, workers) = if want.present {
        let cp = control_plane(&obs.vms, &want.control_plane)?;
        let workers: BTreeSet<u32> = selected.difference(&cp).copied().collect();
        (cp, workers)
    } else {
        (BTreeSet::new(), BTreeSet::new())
    };
    // Resources first on present (rules need them), last on absent (after the rules).
    let mut resource_actions = Vec::new();
    if want.present {
        for vmid in &selected {
            match by_vmid.get(vmid) {
                None => resource_actions.push(Action::CreateResource { vmid: *vmid }),
                Some(r) if ours(r) && r.state.as_deref() != Some(want.ha_state.as_str()) => {
                    resource_actions.push(Action::UpdateResource { vmid: *vmid })
                }
                Some(r) if !ours(r) => p.warnings.push(format!(
                    "{} is an HA resource proxshift did not create: left as it is",
                    r.sid
                )),
                Some(_) => {}
            }
        }
    }
    // Ours but no longer selected (scaled in, or all on absent).
    for (vmid, r) in &by_vmid {
        if ours(r) && (!want.present || !selected.contains(vmid)) {
            resource_actions.push(Action::DeleteResource { vmid: *vmid });
        }
    }
    if want.present {
        p.actions.extend(resource_actions.iter().cloned());
    }
    match &obs.rules {
        Some(rules) => {
            // PVE lists the problems it finds with a rule (a resource gone since, fewer nodes).
            for r in rules
                .iter()
                .filter(|r| r.comment.as_deref() == Some(want.marker.as_str()))
            {
                if let Some(e) = r.errors.as_ref().filter(|e| !e.is_null()) {
                    p.warnings.push(format!(
                        "Proxmox reports rule {} as not effective: {e}",
                        r.rule
                    ));
                }
            }
            let (cp_rule, worker_rule) = if want.present {
                let n = obs.node_count;
                let cp_rule = apart("control-plane", cp, n, &mut p.warnings);
                let w = if want.spread_workers {
                    workers
                } else {
                    BTreeSet::new()
                };
                (cp_rule, apart("worker", w, n, &mut p.warnings))
            } else {
                (None, None)
            };
            plan_rule(
                rules,
                &want.marker,
                &want.control_plane_rule,
                cp_rule,
                &mut p.actions,
            )?;
            plan_rule(
                rules,
                &want.marker,
                &want.workers_rule,
                worker_rule,
                &mut p.actions,
            )?;
        }
        None if want.present && (cp.len() >= 2 || (want.spread_workers && workers.len() >= 2)) => {
            p.warnings.push(
                "Proxmox VE 8 has no HA resource-affinity rules: after a node failure HA may restart \
                 control-plane VMs on one node; PVE 9 keeps them apart"
                    .into(),
            );
        }
        None => {}
    }
    if !want.present {
        p.actions.extend(resource_actions);
    }
    Ok(p)
}

/// The before/after state of what the module owns, for diff mode: `{resources: {sid: state},
/// rules: {id: "vm:…"}}`.
pub fn owned_state(obs: &Observed, marker: &str) -> Value {
    let resources: BTreeMap<String, Value> = obs
        .resources
        .iter()
        .filter(|r| r.comment.as_deref() == Some(marker))
        .map(|r| (r.sid.clone(), json!(r.state)))
        .collect();
    let rules: BTreeMap<String, Value> = obs
        .rules
        .iter()
        .flatten()
        .filter(|r| r.comment.as_deref() == Some(marker))
        .map(|r| (r.rule.clone(), json!(r.resources)))
        .collect();
    json!({"resources": resources, "rules": rules})
}

/// `owned_state` after `plan` ran (check mode's prediction, and diff mode's `after`).
pub fn predicted_state(obs: &Observed, want: &Desired, plan: &Plan) -> Value {
    let mut v = owned_state(obs, &want.marker);
    for a in &plan.actions {
        match a {
            Action::CreateResource { vmid } | Action::UpdateResource { vmid } => {
                v["resources"][sid(*vmid)] = json!(want.ha_state);
            }
            Action::DeleteResource { vmid } => {
                v["resources"]
                    .as_object_mut()
                    .map(|m| m.remove(&sid(*vmid)));
            }
            Action::CreateRule { id, vmids } | Action::UpdateRule { id, vmids } => {
                let list: Vec<String> = vmids.iter().map(|v| sid(*v)).collect();
                v["rules"][id] = json!(list.join(","));
            }
            Action::DeleteRule { id } => {
                v["rules"].as_object_mut().map(|m| m.remove(id));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vms(n: &[(u32, &str)]) -> Vec<ClusterVm> {
        n.iter()
            .map(|(v, name)| ClusterVm {
                vmid: *v,
                name: Some(name.to_string()),
            })
            .collect()
    }

    fn want(present: bool, cp: &[&str]) -> Desired {
        Desired {
            present,
            marker: marker("c1"),
            ha_state: "started".into(),
            control_plane: cp.iter().map(|s| s.to_string()).collect(),
            spread_workers: true,
            control_plane_rule: "proxshift-c1-control-plane".into(),
            workers_rule: "proxshift-c1-workers".into(),
        }
    }

    fn res(vmid: u32, comment: Option<&str>) -> HaResource {
        HaResource {
            sid: sid(vmid),
            state: Some("started".into()),
            comment: comment.map(str::to_string),
            group: None,
        }
    }

    fn rule(id: &str, vmids: &str, comment: Option<&str>) -> HaRule {
        serde_json::from_value(
            json!({"rule": id, "type": "resource-affinity", "affinity": "negative",
            "resources": vmids, "comment": comment}),
        )
        .unwrap()
    }

    fn compact() -> Observed {
        Observed {
            vms: vms(&[
                (201, "m0"),
                (202, "m1"),
                (203, "m2"),
                (204, "w0"),
                (205, "w1"),
            ]),
            resources: vec![],
            rules: Some(vec![]),
            node_count: 3,
        }
    }

    #[test]
    fn present_creates_resources_then_rules() {
        let p = plan(&compact(), &want(true, &["m0", "m1", "203"])).unwrap();
        let creates = p
            .actions
            .iter()
            .filter(|a| matches!(a, Action::CreateResource { .. }))
            .count();
        assert_eq!(creates, 5);
        assert_eq!(
            p.actions[5],
            Action::CreateRule {
                id: "proxshift-c1-control-plane".into(),
                vmids: [201, 202, 203].into_iter().collect()
            }
        );
        assert!(
            matches!(&p.actions[6], Action::CreateRule { id, .. } if id == "proxshift-c1-workers")
        );
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn converged_state_plans_nothing_and_scale_in_is_reconciled() {
        let mut obs = compact();
        let m = marker("c1");
        obs.resources = (201..=205).map(|v| res(v, Some(&m))).collect();
        obs.rules = Some(vec![
            rule(
                "proxshift-c1-control-plane",
                "vm:201,vm:202,vm:203",
                Some(&m),
            ),
            rule("proxshift-c1-workers", "vm:204,vm:205", Some(&m)),
        ]);
        let w = want(true, &["m0", "m1", "m2"]);
        assert_eq!(plan(&obs, &w).unwrap(), Plan::default());
        // w1 is gone from the selection: its resource goes and the worker rule (one left) too.
        obs.vms.pop();
        let p = plan(&obs, &w).unwrap();
        assert_eq!(
            p.actions,
            [
                Action::DeleteResource { vmid: 205 },
                Action::DeleteRule {
                    id: "proxshift-c1-workers".into()
                }
            ]
        );
        let after = predicted_state(&obs, &w, &p);
        assert!(after["rules"].get("proxshift-c1-workers").is_none());
        assert!(after["resources"].get("vm:205").is_none());
    }

    #[test]
    fn scale_out_adds_the_resource_then_widens_the_rule() {
        let mut obs = compact();
        let m = marker("c1");
        obs.resources = (201..=205).map(|v| res(v, Some(&m))).collect();
        obs.rules = Some(vec![
            rule(
                "proxshift-c1-control-plane",
                "vm:201,vm:202,vm:203",
                Some(&m),
            ),
            rule("proxshift-c1-workers", "vm:204,vm:205", Some(&m)),
        ]);
        obs.vms.push(ClusterVm {
            vmid: 206,
            name: Some("w2".into()),
        });
        let p = plan(&obs, &want(true, &["m0", "m1", "m2"])).unwrap();
        assert_eq!(
            p.actions,
            [
                Action::CreateResource { vmid: 206 },
                Action::UpdateRule {
                    id: "proxshift-c1-workers".into(),
                    vmids: [204, 205, 206].into_iter().collect()
                }
            ]
        );
        // A fourth worker on three nodes: the rule goes, with a warning.
        obs.vms.push(ClusterVm {
            vmid: 207,
            name: Some("w3".into()),
        });
        let p = plan(&obs, &want(true, &["m0", "m1", "m2"])).unwrap();
        assert!(p.actions.contains(&Action::DeleteRule {
            id: "proxshift-c1-workers".into()
        }));
        assert!(p.warnings[0].contains("4 worker VMs"), "{:?}", p.warnings);
    }

    #[test]
    fn foreign_things_are_never_touched() {
        let mut obs = compact();
        obs.resources = vec![res(201, Some("ops team"))];
        obs.rules = Some(vec![rule("proxshift-c1-workers", "vm:1,vm:2", None)]);
        let e = plan(&obs, &want(true, &[])).unwrap_err();
        assert!(matches!(e, PlanError::ForeignRule(..)));
        obs.rules = Some(vec![]);
        let p = plan(&obs, &want(true, &[])).unwrap();
        assert!(!p.actions.contains(&Action::CreateResource { vmid: 201 }));
        assert!(p.warnings[0].contains("vm:201"), "{:?}", p.warnings);
        let p = plan(&obs, &want(false, &[])).unwrap();
        assert!(
            p.actions.is_empty(),
            "absent leaves foreign resources: {p:?}"
        );
    }

    #[test]
    fn problems_pve_reports_with_an_owned_rule_are_warned() {
        let mut obs = compact();
        let m = marker("c1");
        let mut r = rule("proxshift-c1-workers", "vm:204", Some(&m));
        r.errors =
            Some(json!({"resources": "rule is ineffective as there are less than two resources"}));
        obs.rules = Some(vec![r]);
        let p = plan(&obs, &want(true, &["m0", "m1", "m2"])).unwrap();
        assert!(
            p.warnings[0].contains("less than two resources"),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn absent_removes_rules_before_resources() {
        let mut obs = compact();
        let m = marker("c1");
        obs.resources = vec![res(201, Some(&m)), res(202, Some(&m))];
        obs.rules = Some(vec![rule(
            "proxshift-c1-control-plane",
            "vm:201,vm:202",
            Some(&m),
        )]);
        let p = plan(&obs, &want(false, &[])).unwrap();
        assert_eq!(
            p.actions,
            [
                Action::DeleteRule {
                    id: "proxshift-c1-control-plane".into()
                },
                Action::DeleteResource { vmid: 201 },
                Action::DeleteResource { vmid: 202 },
            ]
        );
    }

    #[test]
    fn too_many_to_keep_apart_and_pve8_warn() {
        let mut obs = compact();
        obs.node_count = 2;
        let p = plan(&obs, &want(true, &["m0", "m1", "m2"])).unwrap();
        assert!(
            p.warnings[0].contains("3 control-plane VMs cannot be kept"),
            "{:?}",
            p.warnings
        );
        assert!(!p
            .actions
            .iter()
            .any(|a| matches!(a, Action::CreateRule { id, .. } if id.ends_with("control-plane"))));
        obs.rules = None;
        let p = plan(&obs, &want(true, &["m0", "m1"])).unwrap();
        assert!(p.warnings[0].contains("Proxmox VE 8"), "{:?}", p.warnings);
        let e = plan(&compact(), &want(true, &["nope"])).unwrap_err();
        assert_eq!(e, PlanError::UnknownControlPlane(vec!["nope".into()]));
    }
}
