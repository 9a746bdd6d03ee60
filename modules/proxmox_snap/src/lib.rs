//! `proxshift.proxmox.proxmox_snap`: take, remove and roll back Proxmox VE snapshots of one VM
//! (`vmid`/`hostname`) or of every owned VM of a cluster (`tags`), with retention of the snapshots
//! this module made. Option names follow community.proxmox's `proxmox_snap`.
//!
//! The pieces: [`options`] (typed options, the snapshot name grammar), [`plan`] (pure: per-VM steps,
//! retention, refusals before any write, the diff), [`run`] (the reads and writes over
//! `pve-client`, each a task waited for), [`report`] (pure: per-VM entries and `msg`). The VMs are
//! selected by `vm_lifecycle`'s rules (`target::resolve`), and only VMs carrying `owner_tag` are
//! ever written to.

pub mod options;
pub mod plan;
pub mod report;
pub mod run;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use pve_client::{connection_options, Client, ConnectionOptions};
use serde::Deserialize;
use serde_json::{json, Value};
use vm_lifecycle::target::{self, Selector};

use options::{Options, Settings, State};
use plan::{Refusal, Refusals, VmPlan};
use report::{Fate, VmResult};

/// The module's options; the documentation stub `plugins/modules/proxmox_snap.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::int("vmid"),
        Opt::str("hostname").aliases(&["name"]),
        Opt::list("tags", Type::Str),
        Opt::str("owner_tag").default("proxshift"),
        Opt::str("state")
            .default("present")
            .choices(&["present", "absent", "rollback"]),
        Opt::str("snapname").required(),
        Opt::str("description"),
        Opt::bool("vmstate").default(false),
        Opt::int("retention").default(0),
        Opt::str("retention_prefix"),
        Opt::bool("force").default(false),
        Opt::int("timeout").default(300),
    ])
    .with(connection_options())
    .mutually_exclusive(&["vmid", "tags"])
    .mutually_exclusive(&["hostname", "tags"])
    .required_one_of(&["vmid", "hostname", "tags"])
}

#[derive(Deserialize)]
struct Args {
    #[serde(flatten)]
    options: Options,
    #[serde(flatten)]
    conn: ConnectionOptions,
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let args: Args = m.options()?;
    let (selector, s) = args
        .options
        .settle()
        .map_err(|e| Failure::new(e.to_string()))?;
    let client =
        pve_client::connect_module(m, &args.conn).map_err(|e| Failure::new(e.to_string()))?;
    let Some(plans) = plans(m, &client, &selector, &s)? else {
        return Ok(Outcome::new(false)
            .msg("no owned VM carries the tags; nothing to remove")
            .with("snapname", s.snapname.clone())
            .with("vms", Value::Array(vec![])));
    };
    let results = if m.check_mode {
        plans
            .into_iter()
            .map(|p| VmResult {
                after: p.after.clone(),
                plan: p,
                fate: Fate::Predicted,
            })
            .collect()
    } else {
        apply_all(m, &client, plans, &s)
    };
    finish(m, &results, &s)
}

/// Select, read and plan; `None` when `state=absent` finds no VM (nothing to do).
fn plans(
    m: &mut Module,
    client: &Client,
    selector: &Selector,
    s: &Settings,
) -> Result<Option<Vec<VmPlan>>, Failure> {
    let inventory = run::inventory(client).map_err(|e| Failure::new(e.to_string()))?;
    let selected =
        target::resolve(&inventory, selector).map_err(|e| Failure::new(e.to_string()))?;
    let by_tags = matches!(selector, Selector::Tags(_));
    let (mine, others) =
        plan::owned(selected, by_tags, &s.owner_tag).map_err(|e| Failure::new(e.to_string()))?;
    if !others.is_empty() {
        let l: Vec<String> = others.iter().map(|v| v.label()).collect();
        m.warn(format!(
            "left alone, without the owner tag '{}': {}",
            s.owner_tag,
            l.join(", ")
        ));
    }
    if mine.is_empty() {
        let tags = match selector {
            Selector::Tags(t) => t.join(", "),
            Selector::One { .. } | Selector::List(_) => String::new(),
        };
        if s.state == State::Absent {
            m.warn(format!("no owned VM carries the tags [{tags}]"));
            return Ok(None);
        }
        return Err(Failure::new(
            Refusals(vec![Refusal::NoVms(format!(
                "[{tags}] and '{}'",
                s.owner_tag
            ))])
            .to_string(),
        ));
    }
    let targets = mine
        .iter()
        .map(|vm| run::target(client, vm, s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::new(e.to_string()))?;
    plan::plan(&targets, s)
        .map(Some)
        .map_err(|e| Failure::new(e.to_string()))
}

/// Every VM's steps, in order. A failure stops the task for `present` and `rollback` (no more VMs
/// made part of a set that is not whole); `absent` goes on with the other VMs.
fn apply_all(m: &mut Module, client: &Client, plans: Vec<VmPlan>, s: &Settings) -> Vec<VmResult> {
    let mut stopped = false;
    let mut out = Vec::new();
    for p in plans {
        if stopped {
            out.push(VmResult {
                after: p.before.clone(),
                plan: p,
                fate: Fate::NotReached,
            });
            continue;
        }
        if !p.changes() {
            out.push(VmResult {
                after: p.before.clone(),
                plan: p,
                fate: Fate::Applied(run::Done::default()),
            });
            continue;
        }
        let done = run::apply(client, &p, s);
        stopped = done.error.is_some() && s.state != State::Absent;
        let after = match run::snapshots(client, &p.vm) {
            Ok(l) => l.into_iter().map(|x| x.name).collect(),
            Err(e) => {
                m.warn(format!("{e}; the snapshot list shown is the planned one"));
                p.after.clone()
            }
        };
        out.push(VmResult {
            plan: p,
            fate: Fate::Applied(done),
            after,
        });
    }
    out
}

fn finish(m: &mut Module, results: &[VmResult], s: &Settings) -> Result<Outcome, Failure> {
    let changed = results.iter().any(VmResult::changed);
    if changed {
        let before = results
            .iter()
            .map(|r| (r.plan.vm.label(), json!(r.plan.before)));
        let after = results.iter().map(|r| (r.plan.vm.label(), json!(r.after)));
        m.add_diff(
            Value::Object(before.collect()),
            Value::Object(after.collect()),
            "snapshots before",
            "snapshots after",
        );
    }
    let vms: Vec<Value> = results.iter().map(|r| r.to_json(s)).collect();
    let have: Vec<Value> = results
        .iter()
        .filter(|r| r.has_snapshot(&s.snapname))
        .map(|r| json!(r.plan.vm.vmid))
        .collect();
    if let Some(msg) = report::failure_message(results, s) {
        return Err(Failure::new(msg)
            .changed(changed)
            .with("snapname", s.snapname.clone())
            .with("vms", Value::Array(vms))
            .with("have", Value::Array(have)));
    }
    Ok(Outcome::new(changed)
        .msg(report::message(results, s, m.check_mode))
        .with("snapname", s.snapname.clone())
        .with("vms", Value::Array(vms))
        .with("have", Value::Array(have)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(&super::argument_spec(), "proxmox", "proxmox_snap");
    }
}
