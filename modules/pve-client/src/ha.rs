//! Proxmox HA (`/cluster/ha/*`): resources, rules (PVE ≥ 9), groups (PVE 8) and the CRM's
//! status. Every call is synchronous on the server (no task), so these are plain requests.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use crate::api::{lenient_bool, path_segment};
use crate::{Client, Error, Params};

/// An HA resource id's VM, `vm:101` (or a bare `101`) → `101`; `ct:` ids and others → `None`.
pub fn ha_sid_vmid(sid: &str) -> Option<u32> {
    sid.strip_prefix("vm:").unwrap_or(sid).parse().ok()
}

/// One entry of `GET /cluster/ha/resources` (or `GET /cluster/ha/resources/{sid}`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct HaResource {
    pub sid: String,
    /// The requested state (`started`, `stopped`, `disabled`, `ignored`).
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub group: Option<String>,
}

impl HaResource {
    pub fn vmid(&self) -> Option<u32> {
        self.sid.strip_prefix("vm:").and_then(|v| v.parse().ok())
    }
}

/// One entry of `GET /cluster/ha/rules` (PVE ≥ 9).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HaRule {
    pub rule: String,
    /// `node-affinity` or `resource-affinity`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `vm:101,vm:102`.
    #[serde(default)]
    pub resources: String,
    /// `positive` / `negative` (resource-affinity).
    #[serde(default)]
    pub affinity: Option<String>,
    /// `pve1:2,pve2` (node-affinity).
    #[serde(default)]
    pub nodes: Option<String>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub strict: bool,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub disable: bool,
    #[serde(default)]
    pub comment: Option<String>,
    /// Feasibility problems PVE found with the rule (option → text), if any.
    #[serde(default)]
    pub errors: Option<Value>,
}

impl HaRule {
    /// The VMs the rule names (`vm:` ids only).
    pub fn vmids(&self) -> BTreeSet<u32> {
        self.resources
            .split([',', ';', ' '])
            .filter(|s| s.starts_with("vm:"))
            .filter_map(ha_sid_vmid)
            .collect()
    }
}

/// One entry of `GET /cluster/ha/groups` (PVE 8).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HaGroup {
    pub group: String,
    #[serde(default)]
    pub nodes: String,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub restricted: bool,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub nofailback: bool,
    #[serde(default)]
    pub comment: Option<String>,
}

impl HaGroup {
    /// The group's nodes and their priorities (`pve1:2,pve2` → pve1: 2, pve2: 0); an entry that
    /// does not parse is left out.
    pub fn node_priorities(&self) -> BTreeMap<String, i64> {
        self.nodes
            .split([',', ';', ' '])
            .filter(|e| !e.is_empty())
            .filter_map(|e| match e.split_once(':') {
                Some((n, p)) => p.parse().ok().map(|p| (n.to_string(), p)),
                None => Some((e.to_string(), 0)),
            })
            .collect()
    }
}

/// `node:priority` pairs as a group's `nodes` option (`pve1:2,pve3:1`), priority 0 left bare.
pub fn ha_node_list(nodes: &BTreeMap<String, i64>) -> String {
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

/// A `service` entry of `GET /cluster/ha/status/current`: where the CRM has it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HaService {
    pub sid: String,
    #[serde(default)]
    pub node: Option<String>,
    /// `started`, `fence`, `recovery`, `error`, …
    #[serde(default)]
    pub state: Option<String>,
}

/// `base` followed by `extra`.
fn joined(mut base: Params, extra: &Params) -> Params {
    base.0.extend(extra.0.iter().cloned());
    base
}

impl Client {
    pub fn ha_resources(&self) -> Result<Vec<HaResource>, Error> {
        self.get_as("/cluster/ha/resources", &Params::new())
    }

    /// `POST /cluster/ha/resources` with `sid` and the given options (`state`, `comment`, …).
    pub fn ha_resource_create(&self, sid: &str, options: &Params) -> Result<(), Error> {
        let p = joined(Params::new().set("sid", sid), options);
        self.post("/cluster/ha/resources", &p).map(|_| ())
    }

    /// `PUT /cluster/ha/resources/{sid}`.
    pub fn ha_resource_update(&self, sid: &str, options: &Params) -> Result<(), Error> {
        let path = format!("/cluster/ha/resources/{}", path_segment(sid));
        self.put(&path, options).map(|_| ())
    }

    /// `DELETE /cluster/ha/resources/{sid}`; `purge` also takes it out of rules (PVE 9).
    pub fn ha_resource_delete(&self, sid: &str, purge: bool) -> Result<(), Error> {
        let path = format!("/cluster/ha/resources/{}", path_segment(sid));
        self.delete(&path, &Params::new().flag("purge", purge))
            .map(|_| ())
    }

    /// `GET /cluster/ha/rules` (PVE ≥ 9 only: PVE 8 has no such route).
    pub fn ha_rules(&self) -> Result<Vec<HaRule>, Error> {
        self.get_as("/cluster/ha/rules", &Params::new())
    }

    /// `POST /cluster/ha/rules` with `rule`, `type` and the options.
    pub fn ha_rule_create(&self, rule: &str, kind: &str, options: &Params) -> Result<(), Error> {
        let p = joined(Params::new().set("rule", rule).set("type", kind), options);
        self.post("/cluster/ha/rules", &p).map(|_| ())
    }

    /// `PUT /cluster/ha/rules/{rule}` (PVE requires the rule's `type`).
    pub fn ha_rule_update(&self, rule: &str, kind: &str, options: &Params) -> Result<(), Error> {
        let p = joined(Params::new().set("type", kind), options);
        let path = format!("/cluster/ha/rules/{}", path_segment(rule));
        self.put(&path, &p).map(|_| ())
    }

    pub fn ha_rule_delete(&self, rule: &str) -> Result<(), Error> {
        let path = format!("/cluster/ha/rules/{}", path_segment(rule));
        self.delete(&path, &Params::new()).map(|_| ())
    }

    /// `GET /cluster/ha/groups` (PVE 8; PVE 9 refuses it once groups are migrated to rules).
    pub fn ha_groups(&self) -> Result<Vec<HaGroup>, Error> {
        self.get_as("/cluster/ha/groups", &Params::new())
    }

    /// `POST /cluster/ha/groups` with `group`, `nodes` and the options.
    pub fn ha_group_create(&self, group: &str, nodes: &str, options: &Params) -> Result<(), Error> {
        let p = joined(
            Params::new().set("group", group).set("nodes", nodes),
            options,
        );
        self.post("/cluster/ha/groups", &p).map(|_| ())
    }

    pub fn ha_group_update(&self, group: &str, options: &Params) -> Result<(), Error> {
        let path = format!("/cluster/ha/groups/{}", path_segment(group));
        self.put(&path, options).map(|_| ())
    }

    pub fn ha_group_delete(&self, group: &str) -> Result<(), Error> {
        let path = format!("/cluster/ha/groups/{}", path_segment(group));
        self.delete(&path, &Params::new()).map(|_| ())
    }

    /// The `service` entries of `GET /cluster/ha/status/current`.
    pub fn ha_services(&self) -> Result<Vec<HaService>, Error> {
        let all: Vec<Value> = self.get_as("/cluster/ha/status/current", &Params::new())?;
        Ok(all
            .into_iter()
            .filter(|e| e.get("type").and_then(Value::as_str) == Some("service"))
            .filter_map(|e| serde_json::from_value(e).ok())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_and_resources_decode_as_pve_sends_them() {
        let r: HaRule = serde_json::from_value(json!({
            "rule": "cp", "type": "resource-affinity", "affinity": "negative",
            "resources": "vm:101,vm:102,ct:200", "disable": 0, "digest": "x", "order": 1
        }))
        .unwrap();
        assert_eq!(r.vmids(), [101, 102].into_iter().collect());
        assert!(!r.disable && !r.strict);
        let res: HaResource =
            serde_json::from_value(json!({"sid": "vm:101", "state": "started", "type": "vm"}))
                .unwrap();
        assert_eq!(res.vmid(), Some(101));
        assert_eq!(ha_sid_vmid("102"), Some(102));
        let g: HaGroup =
            serde_json::from_value(json!({"group": "g", "nodes": "pve1:2", "restricted": 1}))
                .unwrap();
        assert!(g.restricted && !g.nofailback);
        let prio = g.node_priorities();
        assert_eq!(prio, [("pve1".to_string(), 2)].into_iter().collect());
        let mut two = prio.clone();
        two.insert("pve3".into(), 0);
        assert_eq!(ha_node_list(&two), "pve1:2,pve3");
    }
}
