//! Health-driven remediation, Cluster API MachineHealthCheck semantics, as a pure decision: which
//! nodes are unhealthy, what to do with each (reset the VM first, replace the node when a reset did
//! not help) and which guards hold remediation back. No I/O: the module reads the Nodes, the playbook
//! passes the VMs' power states and the earlier resets from the cluster's record.
//!
//! - A node is unhealthy when its `Ready` condition has been `False` or `Unknown` (or missing, with the
//!   Node gone) for at least `unhealthy_timeout`, or at once when its VM is not running.
//! - `max_unhealthy` (a count or a percentage of the nodes, rounded down as CAPI's
//!   `GetScaledValueFromIntOrPercent` does) short-circuits: more unhealthy nodes than that and nothing
//!   is remediated (a network or control-plane outage is not fixed by resetting machines).
//! - First remediation of a node is a VM reset; a node still unhealthy `node_startup_timeout` after its
//!   reset (the time a rebooted host gets to come back, as CAPI gives a new machine `NodeStartupTimeout`)
//!   is replaced (workers only: a control-plane node is never replaced automatically).
//! - Only a reset of the current episode counts: one made after the node's current `Ready` transition, or
//!   one whose reboot made that transition (it came within `node_startup_timeout` of the reset). An older
//!   reset belongs to an earlier failure the node recovered from (CAPI's MachineHealthCheck judges a
//!   machine by its current conditions only: `machinehealthcheck_targets.go` `needsRemediation` reads
//!   each condition's `lastTransitionTime`, and a healthy machine's remediation is forgotten), so a fresh
//!   failure starts again with a reset.
//! - At most one control-plane node per run, and only when the control-plane nodes left healthy keep
//!   etcd's quorum (a majority of the control-plane nodes) while it is reset.
//! - A host still joining is not judged: without a Node (or a Node without a `Ready` condition yet)
//!   within `node_startup_timeout` of its VM's start (or its Node's creation), it is `starting`:
//!   neither remediated nor counted as unhealthy (CAPI `machinehealthcheck_targets.go`
//!   `needsRemediation`: a machine without a node is unhealthy only once `NodeStartupTimeout` has
//!   passed; once it has its node, the node's conditions are judged).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use thiserror::Error;

/// A node's `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Ready {
    True,
    False,
    Unknown,
    /// No Node object or no Ready condition.
    Missing,
}

impl Ready {
    pub fn parse(status: Option<&str>) -> Ready {
        match status {
            Some("True") => Ready::True,
            Some("False") => Ready::False,
            Some(_) => Ready::Unknown,
            None => Ready::Missing,
        }
    }
}

/// What the module and the playbook know about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHealth {
    pub name: String,
    pub control_plane: bool,
    pub ready: Ready,
    /// Seconds since `Ready` last changed (`lastTransitionTime`), when known.
    pub ready_for: Option<u64>,
    /// The VM's power state from Proxmox: `Some(false)` when stopped or paused.
    pub vm_running: Option<bool>,
    /// Seconds since this node's VM was last reset by a remediation run (the record), if it was; whether
    /// that reset belongs to the current episode is `reset_of_episode`'s judgement.
    pub reset_ago: Option<u64>,
    /// Seconds since the Node object was created, when it exists.
    pub node_age: Option<u64>,
    /// Seconds since the VM started (Proxmox's `uptime`), when running.
    pub vm_uptime: Option<u64>,
}

/// `max_unhealthy`: a count, or a percentage of the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnhealthy {
    Count(usize),
    Percent(u8),
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("max_unhealthy must be a count (3) or a percentage (40%), got {0:?}")]
pub struct MaxUnhealthyError(pub String);

impl MaxUnhealthy {
    pub fn parse(s: &str) -> Result<Self, MaxUnhealthyError> {
        let t = s.trim();
        let bad = || MaxUnhealthyError(s.to_string());
        match t.strip_suffix('%') {
            Some(p) => match p.trim().parse::<u8>() {
                Ok(v) if v <= 100 => Ok(Self::Percent(v)),
                _ => Err(bad()),
            },
            None => t.parse::<usize>().map(Self::Count).map_err(|_| bad()),
        }
    }

    /// The number of unhealthy nodes tolerated out of `total` (percentages round down).
    pub fn of(self, total: usize) -> usize {
        match self {
            Self::Count(n) => n,
            Self::Percent(p) => total * usize::from(p) / 100,
        }
    }
}

impl fmt::Display for MaxUnhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Count(n) => write!(f, "{n}"),
            Self::Percent(p) => write!(f, "{p}%"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Reset,
    Replace,
}

/// One node's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub name: String,
    /// Why the node counts as unhealthy.
    pub reason: String,
    /// What to do now; `None` when held back (`held` says why).
    pub action: Option<Action>,
    pub held: Option<String>,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Plan {
    /// Every unhealthy node, in the order given.
    pub unhealthy: Vec<Verdict>,
    /// Nodes not Ready yet, but for less than the timeout (not counted, not touched).
    pub pending: Vec<String>,
    /// Hosts still joining: not Ready within `node_startup_timeout` of their Node's creation (or, no
    /// Node yet, of their VM's start). Not counted, not touched.
    pub starting: Vec<String>,
    /// Set when `max_unhealthy` stopped all remediation.
    pub short_circuit: Option<String>,
}

impl Plan {
    pub fn actions(&self) -> impl Iterator<Item = (&str, Action)> {
        self.unhealthy
            .iter()
            .filter_map(|v| v.action.map(|a| (v.name.as_str(), a)))
    }
}

/// Why `n` is unhealthy, or `Err(true)` when it is not Ready but within the timeout, `Err(false)`
/// when it is healthy.
fn unhealthy_reason(n: &NodeHealth, timeout: u64) -> Result<String, bool> {
    if n.vm_running == Some(false) {
        return Ok("its VM is not running".into());
    }
    if n.ready == Ready::True {
        return Err(false);
    }
    let what = match n.ready {
        Ready::False => "Ready=False",
        Ready::Unknown => "Ready=Unknown",
        _ => "no Ready condition (Node missing)",
    };
    match n.ready_for {
        Some(s) if s < timeout => Err(true),
        Some(s) => Ok(format!("{what} for {s}s (unhealthy_timeout {timeout}s)")),
        // Without a transition time (a missing Node) the timeout cannot be measured: unhealthy now.
        None => Ok(what.to_string()),
    }
}

/// Whether `n` is still joining: no Node with a `Ready` condition yet, its VM running, and less than
/// `startup` seconds since its Node was created (or, without a Node, since its VM started). A Node
/// that reports `Ready` at all is judged by that condition (CAPI: `nodeStartupTimeout` applies until
/// the machine has its node).
fn starting(n: &NodeHealth, startup: u64) -> bool {
    n.ready == Ready::Missing
        && n.vm_running != Some(false)
        && n.node_age.or(n.vm_uptime).is_some_and(|s| s < startup)
}

/// Seconds since the reset of `n`'s current episode, if its VM was reset during it: the reset came after
/// the node's current `Ready` transition, or that transition came within `startup` seconds after the
/// reset (the reboot the reset caused: `False` to `Unknown` while the kubelet is down, `Unknown` to
/// `False` when it is back). Without a transition time (no Node) the reset is taken as current.
fn reset_of_episode(n: &NodeHealth, startup: u64) -> Option<u64> {
    let ago = n.reset_ago?;
    match n.ready_for {
        Some(since) if ago > since && ago - since > startup => None,
        _ => Some(ago),
    }
}

/// The timeouts of a plan: `unhealthy` for a node's `Ready` condition, `startup` for a host to join
/// (and for a reset host to come back).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub unhealthy: u64,
    pub startup: u64,
}

/// The remediation plan for `nodes` under the guards.
pub fn plan(nodes: &[NodeHealth], t: Timeouts, max: MaxUnhealthy) -> Plan {
    let timeout = t.unhealthy;
    let mut out = Plan::default();
    let mut unhealthy: Vec<(&NodeHealth, String)> = Vec::new();
    for n in nodes {
        if starting(n, t.startup) {
            out.starting.push(n.name.clone());
            continue;
        }
        match unhealthy_reason(n, timeout) {
            Ok(r) => unhealthy.push((n, r)),
            Err(true) => out.pending.push(n.name.clone()),
            Err(false) => {}
        }
    }
    let allowed = max.of(nodes.len());
    if unhealthy.len() > allowed {
        out.short_circuit = Some(format!(
            "{} of {} nodes are unhealthy, more than max_unhealthy {max} ({allowed}): no node is remediated",
            unhealthy.len(),
            nodes.len()
        ));
    }
    let masters = nodes.iter().filter(|n| n.control_plane).count();
    let quorum = masters / 2 + 1;
    let healthy_masters = nodes
        .iter()
        .filter(|n| n.control_plane)
        .filter(|n| !unhealthy.iter().any(|(u, _)| u.name == n.name))
        .count();
    let mut master_taken = false;
    for (n, reason) in unhealthy {
        let mut v = Verdict {
            name: n.name.clone(),
            reason,
            action: None,
            held: None,
        };
        let action = match reset_of_episode(n, t.startup) {
            None => Ok(Action::Reset),
            Some(ago) if ago < t.startup => Err(format!(
                "its VM was reset {ago}s ago; waiting node_startup_timeout ({}s) for it to come back before \
                 judging it again",
                t.startup
            )),
            Some(_) if n.control_plane => Err(
                "still unhealthy after a VM reset; a control-plane node is never replaced automatically: \
                 replace it by hand"
                    .to_string(),
            ),
            Some(_) => Ok(Action::Replace),
        };
        v.held = if let Some(s) = &out.short_circuit {
            Some(s.clone())
        } else if let Err(why) = &action {
            Some(why.clone())
        } else if n.control_plane && master_taken {
            Some("another control-plane node is remediated in this run (one at a time)".into())
        } else if n.control_plane && healthy_masters < quorum {
            Some(format!(
                "etcd quorum: {healthy_masters} of {masters} control-plane nodes are healthy, {quorum} are needed; \
                 remediating it could lose the quorum"
            ))
        } else {
            None
        };
        if v.held.is_none() {
            v.action = action.ok();
            master_taken |= n.control_plane;
        }
        out.unhealthy.push(v);
    }
    out
}

pub use kube_client::objects::{parse_time, TimeError};

/// The nodes as `name → seconds since` from the record's `remediations` (`name → epoch of the reset`).
pub fn resets_ago(record: &BTreeMap<String, i64>, now: i64) -> BTreeMap<String, u64> {
    record
        .iter()
        .map(|(k, t)| (k.clone(), now.saturating_sub(*t).max(0) as u64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cp: bool, ready: Ready, for_s: u64) -> NodeHealth {
        NodeHealth {
            name: name.into(),
            control_plane: cp,
            ready,
            ready_for: Some(for_s),
            vm_running: Some(true),
            reset_ago: None,
            node_age: Some(86_400),
            vm_uptime: Some(86_400),
        }
    }

    const T: Timeouts = Timeouts {
        unhealthy: 300,
        startup: 600,
    };

    fn cluster() -> Vec<NodeHealth> {
        let mut v: Vec<NodeHealth> = (0..3)
            .map(|i| node(&format!("m{i}"), true, Ready::True, 9999))
            .collect();
        v.extend((0..3).map(|i| node(&format!("w{i}"), false, Ready::True, 9999)));
        v
    }

    fn by_name<'a>(p: &'a Plan, n: &str) -> &'a Verdict {
        p.unhealthy.iter().find(|v| v.name == n).expect(n)
    }

    #[test]
    fn max_unhealthy_parses_counts_and_percentages() {
        assert_eq!(MaxUnhealthy::parse("2"), Ok(MaxUnhealthy::Count(2)));
        assert_eq!(MaxUnhealthy::parse(" 40% "), Ok(MaxUnhealthy::Percent(40)));
        assert!(MaxUnhealthy::parse("140%").is_err());
        assert!(MaxUnhealthy::parse("-1").is_err());
        assert!(MaxUnhealthy::parse("x").is_err());
        // CAPI rounds the percentage down: 40% of 6 is 2.
        assert_eq!(MaxUnhealthy::Percent(40).of(6), 2);
        assert_eq!(MaxUnhealthy::Percent(100).of(6), 6);
    }

    #[test]
    fn a_node_not_ready_past_the_timeout_is_reset_first() {
        let mut c = cluster();
        c[3].ready = Ready::False;
        c[3].ready_for = Some(301);
        c[4].ready = Ready::Unknown;
        c[4].ready_for = Some(10);
        let p = plan(&c, T, MaxUnhealthy::Percent(40));
        assert_eq!(p.actions().collect::<Vec<_>>(), [("w0", Action::Reset)]);
        assert!(by_name(&p, "w0").reason.contains("Ready=False for 301s"));
        assert_eq!(
            p.pending,
            ["w1"],
            "within the timeout: not counted, not touched"
        );
        assert_eq!(p.short_circuit, None);
    }

    #[test]
    fn a_stopped_vm_is_unhealthy_at_once() {
        let mut c = cluster();
        c[5].vm_running = Some(false);
        let p = plan(&c, T, MaxUnhealthy::Count(1));
        assert_eq!(p.actions().collect::<Vec<_>>(), [("w2", Action::Reset)]);
        assert_eq!(by_name(&p, "w2").reason, "its VM is not running");
    }

    #[test]
    fn still_unhealthy_after_a_reset_means_replace_after_the_timeout() {
        let mut c = cluster();
        for n in &mut c[3..5] {
            n.ready = Ready::False;
            n.ready_for = Some(900);
        }
        c[3].reset_ago = Some(120);
        c[4].reset_ago = Some(600);
        let p = plan(&c, T, MaxUnhealthy::Count(2));
        assert_eq!(p.actions().collect::<Vec<_>>(), [("w1", Action::Replace)]);
        assert!(by_name(&p, "w0")
            .held
            .as_deref()
            .unwrap()
            .contains("reset 120s ago"));
    }

    #[test]
    fn a_reset_node_gets_node_startup_timeout_to_come_back() {
        let mut c = cluster();
        c[3].ready = Ready::Unknown;
        c[3].ready_for = Some(900);
        // Past unhealthy_timeout (300 s) but within node_startup_timeout (600 s) of its reset: not judged yet.
        c[3].reset_ago = Some(400);
        let p = plan(&c, T, MaxUnhealthy::Count(2));
        assert_eq!(p.actions().count(), 0);
        assert!(by_name(&p, "w0")
            .held
            .as_deref()
            .unwrap()
            .contains("reset 400s ago; waiting node_startup_timeout (600s)"));
        c[3].reset_ago = Some(601);
        let p = plan(&c, T, MaxUnhealthy::Count(2));
        assert_eq!(p.actions().collect::<Vec<_>>(), [("w0", Action::Replace)]);
    }

    #[test]
    fn a_reset_of_an_earlier_episode_does_not_count() {
        let mut c = cluster();
        // w0 and m0 were reset two days ago, recovered, and failed again 400 s ago.
        for i in [0, 3] {
            c[i].ready = Ready::False;
            c[i].ready_for = Some(400);
            c[i].reset_ago = Some(2 * 86_400);
        }
        let p = plan(&c, T, MaxUnhealthy::Count(2));
        assert_eq!(
            p.actions().collect::<Vec<_>>(),
            [("m0", Action::Reset), ("w0", Action::Reset)],
            "a fresh failure starts with a reset: no worker destroyed, no control-plane node held forever"
        );
    }

    #[test]
    fn the_reboot_of_a_reset_stays_in_its_episode() {
        let mut c = cluster();
        // Reset 700 s ago; its reboot turned Ready from Unknown to False 50 s after the reset.
        c[3].ready = Ready::False;
        c[3].ready_for = Some(650);
        c[3].reset_ago = Some(700);
        // Reset 200 s ago, Ready=Unknown since before it.
        c[4].ready = Ready::Unknown;
        c[4].ready_for = Some(1000);
        c[4].reset_ago = Some(200);
        let p = plan(&c, T, MaxUnhealthy::Count(2));
        assert_eq!(p.actions().collect::<Vec<_>>(), [("w0", Action::Replace)]);
        assert!(by_name(&p, "w1").held.is_some());
        // The node went NotReady again long after its reset came back (more than node_startup_timeout): a
        // new episode.
        c[3].reset_ago = Some(2000);
        c[3].ready_for = Some(301);
        let p = plan(&c, T, MaxUnhealthy::Count(2));
        assert_eq!(p.actions().collect::<Vec<_>>(), [("w0", Action::Reset)]);
    }

    #[test]
    fn too_many_unhealthy_short_circuits_everything() {
        let mut c = cluster();
        for n in &mut c[3..6] {
            n.ready = Ready::Unknown;
            n.ready_for = Some(1000);
        }
        let p = plan(&c, T, MaxUnhealthy::Percent(40));
        assert_eq!(p.actions().count(), 0);
        assert!(p
            .short_circuit
            .as_deref()
            .unwrap()
            .contains("3 of 6 nodes are unhealthy, more than max_unhealthy 40% (2)"));
        assert!(p.unhealthy.iter().all(|v| v.held.is_some()));
        // Exactly at the limit is allowed (CAPI: remediation stops only above it).
        assert_eq!(plan(&c, T, MaxUnhealthy::Count(3)).actions().count(), 3);
    }

    #[test]
    fn one_control_plane_node_at_a_time_and_only_with_quorum() {
        let mut c = cluster();
        c[0].ready = Ready::False;
        c[0].ready_for = Some(1000);
        let p = plan(&c, T, MaxUnhealthy::Count(6));
        assert_eq!(
            p.actions().collect::<Vec<_>>(),
            [("m0", Action::Reset)],
            "2 of 3 healthy keep the quorum"
        );

        c[1].ready = Ready::False;
        c[1].ready_for = Some(1000);
        let p = plan(&c, T, MaxUnhealthy::Count(6));
        assert_eq!(p.actions().count(), 0);
        for n in ["m0", "m1"] {
            assert!(
                by_name(&p, n)
                    .held
                    .as_deref()
                    .unwrap()
                    .contains("etcd quorum: 1 of 3"),
                "{n}"
            );
        }

        // Five masters, two unhealthy: quorum (3) holds, but only one is remediated per run.
        let mut five: Vec<NodeHealth> = (0..5)
            .map(|i| node(&format!("m{i}"), true, Ready::True, 1))
            .collect();
        for n in &mut five[..2] {
            n.ready = Ready::Unknown;
            n.ready_for = Some(1000);
        }
        let p = plan(&five, T, MaxUnhealthy::Count(5));
        assert_eq!(p.actions().collect::<Vec<_>>(), [("m0", Action::Reset)]);
        assert!(by_name(&p, "m1")
            .held
            .as_deref()
            .unwrap()
            .contains("one at a time"));
    }

    #[test]
    fn a_control_plane_node_is_never_replaced() {
        let mut c = cluster();
        c[2].ready = Ready::False;
        c[2].ready_for = Some(1000);
        c[2].reset_ago = Some(1000);
        let p = plan(&c, T, MaxUnhealthy::Count(6));
        assert_eq!(p.actions().count(), 0);
        assert!(by_name(&p, "m2")
            .held
            .as_deref()
            .unwrap()
            .contains("never replaced automatically"));
    }

    #[test]
    fn joining_hosts_are_neither_judged_nor_counted() {
        let mut c = cluster();
        // Installing: no Node yet, its VM started 2 minutes ago.
        c[3].ready = Ready::Missing;
        c[3].ready_for = None;
        c[3].node_age = None;
        c[3].vm_uptime = Some(120);
        // Registered 5 minutes ago, no Ready condition yet: still joining.
        c[4].ready = Ready::Missing;
        c[4].ready_for = None;
        c[4].node_age = Some(300);
        let p = plan(&c, T, MaxUnhealthy::Count(0));
        assert_eq!(p.starting, ["w0", "w1"]);
        assert_eq!(
            p.unhealthy,
            [],
            "not counted: max_unhealthy 0 does not short-circuit"
        );
        assert_eq!(p.short_circuit, None);

        // Past node_startup_timeout without a Node: unhealthy.
        c[3].vm_uptime = Some(601);
        c[4].node_age = Some(601);
        let p = plan(&c, T, MaxUnhealthy::Count(2));
        assert_eq!(
            p.actions().collect::<Vec<_>>(),
            [("w0", Action::Reset), ("w1", Action::Reset)]
        );
        // A Node that reports Ready=False is judged by that condition (unhealthy_timeout), not as joining.
        c[5].ready = Ready::False;
        c[5].ready_for = Some(30);
        c[5].node_age = Some(30);
        assert_eq!(plan(&c, T, MaxUnhealthy::Count(2)).pending, ["w2"]);
        // A stopped VM is unhealthy at once, joining or not.
        c[3].vm_uptime = Some(10);
        c[3].vm_running = Some(false);
        assert_eq!(plan(&c, T, MaxUnhealthy::Count(2)).unhealthy[0].name, "w0");
    }

    #[test]
    fn healthy_clusters_plan_nothing() {
        let p = plan(&cluster(), T, MaxUnhealthy::Count(0));
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn kubernetes_timestamps() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time("2000-03-01T00:00:00Z"), Ok(951_868_800));
        assert_eq!(parse_time("2026-12-04T12:40:03Z"), Ok(1_796_388_003));
        for bad in [
            "2026-12-04 12:40:03Z",
            "2026-13-04T12:40:03Z",
            "2026-12-04T12:40:03+01:00",
            "",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        let rec = BTreeMap::from([("w0".to_string(), 100)]);
        assert_eq!(resets_ago(&rec, 160)["w0"], 60);
    }
}
