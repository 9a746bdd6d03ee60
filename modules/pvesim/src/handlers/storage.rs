//! `/nodes/{node}/storage*`: listing, content, ISO upload and volume deletion; `/nodes/{node}/vzdump`
//! (backups onto a storage).

use serde_json::{json, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::ops;
use crate::server::Ctx;

pub fn list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let node = ctx.node();
    let content = ctx.opt("content");
    let only = ctx.opt("storage");
    let enabled = ctx.flag("enabled");
    let with_formats = ctx.flag("format");
    let sim = &*ctx.sim;
    let n = sim
        .nodes
        .get(&node)
        .ok_or_else(|| ErrorReply::die(format!("no such node '{node}'")))?;
    let mut out = Vec::new();
    for sid in &n.storages {
        let Some(st) = sim.storage(&node, sid) else {
            continue;
        };
        let path = format!("/storage/{sid}");
        if !sim.access.has(&ctx.who, &path, "Datastore.Audit")
            && !sim.access.has(&ctx.who, &path, "Datastore.AllocateSpace")
        {
            continue;
        }
        if only.as_deref().map(|o| o != sid).unwrap_or(false) || (enabled && !st.enabled) {
            continue;
        }
        if let Some(c) = &content {
            if !c.split(',').all(|c| st.content.contains(c)) {
                continue;
            }
        }
        let used = st.used();
        let mut o = json!({
            "storage": sid, "type": st.kind,
            "content": st.content.iter().cloned().collect::<Vec<_>>().join(","),
            "enabled": if st.enabled { 1 } else { 0 }, "active": if st.enabled { 1 } else { 0 },
            "shared": if st.shared { 1 } else { 0 },
            "total": st.total, "used": used, "avail": st.avail(),
            "used_fraction": if st.total > 0 { used as f64 / st.total as f64 } else { 0.0 },
        });
        if with_formats {
            ops::storage::add_format_info(sim.version, &st.kind, &mut o);
        }
        out.push(o);
    }
    Ok(Value::Array(out))
}

pub fn content(ctx: &mut Ctx) -> ReplyResult<Value> {
    let node = ctx.node();
    let sid = ctx.str("storage");
    let content = ctx.opt("content");
    let vmid = ctx.num("vmid").map(|v| v as u32);
    let st = ctx
        .sim
        .storage(&node, &sid)
        .ok_or_else(|| ErrorReply::die(format!("storage '{sid}' does not exist")))?;
    if !st.enabled {
        return Err(ErrorReply::die(format!("storage '{sid}' is disabled")));
    }
    let list = st
        .volumes
        .values()
        .filter(|v| content.as_deref().map(|c| c == v.content).unwrap_or(true))
        .filter(|v| vmid.map(|id| v.vmid == Some(id)).unwrap_or(true))
        .map(|v| {
            let mut o = json!({"volid": format!("{sid}:{}", v.name), "format": v.format, "size": v.size,
                "ctime": v.ctime, "content": v.content});
            if let Some(id) = v.vmid {
                o["vmid"] = json!(id);
                o["used"] = json!(v.size);
            }
            if let Some(p) = &v.parent {
                o["parent"] = json!(p);
            }
            // pve-storage `list_volumes` for `backup`: the guest type and the `.notes` file's text.
            if v.content == "backup" {
                o["subtype"] = json!("qemu");
                let volid = format!("{sid}:{}", v.name);
                if let Some(n) = ctx.sim.backups.get(&volid).and_then(|b| b.notes.as_ref()) {
                    o["notes"] = json!(n);
                }
            }
            o
        })
        .collect();
    Ok(Value::Array(list))
}

pub fn upload(ctx: &mut Ctx) -> ReplyResult<Value> {
    if ctx.params.contains_key("tmpfilename") {
        return Err(ErrorReply::param("tmpfilename", "not allowed"));
    }
    let Some(file) = ctx.upload.clone() else {
        return Err(ErrorReply::param(
            "filename",
            "property is missing and it is not optional",
        ));
    };
    let req = ops::upload::UploadFile {
        node: ctx.node(),
        storage: ctx.str("storage"),
        content: ctx.str("content"),
        file,
        checksum: ctx.opt("checksum"),
        checksum_algorithm: ctx.opt("checksum-algorithm"),
    };
    let who = ctx.who.clone();
    Ok(json!(ops::upload::start(ctx.sim, &who, req)?))
}

/// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`: the UPID of `imgdel`, or `null`.
pub fn delete_volume(ctx: &mut Ctx) -> ReplyResult<Value> {
    let req = ops::volume::DeleteVolume {
        node: ctx.node(),
        storage: ctx.str("storage"),
        volume: ctx.str("volume"),
        delay: ctx.num("delay"),
    };
    let who = ctx.who.clone();
    Ok(match ops::volume::start(ctx.sim, &who, req)? {
        ops::volume::Answer::Upid(upid) => json!(upid),
        ops::volume::Answer::Done => Value::Null,
    })
}

/// `POST /nodes/{node}/vzdump`: the `vzdump` worker's UPID.
pub fn vzdump(ctx: &mut Ctx) -> ReplyResult<Value> {
    let vmids = ctx
        .opt("vmid")
        .unwrap_or_default()
        .split([',', ' ', ';'])
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|_| ErrorReply::param("vmid", "value does not look like a valid VM ID"))
        })
        .collect::<ReplyResult<Vec<u32>>>()?;
    let job = ops::vzdump::BackupJob {
        node: ctx.node(),
        vmids,
        storage: ctx.opt("storage").unwrap_or_else(|| "local".into()),
        mode: ctx.opt("mode").unwrap_or_else(|| "snapshot".into()),
        compress: ctx.opt("compress").unwrap_or_else(|| "0".into()),
        notes_template: ctx.opt("notes-template"),
        remove: ctx.flag_or("remove", true),
        keep_last: ctx
            .opt("prune-backups")
            .and_then(|p| ops::vzdump::keep_last(&p)),
    };
    let who = ctx.who.clone();
    Ok(json!(ops::vzdump::start(ctx.sim, &who, job)?))
}
