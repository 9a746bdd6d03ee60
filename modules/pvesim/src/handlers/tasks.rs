//! `/nodes/{node}/tasks*`.

use serde_json::{json, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::server::{Ctx, Reply};
use crate::tasks::{decode_upid, Task};

/// Looks up a task by UPID on the node encoded in it; non-owners need Sys.Audit.
fn find<'a>(ctx: &'a Ctx, audit_priv: &str) -> ReplyResult<&'a Task> {
    let upid = ctx.str("upid");
    let Some((node, ..)) = decode_upid(&upid) else {
        return Err(ErrorReply::die(format!(
            "unable to parse worker upid '{upid}'"
        )));
    };
    if node != ctx.node() {
        return Err(ErrorReply::die("no such task"));
    }
    let t = ctx
        .sim
        .task(&upid)
        .ok_or_else(|| ErrorReply::die("no such task"))?;
    let owner = t.user == ctx.who.userid && t.tokenid == ctx.who.tokenid;
    if !owner {
        ctx.sim
            .access
            .require(&ctx.who, &format!("/nodes/{node}"), &[audit_priv], false)?;
    }
    Ok(t)
}

pub fn status(ctx: &mut Ctx) -> ReplyResult<Value> {
    Ok(find(ctx, "Sys.Audit")?.status_json())
}

/// Log lines; like PVE the reply carries `total` (all lines) next to `data` (the page).
pub fn log(ctx: &mut Ctx) -> ReplyResult<Reply> {
    let start = ctx.num("start").unwrap_or(0) as usize;
    let limit = ctx.num("limit").unwrap_or(50) as usize;
    let t = find(ctx, "Sys.Audit")?;
    let lines = t.log_lines();
    let total = lines.len();
    let page: Vec<Value> = lines
        .into_iter()
        .enumerate()
        .skip(start)
        .take(if limit == 0 { usize::MAX } else { limit })
        .map(|(i, l)| json!({"n": i + 1, "t": l}))
        .collect();
    let mut reply = Reply::from(Value::Array(page));
    reply.extra.insert("total".into(), json!(total));
    Ok(reply)
}

pub fn stop(ctx: &mut Ctx) -> ReplyResult<Value> {
    let upid = find(ctx, "Sys.Modify")?.upid.clone();
    ctx.sim.abort_task(&upid);
    Ok(Value::Null)
}

pub fn list(ctx: &mut Ctx) -> ReplyResult<Reply> {
    let node = ctx.node();
    let vmid = ctx.opt("vmid");
    let typefilter = ctx.opt("typefilter");
    let userfilter = ctx.opt("userfilter");
    let errors = ctx.flag("errors");
    let source = ctx.opt("source").unwrap_or_else(|| "archive".into());
    let start = ctx.num("start").unwrap_or(0) as usize;
    let limit = ctx.num("limit").unwrap_or(50) as usize;
    let audit = ctx
        .sim
        .access
        .has(&ctx.who, &format!("/nodes/{node}"), "Sys.Audit");
    let mut items: Vec<&Task> = ctx
        .sim
        .tasks
        .iter()
        .filter(|t| t.node == node)
        .filter(|t| audit || (t.user == ctx.who.userid && t.tokenid == ctx.who.tokenid))
        .filter(|t| vmid.as_deref().map(|v| t.id == v).unwrap_or(true))
        .filter(|t| typefilter.as_deref().map(|f| t.kind == f).unwrap_or(true))
        .filter(|t| {
            userfilter
                .as_deref()
                .map(|u| t.user.contains(u))
                .unwrap_or(true)
        })
        .filter(|t| !errors || t.exitstatus.as_deref().map(|e| e != "OK").unwrap_or(false))
        .filter(|t| match source.as_str() {
            "active" => t.running(),
            "all" => true,
            _ => !t.running(),
        })
        .collect();
    items.sort_by(|a, b| b.starttime.cmp(&a.starttime).then(b.pid.cmp(&a.pid)));
    let total = items.len();
    let page = items
        .into_iter()
        .skip(start)
        .take(limit)
        .map(Task::list_json)
        .collect();
    let mut reply = Reply::from(Value::Array(page));
    reply.extra.insert("total".into(), json!(total));
    Ok(reply)
}
