//! `proxshift.proxmox.proxmox_vm`: create, converge and remove Proxmox VE virtual machines for
//! OpenShift nodes — idempotent, with check mode and diff, safe to rerun after any failure.
//!
//! The flow per run: read the cluster once (`/cluster/resources`), plan every VM in order (identity,
//! placement, vmid — sequential, so placement is deterministic), then carry the plans out in
//! parallel (bounded by `parallel`), one result per VM; a failing VM does not hide the others.

mod clone_nodes;
pub mod converge;
mod create;
pub mod error;
pub mod identity;
mod iso;
pub mod iso_remove;
pub mod options;
mod remove;
mod settle;
mod storage;
mod update;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ansible_module::{ArgSpec, Failure, Module, Outcome};
use pve_client::{Client, NodeInfo};
use pve_types::{commit, place, NodeLoad};
use serde_json::{json, Map, Value};

use clone_nodes::CloneNodes;
use converge::{run_one, Ctx, Target, VmResult};
use error::VmError;
use identity::{node_usage, requested_memory, resolve};
use options::{merge_item, shared_defaults, vm_args, Args, Timeouts, VmArgs};

/// A VM's plan, or why it could not be planned (with its options when they parsed).
type Planned = Result<(VmArgs, Target), (Option<VmArgs>, VmError)>;

/// The module's options; the documentation stub `plugins/modules/proxmox_vm.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    options::argument_spec()
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let args: Args = m.options()?;
    let single = args.vms.is_none();
    let items = vm_items(&args, &m.params);
    if items.is_empty() {
        return Ok(Outcome::new(false)
            .msg("no VMs given")
            .with("vms", json!([])));
    }
    let parsed = parse_items(items);
    if single {
        if let Some(Err(e)) = parsed.first() {
            return Err(Failure::new(e.to_string()));
        }
    }

    let client = connect(m, &args)?;
    let timeouts = args.timeouts.unwrap_or_default();
    let guests = settle::settled_snapshot(&client, &parsed, &timeouts)?;
    let ctx = Ctx {
        client: &client,
        root_session: client.is_root_session(),
        check_mode: m.check_mode,
        timeouts,
        snapshot: guests.vms,
        containers: guests.containers,
        reserved: Mutex::new(BTreeSet::new()),
        isos: Mutex::new(HashMap::new()),
    };
    let plans = plan_all(&ctx, parsed);
    let results = execute(&ctx, &plans, args.parallel.max(1) as usize);
    // After the VMs: the agent ISOs of `agent_iso.state: absent`.
    let planned: Vec<&VmArgs> = plans
        .iter()
        .filter_map(|p| p.as_ref().ok())
        .map(|(a, _)| a)
        .collect();
    let iso = iso_remove::remove_isos(&ctx, &planned, &results);

    report_warnings_and_diffs(m, &results, single);
    report_iso(m, &iso);
    let changed = results.iter().any(|r| r.changed) || iso.changed;
    let outcome = if single {
        single_outcome(&results[0], changed)
    } else {
        list_outcome(&results, changed)
    };
    with_iso(outcome, iso)
}

/// The ISO removal's warnings and diff.
fn report_iso(m: &mut Module, iso: &iso_remove::IsoReport) {
    for w in &iso.warnings {
        m.warn(w.clone());
    }
    if iso.changed {
        m.add_diff(
            Value::Object(iso.before.clone()),
            Value::Object(iso.after.clone()),
            "agent_iso before",
            "agent_iso after",
        );
    }
}

/// `iso_removed` on the result; a failed removal fails a run whose VMs all succeeded.
fn with_iso(
    outcome: Result<Outcome, Failure>,
    iso: iso_remove::IsoReport,
) -> Result<Outcome, Failure> {
    let removed = Value::Array(iso.removed);
    let tasks = json!(iso.task_ids);
    match (outcome, iso.error) {
        (Ok(o), None) => Ok(o.with("iso_removed", removed).with("iso_task_ids", tasks)),
        (Ok(o), Some(e)) => {
            let mut f = Failure::new(e.to_string()).changed(o.changed);
            f.data = o.data;
            Err(f.with("iso_removed", removed).with("iso_task_ids", tasks))
        }
        (Err(f), _) => Err(f.with("iso_removed", removed).with("iso_task_ids", tasks)),
    }
}

/// The VM items: each `vms` entry over the top-level options, or the top level itself.
fn vm_items(args: &Args, params: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let defaults = shared_defaults(params);
    match &args.vms {
        Some(list) => list.iter().map(|i| merge_item(&defaults, i)).collect(),
        None => vec![defaults],
    }
}

/// Each item's options, read and checked; two items for one VM are both refused.
fn parse_items(items: Vec<Map<String, Value>>) -> Vec<Result<VmArgs, VmError>> {
    let mut parsed: Vec<Result<VmArgs, VmError>> = items
        .into_iter()
        .map(|i| vm_args(i).and_then(|a| check_args(&a).map(|_| a)))
        .collect();
    refuse_duplicates(&mut parsed);
    parsed
}

/// The keys that name a VM within one run: its name and its vmid.
fn identity_keys(a: &VmArgs) -> impl Iterator<Item = String> {
    [a.spec.name.clone(), a.vmid.map(|v| format!("vmid {v}"))]
        .into_iter()
        .flatten()
}

/// Two items for one VM would fight (or create it twice): refuse them both.
fn refuse_duplicates(parsed: &mut [Result<VmArgs, VmError>]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for a in parsed.iter().flatten() {
        for key in identity_keys(a) {
            *seen.entry(key).or_default() += 1;
        }
    }
    for p in parsed.iter_mut() {
        let dup = match p {
            Ok(a) => identity_keys(a).find(|k| seen.get(k).copied().unwrap_or(0) > 1),
            Err(_) => None,
        };
        if let Some(k) = dup {
            *p = Err(VmError::Refused(format!(
                "'{k}' appears more than once in vms"
            )));
        }
    }
}

/// The API client; its session ticket is masked in the module's output.
fn connect(m: &mut Module, args: &Args) -> Result<Client, Failure> {
    pve_client::connect_module(m, &args.conn)
        .map_err(|e| Failure::new(format!("cannot connect to Proxmox: {e}")))
}

/// A clone source (vmid or name) with its `clone.storage`.
type CloneKey = (Option<u32>, Option<String>, Option<String>);

/// What planning reads once per run and shares between VMs.
#[derive(Default)]
struct PlanState {
    nodes: Option<Vec<NodeInfo>>,
    /// Node loads per owner tag (each cluster spreads its own VMs).
    loads: HashMap<String, Vec<NodeLoad>>,
    /// Where clones may go, per source (vmid or name) and `clone.storage`.
    clones: HashMap<CloneKey, CloneNodes>,
}

impl PlanState {
    fn clone_nodes(&mut self, ctx: &Ctx, cl: &options::CloneArgs) -> Result<CloneNodes, VmError> {
        let key = (cl.vmid, cl.name.clone(), cl.storage.clone());
        if let Some(c) = self.clones.get(&key) {
            return Ok(c.clone());
        }
        let c = CloneNodes::read(ctx, cl)?;
        self.clones.insert(key, c.clone());
        Ok(c)
    }
}

/// Plan in order (identity, node, vmid), so placement is deterministic.
fn plan_all(ctx: &Ctx, parsed: Vec<Result<VmArgs, VmError>>) -> Vec<Planned> {
    let mut state = PlanState::default();
    let mut plans: Vec<Planned> = Vec::new();
    for p in parsed {
        let a = match p {
            Ok(a) => a,
            Err(e) => {
                plans.push(Err((None, e)));
                continue;
            }
        };
        match plan(ctx, &a, &mut state) {
            Ok(t) => plans.push(Ok((a, t))),
            Err(e) => plans.push(Err((Some(a), e))),
        }
    }
    plans
}

/// Every VM's warnings (prefixed with the VM unless there is one) and before/after diff.
fn report_warnings_and_diffs(m: &mut Module, results: &[VmResult], single: bool) {
    for r in results {
        for w in &r.warnings {
            let who = r
                .name
                .clone()
                .or(r.vmid.map(|v| v.to_string()))
                .unwrap_or_default();
            m.warn(if single {
                w.clone()
            } else {
                format!("{who}: {w}")
            });
        }
        if !r.before.is_empty() || !r.after.is_empty() {
            let who = match (&r.name, r.vmid) {
                (Some(n), Some(id)) => format!("{n} ({id})"),
                (Some(n), None) => n.clone(),
                (None, Some(id)) => id.to_string(),
                (None, None) => "VM".into(),
            };
            m.add_diff(
                Value::Object(r.before.clone()),
                Value::Object(r.after.clone()),
                &format!("{who} before"),
                &format!("{who} after"),
            );
        }
    }
}

/// One VM (no `vms`): its result's fields at the top level of the module's result.
fn single_outcome(r: &VmResult, changed: bool) -> Result<Outcome, Failure> {
    let mut data = r.to_json();
    data.remove("changed");
    data.remove("failed");
    let msg = data
        .remove("msg")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    if r.failed {
        let mut f = Failure::new(msg).changed(changed);
        for (k, v) in data {
            f = f.with(&k, v);
        }
        return Err(f);
    }
    let mut o = Outcome::new(changed).msg(msg);
    for (k, v) in data {
        o = o.with(&k, v);
    }
    Ok(o)
}

/// A `vms` list: one result per VM and a summary; failed when any VM failed.
fn list_outcome(results: &[VmResult], changed: bool) -> Result<Outcome, Failure> {
    let list: Vec<Value> = results.iter().map(|r| Value::Object(r.to_json())).collect();
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.failed)
        .map(|r| {
            let who = r
                .name
                .clone()
                .or(r.vmid.map(|v| v.to_string()))
                .unwrap_or("?".into());
            format!("{who}: {}", r.msg)
        })
        .collect();
    let summary = json!({
        "total": results.len(),
        "changed": results.iter().filter(|r| r.changed).count(),
        "failed": failed.len(),
    });
    if !failed.is_empty() {
        return Err(Failure::new(format!(
            "{} of {} VMs failed: {}",
            failed.len(),
            results.len(),
            failed.join("; ")
        ))
        .changed(changed)
        .with("vms", Value::Array(list))
        .with("summary", summary));
    }
    Ok(Outcome::new(changed)
        .msg(format!(
            "{} VMs, {} changed",
            results.len(),
            summary["changed"]
        ))
        .with("vms", Value::Array(list))
        .with("summary", summary))
}

/// Option checks that need no API (public for the fuzz targets under `fuzz/`).
/// (`vmid_range` is checked when the options are read, by [`options::vm_args`].)
pub fn check_args(a: &VmArgs) -> Result<(), VmError> {
    let who = a.who();
    if a.spec.name.is_none() && a.vmid.is_none() {
        return Err(VmError::refused("each VM needs a name or a vmid"));
    }
    if let Some(id) = a.vmid {
        if !(100..=999_999_999).contains(&id) {
            return Err(VmError::Refused(format!(
                "{who}: vmid {id} is outside 100-999999999"
            )));
        }
    }
    if let Some(iso) = a.agent_iso.as_ref().filter(|i| i.absent()) {
        if a.state == "present" {
            return Err(VmError::Refused(format!(
                "{who}: agent_iso.state absent deletes the ISO once the run's VMs are gone; \
                 the VM's own state must be absent too"
            )));
        }
        iso_remove::removal_volid(iso)?;
    }
    if a.state == "present" {
        let errs = a.spec.validate();
        if !errs.is_empty() {
            return Err(VmError::Refused(format!("{who}: {}", errs.join("; "))));
        }
        if a.owner_tag.is_empty() || !pve_types::propstring::valid_tag(&a.owner_tag) {
            return Err(VmError::Refused(format!(
                "{who}: owner_tag '{}' is not a valid Proxmox tag",
                a.owner_tag
            )));
        }
    }
    Ok(())
}

/// A VMID held by an LXC container: refused whatever the state asked for, so a container is
/// never changed, stopped or removed by this module.
fn container_vmid(ct: &pve_client::ClusterVm) -> VmError {
    VmError::Refused(format!(
        "vmid {} is the LXC container '{}' on node '{}', not a QEMU VM: proxmox_vm manages QEMU VMs \
         only and leaves containers alone; choose another vmid",
        ct.vmid,
        ct.name.as_deref().unwrap_or(""),
        ct.node
    ))
}

fn plan(ctx: &Ctx, a: &VmArgs, state: &mut PlanState) -> Result<Target, VmError> {
    if let Some(ct) = a
        .vmid
        .and_then(|id| ctx.containers.iter().find(|c| c.vmid == id as u64))
    {
        return Err(container_vmid(ct));
    }
    let found = resolve(&ctx.snapshot, a.vmid, a.spec.name.as_deref())?;
    if let Some(vm) = found {
        if let (Some(want), Some(n)) = (&a.node, Some(&vm.node)) {
            if want != n && a.state == "present" {
                return Err(VmError::Refused(format!(
                    "VM {} is on node '{n}', not '{want}'; proxmox_vm does not migrate VMs",
                    vm.vmid
                )));
            }
        }
        return Ok(Target::Existing(vm));
    }
    if a.state == "absent" {
        return Ok(Target::Missing);
    }
    // Before any placement: a clone may be bound to its source's node.
    let clone_nodes = match &a.clone {
        Some(cl) => Some(state.clone_nodes(ctx, cl)?),
        None => None,
    };
    if state.nodes.is_none() {
        state.nodes = Some(
            ctx.client
                .nodes()
                .map_err(|e| VmError::step("cannot list the cluster's nodes", e))?,
        );
    }
    let nodes = state.nodes.as_ref().expect("just set");
    let load = state.loads.entry(a.owner_tag.clone()).or_insert_with(|| {
        let usage = node_usage(&ctx.snapshot, &a.owner_tag);
        nodes
            .iter()
            .map(|n| {
                let (committed, count) = usage.get(&n.node).copied().unwrap_or_default();
                NodeLoad {
                    node: n.node.clone(),
                    online: n.online(),
                    total_memory: n.maxmem,
                    committed_memory: committed,
                    cluster_vms: count,
                }
            })
            .collect()
    });
    let mem = requested_memory(a, &ctx.snapshot);
    let mut warnings = Vec::new();
    let node = match &a.node {
        Some(n) => {
            check_fixed_node(a, load, n, mem, &mut warnings)?;
            if let Some(cn) = &clone_nodes {
                cn.check(n)?;
            }
            n.clone()
        }
        None => choose_node(a, load, mem, clone_nodes.as_ref(), &mut warnings)?,
    };
    commit(load, &node, mem);
    let vmid = match (a.vmid, &a.vmid_range) {
        (Some(id), _) => Some(id),
        (None, Some(_)) => Some(create::next_vmid(ctx, a)?),
        (None, None) => None,
    };
    Ok(Target::New {
        node,
        vmid,
        warnings,
    })
}

/// The node the options name: in the cluster, online, with room (or `allow_overcommit`).
fn check_fixed_node(
    a: &VmArgs,
    load: &[NodeLoad],
    n: &str,
    mem: u64,
    warnings: &mut Vec<String>,
) -> Result<(), VmError> {
    let l = load.iter().find(|l| l.node == n).ok_or_else(|| {
        VmError::Refused(format!(
            "node '{n}' is not in the cluster (nodes: {})",
            load.iter()
                .map(|l| l.node.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    if !l.online {
        return Err(VmError::Refused(format!("node '{n}' is offline")));
    }
    if let Some(room) = l.reservable(a.memory_adjustment) {
        if mem > room {
            let msg = format!(
                "node '{n}' has {:.1} GiB of reservable memory left (memory_adjustment {}%), the VM needs {:.1} GiB",
                room as f64 / (1u64 << 30) as f64,
                a.memory_adjustment,
                mem as f64 / (1u64 << 30) as f64
            );
            if !a.allow_overcommit {
                return Err(VmError::Refused(format!(
                    "{msg}; set allow_overcommit: true or raise memory_adjustment"
                )));
            }
            warnings.push(format!("{msg} (allowed by allow_overcommit)"));
        }
    }
    Ok(())
}

/// Placement by memory over `allowed_nodes`, narrowed to the clone source's node when the clone
/// cannot go anywhere else.
fn choose_node(
    a: &VmArgs,
    load: &[NodeLoad],
    mem: u64,
    clone_nodes: Option<&CloneNodes>,
    warnings: &mut Vec<String>,
) -> Result<String, VmError> {
    let mut allowed = a.allowed_nodes.clone().unwrap_or_default();
    let restricted = match clone_nodes {
        Some(cn) => cn.restrict(&allowed)?.map(|only| (cn, only)),
        None => None,
    };
    if let Some((_, only)) = &restricted {
        allowed = only.clone();
    }
    let explain = |e: pve_types::PlacementError| match &restricted {
        Some((cn, _)) => cn.explain(e),
        None => e.into(),
    };
    match place(load, &allowed, mem, a.memory_adjustment) {
        Ok(n) => Ok(n),
        Err(e @ pve_types::PlacementError::InsufficientMemory { .. }) if a.allow_overcommit => {
            warnings.push(format!("{e} (placed anyway: allow_overcommit)"));
            place(load, &allowed, mem, 0).map_err(|_| explain(e))
        }
        Err(e) => Err(explain(e)),
    }
}

/// Carry out the plans with at most `parallel` at a time; results keep the input order.
fn execute(ctx: &Ctx, plans: &[Planned], parallel: usize) -> Vec<VmResult> {
    let slots: Vec<Mutex<Option<VmResult>>> = plans.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..parallel.min(plans.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= plans.len() {
                    break;
                }
                let r = match &plans[i] {
                    Ok((a, t)) => run_one(ctx, a, t),
                    Err((a, e)) => VmResult {
                        failed: true,
                        msg: e.to_string(),
                        name: a.as_ref().and_then(|a| a.spec.name.clone()),
                        vmid: a.as_ref().and_then(|a| a.vmid),
                        state: a.as_ref().map(|a| a.state.clone()).unwrap_or_default(),
                        ..Default::default()
                    },
                };
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner().ok().flatten().unwrap_or_else(|| VmResult {
                failed: true,
                msg: "internal error: no result".into(),
                ..Default::default()
            })
        })
        .collect()
}

/// Default timeouts, for documentation and tests.
pub fn default_timeouts() -> Timeouts {
    Timeouts::default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(&super::argument_spec(), "proxmox", "proxmox_vm");
    }
}
