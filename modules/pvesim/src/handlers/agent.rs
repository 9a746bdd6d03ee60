//! `/nodes/{node}/qemu/{vmid}/agent/*`: the guest agent, ready after its delay.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::propstr;
use crate::server::Ctx;
use crate::vmconfig::parse_net;

pub fn agent_enabled(conf: &BTreeMap<String, String>) -> bool {
    conf.get("agent")
        .map(|a| propstr::parse_loose(a, "enabled").get("enabled") == Some("1"))
        .unwrap_or(false)
}

/// qemu-server `PVE::QemuServer::Agent::assert_agent_available` (`agent_available` on PVE 8, the
/// same texts): "not configured" only when the config has no `agent` key at all; `agent: 0` means
/// no guest agent channel, so a running VM's agent "is not running".
fn agent_ready(ctx: &Ctx) -> ReplyResult<()> {
    let vmid = ctx.vmid();
    let vm = ctx.sim.vm(&ctx.node(), vmid)?;
    if !vm.conf.contains_key("agent") {
        return Err(ErrorReply::die("No QEMU guest agent configured"));
    }
    if !vm.running() {
        return Err(ErrorReply::die(format!("VM {vmid} is not running")));
    }
    let not_yet = vm.agent_ready_at.map(|t| t > ctx.sim.now()).unwrap_or(true);
    if !agent_enabled(&vm.conf) || not_yet {
        return Err(ErrorReply::die("QEMU guest agent is not running"));
    }
    Ok(())
}

pub fn agent_ping(ctx: &mut Ctx) -> ReplyResult<Value> {
    agent_ready(ctx)?;
    Ok(json!({"result": {}}))
}

/// Link-local IPv6 (EUI-64) for a MAC.
fn link_local(mac: &str) -> String {
    let b: Vec<u8> = mac
        .split(':')
        .filter_map(|x| u8::from_str_radix(x, 16).ok())
        .collect();
    if b.len() != 6 {
        return "fe80::1".into();
    }
    format!(
        "fe80::{:x}:{:x}:{:x}:{:x}",
        (((b[0] ^ 2) as u16) << 8) | b[1] as u16,
        ((b[2] as u16) << 8) | 0xff,
        0xfe00 | b[3] as u16,
        ((b[4] as u16) << 8) | b[5] as u16
    )
}

fn ip_entry(cidr: &str) -> Value {
    let (ip, prefix) = cidr.split_once('/').unwrap_or((cidr, ""));
    let v6 = ip.contains(':');
    let prefix: u32 = prefix.parse().unwrap_or(if v6 { 64 } else { 24 });
    json!({"ip-address": ip, "ip-address-type": if v6 { "ipv6" } else { "ipv4" }, "prefix": prefix})
}

pub fn agent_interfaces(ctx: &mut Ctx) -> ReplyResult<Value> {
    agent_ready(ctx)?;
    let vm = ctx.sim.vm(&ctx.node(), ctx.vmid())?;
    // Right after boot only link-local addresses exist (bpg #776).
    let ip_delay = ctx.sim.scaled(ctx.sim.opts.agent_ip_delay);
    let addresses_ready = vm
        .agent_ready_at
        .map(|t| t + ip_delay <= ctx.sim.now())
        .unwrap_or(false);
    let conf = &vm.conf;
    let mut ifaces = vec![json!({
        "name": "lo", "hardware-address": "00:00:00:00:00:00",
        "ip-addresses": [
            {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
            {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128}
        ],
        "statistics": {"rx-bytes": 0, "rx-packets": 0, "tx-bytes": 0, "tx-packets": 0, "rx-errs": 0, "tx-errs": 0, "rx-dropped": 0, "tx-dropped": 0}
    })];
    for i in 0..32 {
        let key = format!("net{i}");
        let Some(net) = conf.get(&key) else { continue };
        let mac = parse_net(net)
            .get("macaddr")
            .unwrap_or("00:00:00:00:00:00")
            .to_lowercase();
        let mut addrs: Vec<Value> = Vec::new();
        if !addresses_ready {
            // Only the link-local address below.
        } else if let Some(ips) = vm.agent_ips.get(&key) {
            addrs.extend(ips.iter().map(|c| ip_entry(c)));
        } else if let Some(ipc) = conf.get(&format!("ipconfig{i}")) {
            let ps = propstr::parse_loose(ipc, "ip");
            for k in ["ip", "ip6"] {
                if let Some(a) = ps.get(k).filter(|a| a.contains('/')) {
                    addrs.push(ip_entry(a));
                }
            }
        }
        addrs
            .push(json!({"ip-address": link_local(&mac), "ip-address-type": "ipv6", "prefix": 64}));
        ifaces.push(json!({
            "name": format!("ens{}", 18 + i), "hardware-address": mac, "ip-addresses": addrs,
            "statistics": {"rx-bytes": 1024, "rx-packets": 10, "tx-bytes": 512, "tx-packets": 5, "rx-errs": 0, "tx-errs": 0, "rx-dropped": 0, "tx-dropped": 0}
        }));
    }
    Ok(json!({"result": ifaces}))
}
