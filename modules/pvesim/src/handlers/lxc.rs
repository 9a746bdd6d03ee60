//! `/nodes/{node}/lxc*`: LXC containers (pve-container `src/PVE/API2/LXC.pm` and its `Config`,
//! `Status` and `Snapshot` subclasses). pvesim keeps what clients that list guests read — the
//! index, config, current status, snapshots and interfaces — and the create call; no other
//! container operation is simulated (the routes answer 501).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::model::Ct;
use crate::ops::{self, vm_path};
use crate::server::Ctx;
use crate::sim::Sim;
use crate::vmconfig::sha1_hex;

/// Parameters of `create_vm` that steer the call rather than being config keys.
const CREATE_CONTROL: &[&str] = &[
    "node",
    "vmid",
    "ostemplate",
    "password",
    "storage",
    "force",
    "restore",
    "pool",
    "ignore-unpack-errors",
    "ssh-public-keys",
    "bwlimit",
    "start",
    "unique",
];

fn status_str(ct: &Ct) -> &'static str {
    if ct.running {
        "running"
    } else {
        "stopped"
    }
}

/// One container as pve-container's `PVE::LXC::vmstatus` reports it (the index and
/// `status/current`): `name` is the hostname, `cpus` the cores (else the node's CPUs), `maxmem`
/// and `maxswap` from `memory`/`swap`, `maxdisk` the rootfs size.
pub fn vmstatus(sim: &Sim, ct: &Ct) -> Value {
    let node_cpus = sim.nodes.get(&ct.node).map(|n| n.cpus).unwrap_or(1);
    let maxmem = ct.memory_mib() << 20;
    let mut o = json!({
        "vmid": ct.vmid, "name": ct.name(), "type": "lxc", "status": status_str(ct),
        "cpus": ct.cpus(node_cpus), "cpu": 0, "maxmem": maxmem,
        "mem": if ct.running { maxmem / 4 } else { 0 },
        "maxswap": ct.swap_mib() << 20, "swap": 0,
        "maxdisk": ct.rootfs_size(), "disk": if ct.running { ct.rootfs_size() / 5 } else { 0 },
        "uptime": sim.uptime_secs(ct.started_at),
        "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
    });
    if ct.running {
        o["pid"] = json!(ct.pid);
    }
    if let Some(t) = ct.conf.get("tags") {
        o["tags"] = json!(t);
    }
    if let Some(l) = ct.conf.get("lock") {
        o["lock"] = json!(l);
    }
    if ct.is_template() {
        o["template"] = json!(1);
    }
    o
}

/// `GET /nodes/{node}/lxc` (`vmlist`): the node's containers the caller may audit
/// (`VM.Audit` on `/vms/<vmid>`).
pub fn list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let node = ctx.node();
    let sim = &*ctx.sim;
    let list = sim
        .cts
        .values()
        .filter(|c| c.node == node)
        .filter(|c| sim.access.has(&ctx.who, &vm_path(c.vmid), "VM.Audit"))
        .map(|c| vmstatus(sim, c))
        .collect();
    Ok(Value::Array(list))
}

/// The digest `PVE::AbstractConfig` computes over the config file (`key: value` lines).
fn digest(ct: &Ct) -> String {
    let text: String = ct.conf.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    sha1_hex(&text)
}

/// `GET /nodes/{node}/lxc/{vmid}/config` (`PVE::API2::LXC::Config`, `vm_config`): the config
/// keys with their values as written (numbers as numbers), and `digest`. Needs `VM.Audit`.
pub fn config_get(ctx: &mut Ctx) -> ReplyResult<Value> {
    let ct = ctx.sim.ct(&ctx.node(), ctx.vmid())?;
    if let Some(s) = ctx.opt("snapshot") {
        return Err(ErrorReply::die(format!("snapshot '{s}' does not exist")));
    }
    let mut out: Map<String, Value> = ct
        .conf
        .iter()
        .map(|(k, v)| {
            let value = match v.parse::<i64>() {
                Ok(n) if !matches!(k.as_str(), "hostname" | "description" | "tags") => json!(n),
                _ => json!(v),
            };
            (k.clone(), value)
        })
        .collect();
    out.insert("digest".into(), json!(digest(ct)));
    Ok(Value::Object(out))
}

/// `GET …/status/current` (`PVE::API2::LXC::Status`, `vm_status`): `vmstatus` of the one
/// container plus its HA state (pvesim's containers are never HA-managed).
pub fn status_current(ctx: &mut Ctx) -> ReplyResult<Value> {
    let sim = &*ctx.sim;
    let ct = sim.ct(&ctx.node(), ctx.vmid())?;
    let mut o = vmstatus(sim, ct);
    o["ha"] = json!({"managed": 0});
    Ok(o)
}

/// `GET …/snapshot` (`PVE::API2::LXC::Snapshot`, `list`): the snapshots, then `current`.
/// pvesim takes no snapshots, so only `current` is listed.
pub fn snapshot_list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let ct = ctx.sim.ct(&ctx.node(), ctx.vmid())?;
    Ok(json!([{
        "name": "current", "digest": digest(ct),
        "running": if ct.running { 1 } else { 0 },
        "description": "You are here!",
    }]))
}

/// `GET …/interfaces` (`PVE::API2::LXC`, `ip`): the running container's interfaces as
/// `{name, hwaddr, inet, inet6}` — `lo` first, then one per `netN` named by its `name=`, with the
/// seeded addresses (the first IPv4 as `inet`, the first IPv6 as `inet6`). Upstream reads them
/// from the running container; pvesim refuses a stopped one.
pub fn interfaces(ctx: &mut Ctx) -> ReplyResult<Value> {
    let ct = ctx.sim.ct(&ctx.node(), ctx.vmid())?;
    if !ct.running {
        return Err(ErrorReply::die(format!("CT {} not running", ct.vmid)));
    }
    let mut out = vec![json!({
        "name": "lo", "hwaddr": "00:00:00:00:00:00", "inet": "127.0.0.1/8", "inet6": "::1/128",
    })];
    for (key, value) in ct.conf.iter().filter(|(k, _)| is_net_key(k)) {
        let prop = |p: &str| {
            value
                .split(',')
                .find_map(|kv| kv.strip_prefix(p)?.strip_prefix('='))
                .map(str::to_string)
        };
        let mut o = json!({
            "name": prop("name").unwrap_or_else(|| format!("eth{}", &key[3..])),
            "hwaddr": prop("hwaddr").unwrap_or_default().to_lowercase(),
        });
        let ips = ct.ips.get(key).cloned().unwrap_or_default();
        if let Some(v4) = ips.iter().find(|a| !a.contains(':')) {
            o["inet"] = json!(v4);
        }
        if let Some(v6) = ips.iter().find(|a| a.contains(':')) {
            o["inet6"] = json!(v6);
        }
        out.push(o);
    }
    Ok(Value::Array(out))
}

fn is_net_key(k: &str) -> bool {
    k.strip_prefix("net")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `POST /nodes/{node}/lxc` (`create_vm`).
pub fn create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let keys: BTreeMap<String, String> = ctx
        .params
        .iter()
        .filter(|(k, _)| !CREATE_CONTROL.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), crate::schema::value_str(v)))
        .collect();
    let req = ops::create_ct::CreateCt {
        node: ctx.node(),
        vmid: ctx.vmid(),
        ostemplate: ctx.str("ostemplate"),
        storage: ctx.opt("storage").unwrap_or_else(|| "local".into()),
        pool: ctx.opt("pool"),
        start: ctx.flag("start"),
        restore: ctx.flag("restore"),
        keys,
    };
    let who = ctx.who.clone();
    Ok(json!(ops::create_ct::start(ctx.sim, &who, req)?))
}
