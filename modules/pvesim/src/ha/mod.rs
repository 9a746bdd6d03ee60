//! The HA stack (`pve-ha-manager`): resources (`/etc/pve/ha/resources.cfg`), rules
//! (`rules.cfg`, PVE ≥ 9), groups (`groups.cfg`, PVE 8) and what the cluster resource manager
//! (CRM) does when a node fails. Pure checks and placement live here and in `placement`; the
//! stateful part (fencing and recovery over simulated time) is `manager`.

pub mod manager;
pub mod placement;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::Serialize;

/// A VM's HA service id, `vm:<vmid>` (`PVE::HA::Config::parse_sid`; containers are not
/// HA-managed in pvesim).
pub fn sid(vmid: u32) -> String {
    format!("vm:{vmid}")
}

/// Why a resource id or node list is not what the HA stack accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HaParseError {
    /// `PVE::HA::Config::parse_sid`'s refusal.
    #[error("unable to parse service id '{0}'")]
    Sid(String),
    /// `PVE::HA::Tools::pve_verify_ha_node` and the `node[:prio]` syntax.
    #[error("invalid node entry '{0}'")]
    Node(String),
}

/// Parses `vm:101`, `101` (a bare vmid means a VM) as `PVE::HA::Config::parse_sid` does;
/// `ct:` ids are refused since pvesim manages VMs only.
pub fn parse_sid(s: &str) -> Result<u32, HaParseError> {
    let s = s.trim();
    let num = s.strip_prefix("vm:").unwrap_or(s);
    num.parse::<u32>()
        .ok()
        .filter(|n| *n >= 100)
        .ok_or_else(|| HaParseError::Sid(s.to_string()))
}

/// `vm:101,vm:102` (`pve-ha-resource-id-list`) as a set of vmids.
pub fn parse_sid_list(s: &str) -> Result<BTreeSet<u32>, HaParseError> {
    s.split([',', ';', ' '])
        .filter(|p| !p.is_empty())
        .map(parse_sid)
        .collect()
}

/// `pve1:2,pve2` (`pve-ha-node-list`): node → priority (default 0); each entry checked as
/// `PVE::HA::Tools::pve_verify_ha_node` does (a node name, an optional `:<priority>`).
pub fn parse_node_list(s: &str) -> Result<BTreeMap<String, i64>, HaParseError> {
    let mut out = BTreeMap::new();
    for item in s.split([',', ';', ' ']).filter(|p| !p.is_empty()) {
        let bad = || HaParseError::Node(item.to_string());
        let (node, prio) = match item.split_once(':') {
            Some((n, p)) => (n, p.parse::<i64>().map_err(|_| bad())?),
            None => (item, 0),
        };
        let ok = !node.is_empty()
            && node.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !node.starts_with('-')
            && !node.ends_with('-');
        if !ok {
            return Err(bad());
        }
        out.insert(node.to_string(), prio);
    }
    Ok(out)
}

/// Renders a node list back (`pve1:2,pve2`), as the API returns it.
pub fn print_node_list(nodes: &BTreeMap<String, i64>) -> String {
    nodes
        .iter()
        .map(|(n, p)| {
            if *p == 0 {
                n.clone()
            } else {
                format!("{n}:{p}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Renders vmids as `vm:101,vm:102`.
pub fn print_sid_list(vmids: &BTreeSet<u32>) -> String {
    vmids.iter().map(|v| sid(*v)).collect::<Vec<_>>().join(",")
}

/// The state a resource is requested to be in (`resources.cfg` `state`); `enabled` is an alias
/// of `started` (`PVE::HA::Resources` `ha-state` schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Requested {
    Started,
    Stopped,
    Disabled,
    Ignored,
}

impl Requested {
    pub fn parse(s: &str) -> Option<Requested> {
        match s {
            "started" | "enabled" => Some(Requested::Started),
            "stopped" => Some(Requested::Stopped),
            "disabled" => Some(Requested::Disabled),
            "ignored" => Some(Requested::Ignored),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Requested::Started => "started",
            Requested::Stopped => "stopped",
            Requested::Disabled => "disabled",
            Requested::Ignored => "ignored",
        }
    }
}

/// Where the CRM has a service (manager status `service_status`): `PVE::HA::Manager` states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceState {
    Started,
    Stopped,
    /// Its node is lost and not fenced yet.
    Fence,
    /// Fenced; waiting for a node it may run on (`next_state_recovery`).
    Recovery,
    Error,
    Ignored,
}

impl ServiceState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Started => "started",
            ServiceState::Stopped => "stopped",
            ServiceState::Fence => "fence",
            ServiceState::Recovery => "recovery",
            ServiceState::Error => "error",
            ServiceState::Ignored => "ignored",
        }
    }
}

/// One HA resource (`vm:<vmid>`).
#[derive(Debug, Clone, PartialEq)]
pub struct HaResource {
    pub state: Requested,
    pub comment: Option<String>,
    /// PVE 8 only: the HA group it is bound to.
    pub group: Option<String>,
    pub max_restart: Option<u64>,
    pub max_relocate: Option<u64>,
    pub failback: Option<bool>,
    /// What the CRM reports for it.
    pub service: ServiceState,
}

impl HaResource {
    pub fn new(state: Requested) -> HaResource {
        HaResource {
            state,
            comment: None,
            group: None,
            max_restart: None,
            max_relocate: None,
            failback: None,
            service: match state {
                Requested::Started => ServiceState::Started,
                Requested::Ignored => ServiceState::Ignored,
                _ => ServiceState::Stopped,
            },
        }
    }
}

/// A rule's kind and its own options (`PVE::HA::Rules::NodeAffinity`, `::ResourceAffinity`).
#[derive(Debug, Clone, PartialEq)]
pub enum RuleKind {
    NodeAffinity {
        nodes: BTreeMap<String, i64>,
        strict: bool,
    },
    ResourceAffinity {
        positive: bool,
    },
}

impl RuleKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            RuleKind::NodeAffinity { .. } => "node-affinity",
            RuleKind::ResourceAffinity { .. } => "resource-affinity",
        }
    }
}

/// One HA rule (PVE ≥ 9).
#[derive(Debug, Clone, PartialEq)]
pub struct HaRule {
    pub kind: RuleKind,
    pub resources: BTreeSet<u32>,
    pub comment: Option<String>,
    pub disable: bool,
    /// Creation order (`PVE::HA::Rules::get_next_ordinal`).
    pub order: u64,
}

/// One HA group (PVE 8).
#[derive(Debug, Clone, PartialEq)]
pub struct HaGroup {
    pub nodes: BTreeMap<String, i64>,
    pub restricted: bool,
    pub nofailback: bool,
    pub comment: Option<String>,
}

/// The HA configuration and the CRM's view of it.
#[derive(Debug, Clone, Default)]
pub struct HaState {
    pub resources: BTreeMap<u32, HaResource>,
    pub rules: BTreeMap<String, HaRule>,
    pub groups: BTreeMap<String, HaGroup>,
    /// Offline nodes the CRM noticed, and when they count as fenced.
    pub fencing: BTreeMap<String, Instant>,
    /// Nodes fenced since they went offline (their services were recovered or are waiting).
    pub fenced: BTreeSet<String>,
    /// Bumped on every config write; part of the `digest`.
    pub generation: u64,
}

/// A rule that `PVE::HA::Rules::check_feasibility` refuses: rule id → option → messages.
pub type RuleErrors = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The resource-affinity checks of `PVE::HA::Rules::ResourceAffinity` over the enabled rules:
/// fewer than two resources (`check_resource_affinity_resources_count`), a negative rule with
/// more resources than the cluster has nodes (`check_negative_resource_affinity_resources_count`),
/// and a positive and a negative rule sharing two or more resources
/// (`check_inter_resource_affinity_rules_consistency`).
pub fn check_feasibility(rules: &BTreeMap<String, HaRule>, node_count: usize) -> RuleErrors {
    let mut errors = RuleErrors::new();
    let mut push = |id: &str, msg: &str| {
        errors
            .entry(id.to_string())
            .or_default()
            .entry("resources".into())
            .or_default()
            .push(msg.to_string());
    };
    let affinity: Vec<(&String, &HaRule, bool)> = rules
        .iter()
        .filter(|(_, r)| !r.disable)
        .filter_map(|(id, r)| match r.kind {
            RuleKind::ResourceAffinity { positive } => Some((id, r, positive)),
            RuleKind::NodeAffinity { .. } => None,
        })
        .collect();
    for (id, r, positive) in &affinity {
        if r.resources.len() < 2 {
            push(
                id,
                "rule is ineffective as there are less than two resources",
            );
        }
        if !positive && r.resources.len() > node_count {
            push(id, "rule defines more resources than available nodes");
        }
    }
    for (pid, p, _) in affinity.iter().filter(|(_, _, pos)| *pos) {
        for (nid, n, _) in affinity.iter().filter(|(_, _, pos)| !*pos) {
            if p.resources.intersection(&n.resources).count() >= 2 {
                push(
                    pid,
                    "rule shares two or more resources with a negative resource affinity rule",
                );
                push(
                    nid,
                    "rule shares two or more resources with a positive resource affinity rule",
                );
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(positive: bool, res: &[u32]) -> HaRule {
        HaRule {
            kind: RuleKind::ResourceAffinity { positive },
            resources: res.iter().copied().collect(),
            comment: None,
            disable: false,
            order: 0,
        }
    }

    #[test]
    fn parses_ids_and_node_lists() {
        assert_eq!(parse_sid("vm:101"), Ok(101));
        assert_eq!(parse_sid("102"), Ok(102));
        assert!(parse_sid("ct:101").is_err());
        assert!(parse_sid("vm:99").is_err());
        assert_eq!(
            parse_sid_list("vm:101,vm:102").unwrap(),
            [101, 102].into_iter().collect()
        );
        let n = parse_node_list("pve1:2,pve2").unwrap();
        assert_eq!(n["pve1"], 2);
        assert_eq!(print_node_list(&n), "pve1:2,pve2");
        assert!(parse_node_list("pve1:x").is_err());
        assert!(parse_node_list("-bad").is_err());
    }

    #[test]
    fn feasibility_follows_resource_affinity_checks() {
        let mut rules = BTreeMap::new();
        rules.insert("apart".to_string(), rule(false, &[101, 102, 103]));
        rules.insert("together".to_string(), rule(true, &[101, 102]));
        rules.insert("alone".to_string(), rule(true, &[104]));
        let e = check_feasibility(&rules, 2);
        assert_eq!(e["alone"]["resources"].len(), 1);
        assert_eq!(e["apart"]["resources"].len(), 2, "{e:?}");
        assert_eq!(e["together"]["resources"].len(), 1);
        rules.get_mut("apart").unwrap().disable = true;
        let e = check_feasibility(&rules, 3);
        assert!(!e.contains_key("apart") && !e.contains_key("together"));
    }
}
