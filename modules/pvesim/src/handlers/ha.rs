//! `/cluster/ha/resources` and `/cluster/ha/status/*` as pve-ha-manager's
//! `PVE/API2/HA/Resources.pm` and `Status.pm` serve them (rules and groups: `ha_rules`).
//! Every write passes `lock_ha_domain`, whose failure text prefixes the handler's `die`.

use serde_json::{json, Map, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::ha::{parse_sid, sid, HaResource, Requested, ServiceState};
use crate::server::Ctx;
use crate::sim::{Generation, Sim};
use crate::vmconfig::sha1_hex;

/// The HA config's `digest` (`PVE::SectionConfig` hashes the file; pvesim its write count).
pub(super) fn digest(sim: &Sim) -> String {
    sha1_hex(&format!("ha-config-{}", sim.ha.generation))
}

fn sid_param(ctx: &Ctx) -> ReplyResult<u32> {
    let raw = ctx.str("sid");
    parse_sid(&raw).map_err(|e| ErrorReply::param("sid", e.to_string()))
}

fn resource_json(sim: &Sim, vmid: u32, r: &HaResource) -> Value {
    let mut o = Map::new();
    o.insert("sid".into(), json!(sid(vmid)));
    o.insert("type".into(), json!("vm"));
    o.insert("state".into(), json!(r.state.as_str()));
    o.insert("digest".into(), json!(digest(sim)));
    for (k, v) in [("comment", &r.comment), ("group", &r.group)] {
        if let Some(v) = v {
            o.insert(k.into(), json!(v));
        }
    }
    for (k, v) in [
        ("max_restart", r.max_restart),
        ("max_relocate", r.max_relocate),
    ] {
        if let Some(v) = v {
            o.insert(k.into(), json!(v));
        }
    }
    if let Some(f) = r.failback {
        o.insert("failback".into(), json!(f as u8));
    }
    Value::Object(o)
}

/// `GET /cluster/ha/resources` (`index`).
pub fn list(ctx: &mut Ctx) -> ReplyResult<Value> {
    if ctx.opt("type").as_deref() == Some("ct") {
        return Ok(json!([]));
    }
    let sim = &*ctx.sim;
    Ok(Value::Array(
        sim.ha
            .resources
            .iter()
            .map(|(v, r)| resource_json(sim, *v, r))
            .collect(),
    ))
}

/// `GET /cluster/ha/resources/{sid}` (`read`, `$api_copy_config`).
pub fn get(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vmid = sid_param(ctx)?;
    let r = ctx
        .sim
        .ha
        .resources
        .get(&vmid)
        .ok_or_else(|| ErrorReply::die(format!("no such resource '{}'", sid(vmid))))?;
    Ok(resource_json(ctx.sim, vmid, r))
}

/// The options `create` and `update` share; `group` is checked against the release: PVE 9 has
/// migrated groups to rules and refuses it as a parameter error (its `PVE::HA::Resources`
/// `check_config`), PVE 8 needs the group to exist (`update`: "HA group … does not exist").
fn apply_options(ctx: &Ctx, r: &mut HaResource) -> ReplyResult<()> {
    if let Some(s) = ctx.opt("state") {
        r.state = Requested::parse(&s).ok_or_else(|| ErrorReply::param("state", "invalid"))?;
    }
    if let Some(c) = ctx.opt("comment") {
        r.comment = Some(c);
    }
    if let Some(g) = ctx.opt("group") {
        if ctx.sim.version.generation() == Generation::Pve9 {
            return Err(ErrorReply::param(
                "group",
                "ha groups have been migrated to rules",
            ));
        }
        if !ctx.sim.ha.groups.contains_key(&g) {
            return Err(ErrorReply::die(format!("HA group '{g}' does not exist")));
        }
        r.group = Some(g);
    }
    r.max_restart = ctx.num("max_restart").or(r.max_restart);
    r.max_relocate = ctx.num("max_relocate").or(r.max_relocate);
    if ctx.opt("failback").is_some() {
        r.failback = Some(ctx.flag("failback"));
    }
    Ok(())
}

/// `POST /cluster/ha/resources` (`create`): the VM must exist (`PVE::HA::Resources::PVEVM`
/// `exists`), the id must be new. The CRM then drives the VM to the requested state.
pub fn create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vmid = sid_param(ctx)?;
    if ctx.opt("type").is_some_and(|t| t != "vm") {
        return Err(ErrorReply::die("types does not match"));
    }
    if !ctx.sim.vms.contains_key(&vmid) {
        return Err(ErrorReply::die(format!(
            "resource '{}' does not exist in cluster",
            sid(vmid)
        )));
    }
    let mut r = HaResource::new(Requested::Started);
    apply_options(ctx, &mut r)?;
    if ctx.sim.ha.resources.contains_key(&vmid) {
        return Err(ErrorReply::die(format!(
            "create resource failed: resource ID '{}' already defined",
            sid(vmid)
        )));
    }
    r.service = HaResource::new(r.state).service;
    ctx.sim.ha_add(vmid, r);
    ctx.sim.ha_apply_request(vmid);
    Ok(Value::Null)
}

/// `PUT /cluster/ha/resources/{sid}` (`update`): a service in `error` takes only `disabled`
/// (`check_service_state`); `digest` guards concurrent edits (`assert_if_modified`).
pub fn update(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vmid = sid_param(ctx)?;
    let name = sid(vmid);
    let mut r = ctx.sim.ha.resources.get(&vmid).cloned().ok_or_else(|| {
        ErrorReply::die(format!("update resource failed: no such resource '{name}'"))
    })?;
    if r.service == ServiceState::Error && ctx.opt("state").as_deref() != Some("disabled") {
        return Err(ErrorReply::die(format!(
            "service '{name}' in error state, must be disabled and fixed first"
        )));
    }
    if ctx.opt("digest").is_some_and(|d| d != digest(ctx.sim)) {
        return Err(ErrorReply::die(
            "update resource failed: detected modified configuration - file changed by other user? Try again.",
        ));
    }
    apply_options(ctx, &mut r)?;
    for k in ctx.opt("delete").unwrap_or_default().split([',', ';', ' ']) {
        match k {
            "" => {}
            "comment" => r.comment = None,
            "group" => r.group = None,
            "max_restart" => r.max_restart = None,
            "max_relocate" => r.max_relocate = None,
            "failback" => r.failback = None,
            "state" => r.state = Requested::Started,
            other => {
                return Err(ErrorReply::die(format!(
                    "update resource failed: no such option '{other}'"
                )))
            }
        }
    }
    if r.state == Requested::Disabled && r.service == ServiceState::Error {
        r.service = ServiceState::Stopped;
    }
    ctx.sim.ha_add(vmid, r);
    ctx.sim.ha_apply_request(vmid);
    Ok(Value::Null)
}

/// `DELETE /cluster/ha/resources/{sid}` (`delete`): `service_is_ha_managed` first; `purge`
/// (default on) also drops it from the rules.
pub fn delete(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vmid = sid_param(ctx)?;
    if !ctx.sim.ha.resources.contains_key(&vmid) {
        return Err(ErrorReply::die(format!(
            "service '{}' not managed by HA",
            sid(vmid)
        )));
    }
    let purge = ctx.flag_or("purge", true);
    ctx.sim.ha_remove(vmid, purge);
    Ok(Value::Null)
}

fn node_state(sim: &Sim, node: &str) -> &'static str {
    if sim.ha.fencing.contains_key(node) {
        "fence"
    } else if sim.nodes.get(node).is_some_and(|n| n.online) {
        "online"
    } else {
        "unknown"
    }
}

fn master(sim: &Sim) -> Option<String> {
    sim.nodes
        .values()
        .find(|n| n.online)
        .map(|n| n.name.clone())
}

/// `GET /cluster/ha/status/current` (`Status.pm` `status`): quorum, master, one `lrm` entry per
/// node and one `service` entry per resource with the node it is on and the CRM's state.
pub fn status_current(ctx: &mut Ctx) -> ReplyResult<Value> {
    let sim = &*ctx.sim;
    let mut out = vec![json!({
        "id": "quorum", "type": "quorum", "quorate": sim.opts.quorate as u8,
        "status": if sim.opts.quorate { "OK" } else { "No quorum on node" },
        "node": master(sim),
    })];
    if let Some(m) = master(sim) {
        out.push(
            json!({"id": "master", "type": "master", "node": m, "status": format!("{m} (active)")}),
        );
    }
    for n in sim.nodes.keys() {
        let st = node_state(sim, n);
        out.push(json!({"id": format!("lrm:{n}"), "type": "lrm", "node": n,
            "status": format!("{n} ({})", if st == "online" { "active" } else { "old timestamp - dead?" })}));
    }
    for (vmid, r) in &sim.ha.resources {
        let node = sim
            .vms
            .get(vmid)
            .map(|v| v.node.clone())
            .unwrap_or_default();
        let s = sid(*vmid);
        out.push(json!({
            "id": format!("service:{s}"), "type": "service", "sid": s, "node": node,
            "state": r.service.as_str(), "crm_state": r.service.as_str(),
            "request_state": r.state.as_str(),
            "status": format!("{s} ({node}, {})", r.service.as_str()),
        }));
    }
    Ok(Value::Array(out))
}

/// `GET /cluster/ha/status/manager_status`: the CRM's `manager_status` (node and service
/// status).
pub fn manager_status(ctx: &mut Ctx) -> ReplyResult<Value> {
    let sim = &*ctx.sim;
    let nodes: Map<String, Value> = sim
        .nodes
        .keys()
        .map(|n| (n.clone(), json!(node_state(sim, n))))
        .collect();
    let services: Map<String, Value> = sim
        .ha
        .resources
        .iter()
        .map(|(v, r)| {
            let node = sim.vms.get(v).map(|vm| vm.node.clone());
            (sid(*v), json!({"node": node, "state": r.service.as_str()}))
        })
        .collect();
    Ok(json!({
        "manager_status": {"master_node": master(sim), "node_status": nodes, "service_status": services},
        "quorum": {"quorate": sim.opts.quorate as u8, "node": master(sim)},
    }))
}
