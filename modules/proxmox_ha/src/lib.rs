//! `proxshift.proxmox.proxmox_ha`: opt-in Proxmox HA for a ProxShift cluster. Its VMs (those
//! carrying the cluster's tag, and `owner_tag` when given) become HA resources; on PVE ≥ 9 a negative
//! resource-affinity rule keeps the control-plane VMs on different nodes, a second one the
//! workers; PVE 8, which has no resource affinity, gets one HA group per VM of those sets, each
//! preferring a node of its own ([`groups`]). Scale-out and scale-in are reconciled,
//! `state: absent` removes what it created.
//!
//! [`plan`] decides (pure); this file reads, runs the plan's actions through `pve-client` and
//! reports.

pub mod groups;
pub mod plan;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use pve_client::{connection_options, ha_node_list, Client, ConnectionOptions, Params};
use serde::Deserialize;
use serde_json::{json, Value};

use plan::{Action, Binding, ClusterVm, Desired, Observed};

/// The module's options; `plugins/modules/proxmox_ha.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("cluster").required(),
        Opt::list("tags", Type::Str).default(Value::Array(vec![])),
        Opt::str("owner_tag"),
        Opt::str("cluster_tag_prefix").default("proxshift-"),
        Opt::str("state")
            .default("present")
            .choices(&["present", "absent"]),
        Opt::list("control_plane", Type::Str).default(Value::Array(vec![])),
        Opt::bool("spread_workers").default(true),
        Opt::str("ha_state")
            .default("started")
            .choices(&["started", "stopped", "ignored"]),
        Opt::str("rule_prefix").default("proxshift-"),
    ])
    .with(connection_options())
}

#[derive(Deserialize)]
struct Options {
    cluster: String,
    tags: Vec<String>,
    owner_tag: Option<String>,
    cluster_tag_prefix: String,
    state: String,
    control_plane: Vec<String>,
    spread_workers: bool,
    ha_state: String,
    rule_prefix: String,
    #[serde(flatten)]
    conn: ConnectionOptions,
}

/// Why the module stops.
#[derive(Debug, thiserror::Error)]
enum HaError {
    #[error("rule or group id '{0}' is not a valid Proxmox ID (a letter, then letters, digits, '-' or '_'): change cluster or rule_prefix")]
    RuleId(String),
    #[error("cannot read the cluster's HA state: {0}")]
    Read(#[source] pve_client::Error),
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    #[error("{what} failed: {source}")]
    Apply {
        what: String,
        #[source]
        source: Box<pve_client::Error>,
    },
}

/// PVE's `pve-configid`: a letter, then letters, digits, `-`, `_`.
fn valid_id(id: &str) -> bool {
    let mut c = id.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic())
        && id.len() >= 2
        && c.all(|x| x.is_ascii_alphanumeric() || x == '-' || x == '_')
}

/// The selected VMs and everything HA the plan needs.
fn observe(client: &Client, o: &Options) -> Result<Observed, pve_client::Error> {
    let cluster_tag = format!("{}{}", o.cluster_tag_prefix, o.cluster).to_ascii_lowercase();
    let mut wanted: Vec<String> = o
        .tags
        .iter()
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    // The playbooks give proxmox_vm the cluster tag as its owner tag: that is the default here too.
    if let Some(owner) = o
        .owner_tag
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        wanted.push(owner.to_ascii_lowercase());
    }
    wanted.push(cluster_tag);
    let vms = client
        .cluster_vms()?
        .into_iter()
        .filter(|v| !v.template)
        .filter(|v| {
            let have = v.tag_list();
            wanted
                .iter()
                .all(|t| have.iter().any(|h| h.eq_ignore_ascii_case(t)))
        })
        .map(|v| ClusterVm {
            vmid: v.vmid as u32,
            name: v.name.clone(),
            node: Some(v.node.clone()),
        })
        .collect();
    let version = client.version()?;
    let major = version["version"]
        .as_str()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(9);
    let (rules, groups) = if major >= 9 {
        (Some(client.ha_rules()?), None)
    } else {
        (None, Some(client.ha_groups()?))
    };
    Ok(Observed {
        vms,
        resources: client.ha_resources()?,
        rules,
        groups,
        nodes: client.nodes()?.into_iter().map(|n| n.node).collect(),
    })
}

fn sid(vmid: u32) -> String {
    format!("vm:{vmid}")
}

fn sid_list(vmids: &std::collections::BTreeSet<u32>) -> String {
    vmids.iter().map(|v| sid(*v)).collect::<Vec<_>>().join(",")
}

/// The options of a new HA resource: the wanted state, the ownership comment, its group (PVE 8).
fn resource_create_params(want: &Desired, group: &Option<String>) -> Params {
    let p = Params::new()
        .set("state", &want.ha_state)
        .set("comment", &want.marker);
    match group {
        Some(g) => p.set("group", g),
        None => p,
    }
}

/// The options of an update: the wanted state, and the group binding when it changes.
fn resource_update_params(want: &Desired, group: &Binding) -> Params {
    let p = Params::new().set("state", &want.ha_state);
    match group {
        Binding::Keep => p,
        Binding::Bind(g) => p.set("group", g),
        Binding::Unbind => p.set("delete", "group"),
    }
}

/// Carries out one action.
fn apply(client: &Client, want: &Desired, a: &Action) -> Result<(), HaError> {
    let negative = |vmids| {
        Params::new()
            .set("affinity", "negative")
            .set("resources", sid_list(vmids))
            .set("comment", &want.marker)
            .flag("disable", false)
    };
    // Not restricted (a VM may run anywhere rather than not at all), failing back home.
    let group = |p: Params| p.flag("restricted", false).flag("nofailback", false);
    let r = match a {
        Action::CreateRule { id, vmids } => {
            client.ha_rule_create(id, "resource-affinity", &negative(vmids))
        }
        Action::UpdateRule { id, vmids } => {
            client.ha_rule_update(id, "resource-affinity", &negative(vmids))
        }
        Action::DeleteRule { id } => client.ha_rule_delete(id),
        Action::CreateGroup { id, nodes } => {
            let p = group(Params::new().set("comment", &want.marker));
            client.ha_group_create(id, &ha_node_list(nodes), &p)
        }
        Action::UpdateGroup { id, nodes } => {
            client.ha_group_update(id, &group(Params::new().set("nodes", ha_node_list(nodes))))
        }
        Action::DeleteGroup { id } => client.ha_group_delete(id),
        Action::CreateResource { vmid, group } => {
            client.ha_resource_create(&sid(*vmid), &resource_create_params(want, group))
        }
        Action::UpdateResource { vmid, group } => {
            client.ha_resource_update(&sid(*vmid), &resource_update_params(want, group))
        }
        Action::DeleteResource { vmid } => client.ha_resource_delete(&sid(*vmid), true),
    };
    r.map_err(|source| HaError::Apply {
        what: describe(a),
        source: Box::new(source),
    })
}

/// An action as `msg` and `actions` name it (`add vm:101`, `create group g (pve1:2)`).
fn describe(a: &Action) -> String {
    match a {
        Action::CreateResource { vmid, group: None } => format!("add {}", sid(*vmid)),
        Action::CreateResource {
            vmid,
            group: Some(g),
        } => format!("add {} in group {g}", sid(*vmid)),
        Action::UpdateResource { vmid, group } => match group {
            Binding::Keep => format!("update {}", sid(*vmid)),
            Binding::Bind(g) => format!("update {} (group {g})", sid(*vmid)),
            Binding::Unbind => format!("update {} (no group)", sid(*vmid)),
        },
        Action::DeleteResource { vmid } => format!("remove {}", sid(*vmid)),
        Action::CreateRule { id, vmids } => format!("create rule {id} ({})", sid_list(vmids)),
        Action::UpdateRule { id, vmids } => format!("update rule {id} ({})", sid_list(vmids)),
        Action::DeleteRule { id } => format!("remove rule {id}"),
        Action::CreateGroup { id, nodes } => format!("create group {id} ({})", ha_node_list(nodes)),
        Action::UpdateGroup { id, nodes } => format!("update group {id} ({})", ha_node_list(nodes)),
        Action::DeleteGroup { id } => format!("remove group {id}"),
    }
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let cluster = o.cluster.trim().to_string();
    let want = Desired {
        present: o.state == "present",
        marker: plan::marker(&cluster),
        ha_state: o.ha_state.clone(),
        control_plane: o.control_plane.clone(),
        spread_workers: o.spread_workers,
        control_plane_rule: format!("{}{cluster}-control-plane", o.rule_prefix),
        workers_rule: format!("{}{cluster}-workers", o.rule_prefix),
        group_prefix: format!("{}{cluster}-", o.rule_prefix),
    };
    for id in [
        &want.control_plane_rule,
        &want.workers_rule,
        &want.group_id(100),
    ] {
        if !valid_id(id) {
            return Err(Failure::new(HaError::RuleId(id.clone()).to_string()));
        }
    }
    let client = pve_client::connect_module(m, &o.conn).map_err(|e| Failure::new(e.to_string()))?;
    let obs = observe(&client, &o).map_err(|e| Failure::new(HaError::Read(e).to_string()))?;
    let p = plan::plan(&obs, &want).map_err(|e| Failure::new(HaError::from(e).to_string()))?;
    for w in &p.warnings {
        m.warn(w.clone());
    }
    let before = plan::owned_state(&obs, &want.marker);
    let after = plan::predicted_state(&obs, &want, &p);
    m.add_diff(before, after.clone(), "HA before", "HA after");
    let steps: Vec<String> = p.actions.iter().map(describe).collect();
    if !m.check_mode {
        for (done, a) in p.actions.iter().enumerate() {
            apply(&client, &want, a).map_err(|e| {
                Failure::new(e.to_string())
                    .changed(done > 0)
                    .with("actions", json!(steps[..done]))
            })?;
        }
    }
    let changed = !p.actions.is_empty();
    let msg = match (changed, m.check_mode) {
        (false, _) => format!(
            "HA of cluster {cluster} is as wanted ({} VMs)",
            obs.vms.len()
        ),
        (true, true) => format!("would {}", steps.join(", ")),
        (true, false) => steps.join(", "),
    };
    Ok(Outcome::new(changed)
        .msg(msg)
        .with("actions", json!(steps))
        .with("ha", after))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(&super::argument_spec(), "proxmox", "proxmox_ha");
    }

    #[test]
    fn rule_ids_are_checked() {
        assert!(super::valid_id("proxshift-c1-control-plane"));
        assert!(!super::valid_id("1-bad"));
        assert!(!super::valid_id("a.b"));
    }
}
