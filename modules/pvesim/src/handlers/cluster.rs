//! `/version`, `/cluster/*`, `/nodes`, `/nodes/{node}/status`.

use serde_json::{json, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::model::RunState;
use crate::server::Ctx;
use crate::sim::Sim;
use crate::vmconfig::{is_cdrom, is_drive_key, parse_drive, split_volid};

pub fn version(ctx: &mut Ctx) -> ReplyResult<Value> {
    let v = ctx.sim.version;
    Ok(json!({
        "version": v.to_string(), "release": v.release(),
        "repoid": "b5b5e27f1d43a2c9", "console": "xtermjs",
    }))
}

pub fn nextid(ctx: &mut Ctx) -> ReplyResult<Value> {
    if let Some(id) = ctx.num("vmid") {
        // PVE::API2::Cluster `nextid`: the cluster's vmlist holds VMs and containers alike.
        if ctx.sim.vmid_taken(id as u32) {
            return Err(ErrorReply::param("vmid", format!("VM {id} already exists")));
        }
        return Ok(json!(id.to_string()));
    }
    let lower = ctx.sim.cluster.nextid_lower.max(100);
    let upper = 1_000_000u32;
    let id = (lower..upper)
        .find(|i| !ctx.sim.vmid_taken(*i))
        .ok_or_else(|| {
            ErrorReply::die(format!(
                "unable to get any free VMID in range [{lower}, {upper}]"
            ))
        })?;
    // Real servers answer a string although the schema says integer.
    Ok(json!(id.to_string()))
}

/// Sum of the sizes of a VM's disks (bytes).
pub fn maxdisk(sim: &Sim, vmid: u32) -> u64 {
    let Some(vm) = sim.vms.get(&vmid) else {
        return 0;
    };
    vm.conf
        .iter()
        .filter(|(k, _)| is_drive_key(k) && !k.starts_with("unused"))
        .filter_map(|(k, v)| {
            let d = parse_drive(k, v);
            if is_cdrom(&d) {
                return None;
            }
            let (sid, name) = split_volid(d.get("file")?)?;
            sim.storage(&vm.node, sid)?
                .volumes
                .get(name)
                .map(|v| v.size)
        })
        .max()
        .unwrap_or(0)
}

fn vm_mem(vm: &crate::model::Vm) -> u64 {
    if vm.running() {
        (vm.memory_mib() << 20) / 3
    } else {
        0
    }
}

pub fn node_used_mem(sim: &Sim, node: &str) -> u64 {
    (2u64 << 30)
        + sim
            .vms
            .values()
            .filter(|v| v.node == node)
            .map(vm_mem)
            .sum::<u64>()
}

pub fn resources(ctx: &mut Ctx) -> ReplyResult<Value> {
    let ty = ctx.opt("type");
    let sim = &*ctx.sim;
    let mut out = Vec::new();
    let want = |t: &str| ty.as_deref().map(|x| x == t).unwrap_or(true);
    if want("vm") {
        for vm in sim.vms.values() {
            if !sim
                .access
                .has(&ctx.who, &format!("/vms/{}", vm.vmid), "VM.Audit")
            {
                continue;
            }
            let online = sim.nodes.get(&vm.node).map(|n| n.online).unwrap_or(false);
            let status = if !online {
                "unknown"
            } else if vm.running() {
                "running"
            } else {
                "stopped"
            };
            let mut o = json!({
                "id": format!("qemu/{}", vm.vmid),
                "type": "qemu",
                "node": vm.node,
                "vmid": vm.vmid,
                "name": vm.conf.get("name").cloned().unwrap_or_else(|| format!("VM {}", vm.vmid)),
                "status": status,
                "template": if vm.is_template() { 1 } else { 0 },
                "maxmem": vm.memory_mib() << 20,
                "mem": vm_mem(vm),
                "maxcpu": vm.cpus(),
                "cpu": 0,
                "maxdisk": maxdisk(sim, vm.vmid),
                "disk": 0,
                "uptime": sim.uptime_secs(vm.started_at),
                "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
            });
            if let Some(t) = vm.conf.get("tags") {
                o["tags"] = json!(t);
            }
            if let Some(l) = vm.lock() {
                o["lock"] = json!(l);
            }
            if let Some(p) = sim.pool_of(vm.vmid) {
                o["pool"] = json!(p);
            }
            if let Some(r) = sim.ha.resources.get(&vm.vmid) {
                o["hastate"] = json!(r.service.as_str());
            }
            out.push(o);
        }
        // pve-manager `PVE::API2Tools::extract_vm_stats`: containers are `lxc/<vmid>` with the
        // same fields (`vmstatus` of pve-container).
        for ct in sim.cts.values() {
            if !sim
                .access
                .has(&ctx.who, &format!("/vms/{}", ct.vmid), "VM.Audit")
            {
                continue;
            }
            let online = sim.nodes.get(&ct.node).map(|n| n.online).unwrap_or(false);
            let mut o = super::lxc::vmstatus(sim, ct);
            o["id"] = json!(format!("lxc/{}", ct.vmid));
            o["node"] = json!(ct.node);
            o["maxcpu"] = o["cpus"].clone();
            if let Value::Object(m) = &mut o {
                m.remove("cpus");
                m.remove("pid");
                m.remove("maxswap");
                m.remove("swap");
            }
            if !online {
                o["status"] = json!("unknown");
            }
            if let Some(p) = sim.pool_of(ct.vmid) {
                o["pool"] = json!(p);
            }
            o["template"] = json!(if ct.is_template() { 1 } else { 0 });
            out.push(o);
        }
    }
    if want("node") {
        for n in sim.nodes.values() {
            let mut o = json!({"id": format!("node/{}", n.name), "type": "node", "node": n.name,
                "status": if n.online { "online" } else { "offline" }});
            if n.online {
                o["maxcpu"] = json!(n.cpus);
                o["maxmem"] = json!(n.maxmem);
                o["mem"] = json!(node_used_mem(sim, &n.name));
                o["cpu"] = json!(0.02);
                o["uptime"] = json!(sim.started_secs() + 86400);
                o["level"] = json!("");
                o["disk"] = json!(8u64 << 30);
                o["maxdisk"] = json!(100u64 << 30);
            }
            out.push(o);
        }
    }
    if want("storage") {
        for n in sim.nodes.values() {
            for sid in &n.storages {
                let Some(st) = sim.storage(&n.name, sid) else {
                    continue;
                };
                if !sim
                    .access
                    .has(&ctx.who, &format!("/storage/{sid}"), "Datastore.Audit")
                    && !sim.access.has(
                        &ctx.who,
                        &format!("/storage/{sid}"),
                        "Datastore.AllocateSpace",
                    )
                {
                    continue;
                }
                out.push(json!({
                    "id": format!("storage/{}/{}", n.name, sid),
                    "type": "storage", "node": n.name, "storage": sid,
                    "status": if n.online { "available" } else { "unknown" },
                    "plugintype": st.kind,
                    "content": st.content.iter().cloned().collect::<Vec<_>>().join(","),
                    "shared": if st.shared { 1 } else { 0 },
                    "disk": st.used(), "maxdisk": st.total,
                }));
            }
        }
    }
    Ok(Value::Array(out))
}

pub fn nodes(ctx: &mut Ctx) -> ReplyResult<Value> {
    let sim = &*ctx.sim;
    let list = sim
        .nodes
        .values()
        .map(|n| {
            if !n.online {
                return json!({"node": n.name, "status": "offline", "id": format!("node/{}", n.name), "type": "node"});
            }
            json!({
                "node": n.name, "status": "online", "id": format!("node/{}", n.name), "type": "node",
                "cpu": 0.02, "maxcpu": n.cpus, "mem": node_used_mem(sim, &n.name), "maxmem": n.maxmem,
                "disk": 8u64 << 30, "maxdisk": 100u64 << 30, "uptime": sim.started_secs() + 86400,
                "level": "", "ssl_fingerprint": "AB:CD:EF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC",
            })
        })
        .collect();
    Ok(Value::Array(list))
}

pub fn node_status(ctx: &mut Ctx) -> ReplyResult<Value> {
    let node = ctx.node();
    let sim = &*ctx.sim;
    let n = sim
        .nodes
        .get(&node)
        .ok_or_else(|| ErrorReply::die(format!("no such node '{node}'")))?;
    let used = node_used_mem(sim, &node).min(n.maxmem);
    let running = sim
        .vms
        .values()
        .filter(|v| v.node == node && v.state != RunState::Stopped)
        .count();
    Ok(json!({
        "cpu": 0.02 + 0.01 * running as f64,
        "cpuinfo": {"cpus": n.cpus, "cores": n.cpus / 2, "sockets": 1, "model": "pvesim virtual CPU", "mhz": "2400.000", "hvm": "1"},
        "memory": {"total": n.maxmem, "used": used, "free": n.maxmem - used, "available": n.maxmem - used},
        "swap": {"total": 0, "used": 0, "free": 0},
        "rootfs": {"total": 100u64 << 30, "used": 8u64 << 30, "free": 92u64 << 30, "avail": 92u64 << 30},
        "loadavg": ["0.10", "0.08", "0.05"],
        "uptime": sim.started_secs() + 86400,
        "pveversion": format!("pve-manager/{}/b5b5e27f1d43a2c9", sim.version),
        "kversion": "Linux 6.14.8-2-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2",
        "boot-info": {"mode": "efi", "secureboot": 0},
        "current-kernel": {"sysname": "Linux", "release": "6.14.8-2-pve", "machine": "x86_64"},
        "idle": 0, "wait": 0,
    }))
}

/// `GET /nodes/{node}/network` (pve-manager `PVE/API2/Network.pm`, `index`): the interfaces of the
/// node's `/etc/network/interfaces`, each with `iface`, `type`, `active`, `autostart`, `method`,
/// `families`, `priority` and, when configured, `cidr`/`address`/`netmask`, `gateway`,
/// `bridge_ports`; `type` filters, `any_bridge` meaning `bridge` and `OVSBridge`.
pub fn node_network(ctx: &mut Ctx) -> ReplyResult<Value> {
    let node = ctx.node();
    let wanted = ctx.opt("type");
    let n = ctx
        .sim
        .nodes
        .get(&node)
        .ok_or_else(|| ErrorReply::die(format!("no such node '{node}'")))?;
    let matches = |kind: &str| match wanted.as_deref() {
        None | Some("include_sdn") => true,
        Some("any_bridge") | Some("any_local_bridge") => kind == "bridge" || kind == "OVSBridge",
        Some(t) => t == kind,
    };
    let list = n
        .network
        .iter()
        .enumerate()
        .filter(|(_, i)| matches(&i.kind))
        .map(|(priority, i)| {
            let mut o = json!({
                "iface": i.iface, "type": i.kind, "autostart": 1, "priority": priority + 3,
                "method": if i.cidr.is_some() { "static" } else { "manual" },
                "method6": "manual", "families": ["inet"],
            });
            if i.active {
                o["active"] = json!(1);
            }
            if let Some((address, prefix)) = i.cidr.as_deref().and_then(|c| c.split_once('/')) {
                o["cidr"] = json!(i.cidr);
                o["address"] = json!(address);
                o["netmask"] = json!(prefix);
            }
            if let Some(g) = &i.gateway {
                o["gateway"] = json!(g);
            }
            if let Some(p) = &i.bridge_ports {
                o["bridge_ports"] = json!(p);
                o["bridge_stp"] = json!("off");
                o["bridge_fd"] = json!("0");
            }
            o
        })
        .collect();
    Ok(Value::Array(list))
}
