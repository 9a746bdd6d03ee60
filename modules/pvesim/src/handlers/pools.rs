//! `/pools`: resource pools and their VM members (storage members are not simulated). Both the
//! PVE 7 form (`/pools/{poolid}`) and the PVE 8.1+ form (`/pools` with `poolid`) are served.

use serde_json::{json, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::model::Pool;
use crate::server::Ctx;
use crate::sim::Generation;

fn members(ctx: &Ctx, id: &str) -> Vec<Value> {
    let sim = &*ctx.sim;
    sim.pools
        .get(id)
        .map(|p| {
            p.vms
                .iter()
                .filter_map(|vmid| match (sim.vms.get(vmid), sim.cts.get(vmid)) {
                    (Some(vm), _) => Some(json!({
                        "id": format!("qemu/{}", vm.vmid), "type": "qemu", "vmid": vm.vmid,
                        "node": vm.node,
                        "name": vm.conf.get("name").cloned().unwrap_or_else(|| format!("VM {}", vm.vmid)),
                        "status": if vm.running() { "running" } else { "stopped" },
                    })),
                    // Container members as `/cluster/resources` lists them (`lxc/<vmid>`).
                    (None, Some(ct)) => Some(json!({
                        "id": format!("lxc/{}", ct.vmid), "type": "lxc", "vmid": ct.vmid,
                        "node": ct.node, "name": ct.name(),
                        "status": if ct.running { "running" } else { "stopped" },
                    })),
                    (None, None) => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn missing(id: &str) -> ErrorReply {
    ErrorReply::die(format!("pool '{id}' does not exist"))
}

/// `GET /pools`: the pools the caller may audit; with `poolid`, that pool with its members.
pub fn list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let wanted = ctx.opt("poolid");
    if let Some(id) = &wanted {
        if !ctx.sim.pools.contains_key(id) {
            return Err(missing(id));
        }
    }
    let ids: Vec<String> = ctx
        .sim
        .pools
        .keys()
        .filter(|id| wanted.as_ref().is_none_or(|w| w == *id))
        .filter(|id| {
            ctx.sim
                .access
                .has(&ctx.who, &format!("/pool/{id}"), "Pool.Audit")
        })
        .cloned()
        .collect();
    Ok(Value::Array(
        ids.iter()
            .map(|id| {
                let mut o = json!({ "poolid": id });
                if let Some(c) = &ctx.sim.pools[id].comment {
                    o["comment"] = json!(c);
                }
                if wanted.is_some() {
                    o["members"] = json!(members(ctx, id));
                }
                o
            })
            .collect(),
    ))
}

/// `POST /pools` (pve-manager `PVE/API2/Pool.pm` `create_pool`; its checks run inside
/// `lock_user_config(…, "create pool failed")`, which prefixes them).
pub fn create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("poolid");
    let failed = |why: String| ErrorReply::die(format!("create pool failed: {why}"));
    if ctx.sim.pools.contains_key(&id) {
        return Err(failed(format!("pool '{id}' already exists")));
    }
    let leaf = match id.rsplit_once('/') {
        Some((parent, leaf)) => {
            if !ctx.sim.pools.contains_key(parent) {
                return Err(failed(format!(
                    "parent '{parent}' of pool '{id}' does not exist"
                )));
            }
            leaf
        }
        None => id.as_str(),
    };
    // pve-manager commit 7eadbed6 ("api: create pool: force first character to be a letter for
    // new pools", 2025-07-24) is in 9.0.0 and not on stable-8.
    let letter_first = leaf.starts_with(|c: char| c.is_ascii_alphabetic());
    if ctx.sim.version.generation() == Generation::Pve9 && !letter_first {
        return Err(failed("pool name must start with a letter".into()));
    }
    let comment = ctx.opt("comment");
    ctx.sim.pools.insert(
        id,
        Pool {
            comment,
            ..Default::default()
        },
    );
    Ok(Value::Null)
}

/// `GET /pools/{poolid}`.
pub fn get(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("poolid");
    let pool = ctx.sim.pools.get(&id).ok_or_else(|| missing(&id))?;
    let mut o = json!({ "members": members(ctx, &id) });
    if let Some(c) = &pool.comment {
        o["comment"] = json!(c);
    }
    Ok(o)
}

/// `PUT /pools/{poolid}` and `PUT /pools`: comment, and VMs added (`allow-move` takes them from
/// another pool) or removed (`delete`). Every VM is checked before any membership changes.
pub fn update(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("poolid");
    if !ctx.sim.pools.contains_key(&id) {
        return Err(missing(&id));
    }
    if ctx.opt("storage").is_some() {
        return Err(ErrorReply::die(
            "pvesim: storage pool members are not simulated",
        ));
    }
    let delete = ctx.flag("delete");
    let allow_move = ctx.flag("allow-move");
    let vms: Vec<u32> = ctx
        .opt("vms")
        .unwrap_or_default()
        .split([',', ';', ' '])
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse().map_err(|_| {
                ErrorReply::param(
                    "vms",
                    format!("value '{v}' does not look like a valid VM ID"),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    for &vmid in &vms {
        ctx.sim.access.require(
            &ctx.who,
            &format!("/vms/{vmid}"),
            &["Permissions.Modify", "VM.Allocate"],
            true,
        )?;
        let current = ctx.sim.pool_of(vmid).map(str::to_string);
        if delete {
            if current.as_deref() != Some(id.as_str()) {
                return Err(ErrorReply::die(format!("VM {vmid} is not a pool member")));
            }
            continue;
        }
        if !ctx.sim.vmid_taken(vmid) {
            return Err(ErrorReply::die(format!("VM {vmid} does not exist")));
        }
        match current {
            Some(p) if p == id => {
                return Err(ErrorReply::die(format!(
                    "VM {vmid} is already a pool member"
                )))
            }
            Some(p) if !allow_move => {
                return Err(ErrorReply::die(format!(
                    "VM {vmid} belongs already to pool '{p}' and 'allow-move' is not set"
                )))
            }
            Some(p) => {
                ctx.sim.access.require(
                    &ctx.who,
                    &format!("/pool/{p}"),
                    &["Pool.Allocate"],
                    false,
                )?;
            }
            None => {}
        }
    }
    for vmid in vms {
        ctx.sim.set_pool(vmid, (!delete).then_some(id.as_str()));
    }
    if let Some(c) = ctx.opt("comment") {
        ctx.sim.pools.get_mut(&id).expect("checked above").comment = Some(c);
    }
    Ok(Value::Null)
}

/// `DELETE /pools/{poolid}`: only an empty pool.
pub fn delete(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("poolid");
    if !ctx.sim.pools.contains_key(&id) {
        return Err(missing(&id));
    }
    if !members(ctx, &id).is_empty() {
        return Err(ErrorReply::die(format!("pool '{id}' is not empty")));
    }
    ctx.sim.pools.remove(&id);
    Ok(Value::Null)
}
