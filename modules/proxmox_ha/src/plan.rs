//! What to change, from what Proxmox has and what is wanted: pure, no I/O.
//!
//! Ownership is the `comment`: every HA resource, rule and group this module creates carries
//! [`marker`] (`proxshift:<cluster>`), and only those are ever updated or removed. A VM that is
//! already an HA resource of someone else is left as it is (it may still be named in a rule:
//! naming a resource does not change it).
//!
//! Keeping VMs apart: on PVE ≥ 9 a negative resource-affinity rule per set (control plane,
//! workers); on PVE 8, which has no such rules, an HA group per VM preferring a node of its own
//! ([`crate::groups`]).

use std::collections::{BTreeMap, BTreeSet};

use pve_client::{ha_node_list, HaGroup, HaResource, HaRule};
use serde_json::{json, Value};

use crate::groups::{self, Member};

/// The `comment` that marks what this module created for `cluster`.
pub fn marker(cluster: &str) -> String {
    format!("proxshift:{cluster}")
}

/// A VM of the cluster, as the selection found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterVm {
    pub vmid: u32,
    pub name: Option<String>,
    /// The Proxmox node it is on.
    pub node: Option<String>,
}

/// What is wanted.
#[derive(Debug, Clone)]
pub struct Desired {
    pub present: bool,
    /// The `comment` of owned resources, rules and groups.
    pub marker: String,
    /// Requested HA state of the resources (`started`, `stopped`, …).
    pub ha_state: String,
    /// Names or VMIDs of the VMs to keep on different nodes.
    pub control_plane: Vec<String>,
    /// Keep the other VMs (workers) on different nodes too.
    pub spread_workers: bool,
    pub control_plane_rule: String,
    pub workers_rule: String,
    /// PVE 8: a VM's group is this followed by its VMID.
    pub group_prefix: String,
}

impl Desired {
    pub fn group_id(&self, vmid: u32) -> String {
        format!("{}{vmid}", self.group_prefix)
    }
}

/// What Proxmox has.
#[derive(Debug, Clone)]
pub struct Observed {
    pub vms: Vec<ClusterVm>,
    pub resources: Vec<HaResource>,
    /// `None` on PVE 8 (no rules there).
    pub rules: Option<Vec<HaRule>>,
    /// `Some` on PVE 8 only (PVE 9 has migrated groups to rules).
    pub groups: Option<Vec<HaGroup>>,
    /// The Proxmox cluster's node names.
    pub nodes: BTreeSet<String>,
}

/// What an update does to a resource's HA group (PVE 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    Keep,
    Bind(String),
    Unbind,
}

/// One change, in the order it must be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    CreateGroup {
        id: String,
        nodes: BTreeMap<String, i64>,
    },
    UpdateGroup {
        id: String,
        nodes: BTreeMap<String, i64>,
    },
    CreateResource {
        vmid: u32,
        group: Option<String>,
    },
    UpdateResource {
        vmid: u32,
        group: Binding,
    },
    DeleteResource {
        vmid: u32,
    },
    CreateRule {
        id: String,
        vmids: BTreeSet<u32>,
    },
    UpdateRule {
        id: String,
        vmids: BTreeSet<u32>,
    },
    DeleteRule {
        id: String,
    },
    DeleteGroup {
        id: String,
    },
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
    #[error("HA group '{0}' exists and was not created by proxshift (its comment is not '{1}'); rename rule_prefix or remove it")]
    ForeignGroup(String, String),
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
    vmids: Option<&BTreeSet<u32>>,
    actions: &mut Vec<Action>,
) -> Result<(), PlanError> {
    let current = obs.iter().find(|r| r.rule == id);
    if let Some(r) = current {
        if r.comment.as_deref() != Some(marker) {
            return Err(PlanError::ForeignRule(id.to_string(), marker.to_string()));
        }
    }
    let id = id.to_string();
    match (current, vmids.cloned()) {
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

/// Which VMs can be kept apart: at least two, and no more than there are nodes (PVE refuses
/// more in a negative rule: `check_negative_resource_affinity_resources_count`; PVE 8 groups
/// would need a node each).
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
            "{} {what} VMs cannot be kept on different nodes of a {nodes}-node Proxmox cluster: they are not kept apart",
            vmids.len()
        ));
        return None;
    }
    Some(vmids)
}

/// The sets to keep apart, control plane first, then the workers (each `None` when it is not
/// kept apart); none when absent.
fn sets(
    obs: &Observed,
    want: &Desired,
    warnings: &mut Vec<String>,
) -> Result<[Option<BTreeSet<u32>>; 2], PlanError> {
    if !want.present {
        return Ok([None, None]);
    }
    let cp = control_plane(&obs.vms, &want.control_plane)?;
    let workers: BTreeSet<u32> = obs
        .vms
        .iter()
        .map(|v| v.vmid)
        .filter(|v| !cp.contains(v))
        .collect();
    let n = obs.nodes.len();
    let cp = apart("control-plane", cp, n, warnings);
    let workers = if want.spread_workers {
        apart("worker", workers, n, warnings)
    } else {
        None
    };
    Ok([cp, workers])
}

/// The resources: created (bound to their group on PVE 8), updated, or removed when no longer
/// selected (scaled in, or all on absent). `bound` is `None` on PVE 9 (no groups to bind).
fn plan_resources(
    obs: &Observed,
    want: &Desired,
    bound: Option<&BTreeMap<u32, String>>,
    warnings: &mut Vec<String>,
) -> Vec<Action> {
    let ours = |r: &HaResource| r.comment.as_deref() == Some(want.marker.as_str());
    let selected: BTreeSet<u32> = obs.vms.iter().map(|v| v.vmid).collect();
    let by_vmid: BTreeMap<u32, &HaResource> = obs
        .resources
        .iter()
        .filter_map(|r| r.vmid().map(|v| (v, r)))
        .collect();
    let mut out = Vec::new();
    for vmid in selected.iter().filter(|_| want.present) {
        let group = bound.map(|b| b.get(vmid).cloned());
        match by_vmid.get(vmid) {
            None => out.push(Action::CreateResource {
                vmid: *vmid,
                group: group.flatten(),
            }),
            Some(r) if ours(r) => {
                let binding = match group {
                    Some(g) if r.group != g => g.map_or(Binding::Unbind, Binding::Bind),
                    _ => Binding::Keep,
                };
                if r.state.as_deref() != Some(want.ha_state.as_str()) || binding != Binding::Keep {
                    out.push(Action::UpdateResource {
                        vmid: *vmid,
                        group: binding,
                    });
                }
            }
            Some(r) => warnings.push(format!(
                "{} is an HA resource proxshift did not create: left as it is",
                r.sid
            )),
        }
    }
    for (vmid, r) in &by_vmid {
        if ours(r) && (!want.present || !selected.contains(vmid)) {
            out.push(Action::DeleteResource { vmid: *vmid });
        }
    }
    out
}

/// PVE ≥ 9: the two negative rules, and the problems PVE reports with owned ones.
fn plan_rules(
    rules: &[HaRule],
    want: &Desired,
    sets: &[Option<BTreeSet<u32>>; 2],
    warnings: &mut Vec<String>,
) -> Result<Vec<Action>, PlanError> {
    for r in rules
        .iter()
        .filter(|r| r.comment.as_deref() == Some(want.marker.as_str()))
    {
        if let Some(e) = r.errors.as_ref().filter(|e| !e.is_null()) {
            warnings.push(format!(
                "Proxmox reports rule {} as not effective: {e}",
                r.rule
            ));
        }
    }
    let mut out = Vec::new();
    let ids = [&want.control_plane_rule, &want.workers_rule];
    for (id, set) in ids.into_iter().zip(sets) {
        plan_rule(rules, &want.marker, id, set.as_ref(), &mut out)?;
    }
    Ok(out)
}

/// PVE 8: the groups, which VM each binds, and the owned groups no longer wanted.
#[derive(Debug, Default)]
struct GroupPlan {
    bound: BTreeMap<u32, String>,
    upserts: Vec<Action>,
    deletes: Vec<Action>,
}

/// The node lists the groups of the sets should have (group id → (vmid, nodes)), with a warning
/// for each VM that HA will move to its new home and each set with no spare node.
fn wanted_groups(
    obs: &Observed,
    want: &Desired,
    owned: &BTreeMap<&str, &HaGroup>,
    sets: &[Option<BTreeSet<u32>>; 2],
    warnings: &mut Vec<String>,
) -> BTreeMap<String, (u32, BTreeMap<String, i64>)> {
    let mut out = BTreeMap::new();
    for (what, set) in ["control-plane", "worker"].into_iter().zip(sets) {
        let Some(set) = set else { continue };
        let members: Vec<Member> = obs
            .vms
            .iter()
            .filter(|v| set.contains(&v.vmid))
            .map(|v| Member {
                vmid: v.vmid,
                node: v.node.clone(),
                home: owned
                    .get(want.group_id(v.vmid).as_str())
                    .and_then(|g| groups::preferred(&g.node_priorities())),
            })
            .collect();
        let homes = groups::homes(&members, &obs.nodes);
        for m in members.iter().filter(|m| m.home.is_none()) {
            if let (Some(node), Some(home)) = (&m.node, homes.get(&m.vmid)) {
                if node != home {
                    warnings.push(format!(
                        "Proxmox HA will migrate {} from {node} to {home}, the node its group prefers",
                        sid(m.vmid)
                    ));
                }
            }
        }
        if set.len() == obs.nodes.len() && members.iter().any(|m| m.home.is_none()) {
            warnings.push(format!(
                "Proxmox VE 8 HA groups only rank nodes: with no spare node, a lost node's {what} VM runs beside \
                 another until its node is back (it then moves home); PVE 9's rules keep it waiting instead"
            ));
        }
        for (vmid, nodes) in groups::group_nodes(&homes, &obs.nodes) {
            out.insert(want.group_id(vmid), (vmid, nodes));
        }
    }
    out
}

/// PVE 8: one group per VM of each set; owned groups not wanted go (after their resources).
fn plan_groups(
    obs: &Observed,
    want: &Desired,
    groups: &[HaGroup],
    sets: &[Option<BTreeSet<u32>>; 2],
    warnings: &mut Vec<String>,
) -> Result<GroupPlan, PlanError> {
    let owned: BTreeMap<&str, &HaGroup> = groups
        .iter()
        .filter(|g| g.comment.as_deref() == Some(want.marker.as_str()))
        .map(|g| (g.group.as_str(), g))
        .collect();
    let wanted = wanted_groups(obs, want, &owned, sets, warnings);
    let mut p = GroupPlan::default();
    for (id, (vmid, nodes)) in &wanted {
        let (id, nodes) = (id.clone(), nodes.clone());
        match groups.iter().find(|g| g.group == id) {
            Some(g) if g.comment.as_deref() != Some(want.marker.as_str()) => {
                return Err(PlanError::ForeignGroup(id, want.marker.clone()))
            }
            Some(g) if g.node_priorities() == nodes && !g.restricted && !g.nofailback => {}
            Some(_) => p.upserts.push(Action::UpdateGroup {
                id: id.clone(),
                nodes,
            }),
            None => p.upserts.push(Action::CreateGroup {
                id: id.clone(),
                nodes,
            }),
        }
        p.bound.insert(*vmid, id);
    }
    for id in owned.keys().filter(|id| !wanted.contains_key(**id)) {
        p.deletes.push(Action::DeleteGroup { id: id.to_string() });
    }
    Ok(p)
}

/// The changes that bring Proxmox to `want`. Present: groups, resources, rules (rules and
/// bindings need the resources and groups); absent: rules, resources. Either way unwanted
/// groups go last, once no resource uses them.
pub fn plan(obs: &Observed, want: &Desired) -> Result<Plan, PlanError> {
    let mut p = Plan::default();
    let sets = sets(obs, want, &mut p.warnings)?;
    let groups = match &obs.groups {
        Some(g) => Some(plan_groups(obs, want, g, &sets, &mut p.warnings)?),
        None => None,
    };
    let resources = plan_resources(
        obs,
        want,
        groups.as_ref().map(|g| &g.bound),
        &mut p.warnings,
    );
    let rules = match &obs.rules {
        Some(r) => plan_rules(r, want, &sets, &mut p.warnings)?,
        None => Vec::new(),
    };
    let (upserts, deletes) = groups.map(|g| (g.upserts, g.deletes)).unwrap_or_default();
    if want.present {
        p.actions.extend(upserts);
        p.actions.extend(resources);
        p.actions.extend(rules);
    } else {
        p.actions.extend(rules);
        p.actions.extend(resources);
    }
    p.actions.extend(deletes);
    Ok(p)
}

/// What the module owns, as diff mode and the `ha` result show it.
#[derive(Debug, Default)]
struct Owned {
    /// sid → (requested state, group).
    resources: BTreeMap<String, (Option<String>, Option<String>)>,
    rules: BTreeMap<String, String>,
    /// group id → its nodes (`pve1:2,pve3:1`).
    groups: BTreeMap<String, String>,
}

impl Owned {
    fn observed(obs: &Observed, marker: &str) -> Owned {
        let mine = |c: &Option<String>| c.as_deref() == Some(marker);
        Owned {
            resources: obs
                .resources
                .iter()
                .filter(|r| mine(&r.comment))
                .map(|r| (r.sid.clone(), (r.state.clone(), r.group.clone())))
                .collect(),
            rules: obs
                .rules
                .iter()
                .flatten()
                .filter(|r| mine(&r.comment))
                .map(|r| (r.rule.clone(), r.resources.clone()))
                .collect(),
            groups: obs
                .groups
                .iter()
                .flatten()
                .filter(|g| mine(&g.comment))
                .map(|g| (g.group.clone(), ha_node_list(&g.node_priorities())))
                .collect(),
        }
    }

    fn apply(&mut self, want: &Desired, a: &Action) {
        let state = Some(want.ha_state.clone());
        match a {
            Action::CreateGroup { id, nodes } | Action::UpdateGroup { id, nodes } => {
                self.groups.insert(id.clone(), ha_node_list(nodes));
            }
            Action::DeleteGroup { id } => {
                self.groups.remove(id);
            }
            Action::CreateResource { vmid, group } => {
                self.resources.insert(sid(*vmid), (state, group.clone()));
            }
            Action::UpdateResource { vmid, group } => {
                let r = self.resources.entry(sid(*vmid)).or_default();
                r.0 = state;
                match group {
                    Binding::Keep => {}
                    Binding::Bind(g) => r.1 = Some(g.clone()),
                    Binding::Unbind => r.1 = None,
                }
            }
            Action::DeleteResource { vmid } => {
                self.resources.remove(&sid(*vmid));
            }
            Action::CreateRule { id, vmids } | Action::UpdateRule { id, vmids } => {
                let list: Vec<String> = vmids.iter().map(|v| sid(*v)).collect();
                self.rules.insert(id.clone(), list.join(","));
            }
            Action::DeleteRule { id } => {
                self.rules.remove(id);
            }
        }
    }

    /// `{resources: {sid: state}, rules: {id: "vm:…"}, groups: {id: {nodes, resources}}}`.
    fn to_json(&self) -> Value {
        let resources: BTreeMap<&String, &Option<String>> =
            self.resources.iter().map(|(s, (st, _))| (s, st)).collect();
        let groups: BTreeMap<&String, Value> = self
            .groups
            .iter()
            .map(|(id, nodes)| {
                let members: Vec<&str> = self
                    .resources
                    .iter()
                    .filter(|(_, (_, g))| g.as_ref() == Some(id))
                    .map(|(s, _)| s.as_str())
                    .collect();
                (id, json!({"nodes": nodes, "resources": members.join(",")}))
            })
            .collect();
        json!({"resources": resources, "rules": self.rules, "groups": groups})
    }
}

/// The before state of what the module owns, for diff mode.
pub fn owned_state(obs: &Observed, marker: &str) -> Value {
    Owned::observed(obs, marker).to_json()
}

/// `owned_state` after `plan` ran (check mode's prediction, and diff mode's `after`).
pub fn predicted_state(obs: &Observed, want: &Desired, plan: &Plan) -> Value {
    let mut owned = Owned::observed(obs, &want.marker);
    for a in &plan.actions {
        owned.apply(want, a);
    }
    owned.to_json()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vms(n: &[(u32, &str)]) -> Vec<ClusterVm> {
        n.iter()
            .enumerate()
            .map(|(i, (v, name))| ClusterVm {
                vmid: *v,
                name: Some(name.to_string()),
                node: Some(format!("pve{}", i % 3 + 1)),
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
            group_prefix: "proxshift-c1-".into(),
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
            groups: None,
            nodes: ["pve1", "pve2", "pve3"].map(String::from).into(),
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
            node: Some("pve3".into()),
        });
        let p = plan(&obs, &want(true, &["m0", "m1", "m2"])).unwrap();
        assert_eq!(
            p.actions,
            [
                Action::CreateResource {
                    vmid: 206,
                    group: None
                },
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
            node: Some("pve1".into()),
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
        assert!(!p.actions.contains(&Action::CreateResource {
            vmid: 201,
            group: None
        }));
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("vm:201 is an HA resource")),
            "{:?}",
            p.warnings
        );
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
        obs.nodes.remove("pve3");
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
        let e = plan(&compact(), &want(true, &["nope"])).unwrap_err();
        assert_eq!(e, PlanError::UnknownControlPlane(vec!["nope".into()]));
    }

    /// A PVE 8 compact cluster with two workers on `nodes` Proxmox nodes (VMs on pve1, pve2,
    /// pve3, pve1, pve2).
    fn pve8(nodes: usize) -> Observed {
        let mut obs = compact();
        obs.rules = None;
        obs.groups = Some(vec![]);
        obs.nodes = (1..=nodes).map(|n| format!("pve{n}")).collect();
        obs
    }

    /// What Proxmox has once `p` is carried out (creations and deletions only).
    fn converge(obs: &Observed, p: &Plan) -> Observed {
        let mut obs = obs.clone();
        let m = marker("c1");
        for a in &p.actions {
            match a {
                Action::CreateGroup { id, nodes } => {
                    obs.groups.get_or_insert_with(Vec::new).push(HaGroup {
                        group: id.clone(),
                        nodes: ha_node_list(nodes),
                        restricted: false,
                        nofailback: false,
                        comment: Some(m.clone()),
                    })
                }
                Action::CreateResource { vmid, group } => {
                    let mut r = res(*vmid, Some(&m));
                    r.group = group.clone();
                    obs.resources.push(r);
                }
                other => panic!("converge handles creations only: {other:?}"),
            }
        }
        obs
    }

    fn prio(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(n, p)| (n.to_string(), *p)).collect()
    }

    #[test]
    fn pve8_gives_each_vm_a_group_preferring_a_node_of_its_own() {
        let obs = pve8(4);
        let w = want(true, &["m0", "m1", "m2"]);
        let p = plan(&obs, &w).unwrap();
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        // The control plane's homes are where it runs, pve4 its spare; the workers' spares
        // are pve3 and pve4.
        assert_eq!(
            p.actions[0],
            Action::CreateGroup {
                id: "proxshift-c1-201".into(),
                nodes: prio(&[("pve1", 2), ("pve4", 1)])
            }
        );
        assert!(p.actions.contains(&Action::CreateGroup {
            id: "proxshift-c1-205".into(),
            nodes: prio(&[("pve2", 2), ("pve3", 1), ("pve4", 1)])
        }));
        assert_eq!(
            p.actions[5],
            Action::CreateResource {
                vmid: 201,
                group: Some("proxshift-c1-201".into())
            }
        );
        assert_eq!(p.actions.len(), 10, "no rules on PVE 8: {:?}", p.actions);
        let after = predicted_state(&obs, &w, &p);
        assert_eq!(after["groups"]["proxshift-c1-203"]["resources"], "vm:203");
        assert_eq!(
            after["groups"]["proxshift-c1-203"]["nodes"],
            "pve3:2,pve4:1"
        );

        // Converged; then HA recovered 201 onto pve4: it keeps pve1 as its home.
        let mut obs = converge(&obs, &p);
        assert_eq!(plan(&obs, &w).unwrap(), Plan::default());
        obs.vms[0].node = Some("pve4".into());
        assert_eq!(plan(&obs, &w).unwrap(), Plan::default());

        // w1 scaled in: one worker is not a set, so w0 leaves its group, then both groups go.
        obs.vms.pop();
        let p = plan(&obs, &w).unwrap();
        assert_eq!(
            p.actions,
            [
                Action::UpdateResource {
                    vmid: 204,
                    group: Binding::Unbind
                },
                Action::DeleteResource { vmid: 205 },
                Action::DeleteGroup {
                    id: "proxshift-c1-204".into()
                },
                Action::DeleteGroup {
                    id: "proxshift-c1-205".into()
                },
            ]
        );
        // Absent: the resources, then the groups.
        let p = plan(&obs, &want(false, &[])).unwrap();
        let kinds: Vec<bool> = p
            .actions
            .iter()
            .map(|a| matches!(a, Action::DeleteGroup { .. }))
            .collect();
        assert_eq!(
            kinds,
            [false, false, false, false, false, true, true, true, true, true]
        );
    }

    #[test]
    fn pve8_without_a_spare_node_or_with_a_shared_node_warns() {
        let mut obs = pve8(3);
        let mut w = want(true, &["m0", "m1", "m2"]);
        w.spread_workers = false;
        let p = plan(&obs, &w).unwrap();
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(p.warnings[0].contains("no spare node"), "{:?}", p.warnings);
        // m1 shares pve1 with m0: its group prefers the free pve2 and HA will move it there.
        obs.vms[1].node = Some("pve1".into());
        let p = plan(&obs, &w).unwrap();
        assert!(p.actions.contains(&Action::CreateGroup {
            id: "proxshift-c1-202".into(),
            nodes: prio(&[("pve2", 2)])
        }));
        assert!(
            p.warnings[0].contains("migrate vm:202 from pve1 to pve2"),
            "{:?}",
            p.warnings
        );
        // A group of the same name that proxshift did not create is never taken over.
        obs.groups = Some(vec![HaGroup {
            group: "proxshift-c1-201".into(),
            nodes: "pve1".into(),
            restricted: false,
            nofailback: false,
            comment: None,
        }]);
        let e = plan(&obs, &w).unwrap_err();
        assert!(matches!(e, PlanError::ForeignGroup(id, _) if id == "proxshift-c1-201"));
    }
}
