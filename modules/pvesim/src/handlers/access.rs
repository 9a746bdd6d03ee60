//! `/access/*`: tickets, users, API tokens, roles, ACLs, permissions.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::model::{AclEntry, Token};
use crate::server::Ctx;
use crate::vmconfig::uuid_v4;

pub fn ticket(ctx: &mut Ctx) -> ReplyResult<Value> {
    let mut username = ctx.str("username");
    if let Some(realm) = ctx.opt("realm") {
        if !username.contains('@') {
            username = format!("{username}@{realm}");
        }
    }
    let password = ctx.str("password");
    let now = ctx.sim.unix_now();
    let access = &ctx.sim.access;
    // Posting a still-valid ticket as the password renews it.
    let renewed = access
        .verify_ticket(&password, now)
        .map(|(u, _)| u == username)
        .unwrap_or(false);
    if !renewed && !access.check_password(&username, &password, now) {
        return Err(ErrorReply::new(401, "authentication failure"));
    }
    let ticket = access.new_ticket(&username, now);
    let csrf = access.csrf_token(&username, now);
    let who = Principal {
        userid: username.clone(),
        tokenid: None,
        via_ticket: true,
    };
    let vms: Map<String, Value> = [
        "VM.Allocate",
        "VM.Audit",
        "VM.PowerMgmt",
        "VM.Config.Disk",
        "VM.Clone",
    ]
    .iter()
    .filter(|p| access.has(&who, "/vms", p))
    .map(|p| (p.to_string(), json!(1)))
    .collect();
    Ok(json!({
        "username": username,
        "ticket": ticket,
        "CSRFPreventionToken": csrf,
        "clustername": ctx.sim.cluster.name,
        "cap": {"vms": vms},
    }))
}

pub fn users(ctx: &mut Ctx) -> ReplyResult<Value> {
    let full = ctx.flag("full");
    let a = &ctx.sim.access;
    let can_all =
        a.has(&ctx.who, "/access/groups", "User.Modify") || a.has(&ctx.who, "/access", "Sys.Audit");
    let list = a
        .users
        .values()
        .filter(|u| can_all || u.userid == ctx.who.userid)
        .map(|u| {
            let mut o = json!({"userid": u.userid, "enable": if u.enable { 1 } else { 0 }, "expire": u.expire,
                "realm-type": u.userid.rsplit('@').next().unwrap_or("pve")});
            if !u.groups.is_empty() {
                o["groups"] = json!(u.groups.join(","));
            }
            if full {
                let toks: Vec<Value> = a.tokens.values().filter(|t| t.userid == u.userid).map(token_info).collect();
                o["tokens"] = json!(toks);
            }
            o
        })
        .collect();
    Ok(Value::Array(list))
}

pub(super) fn token_info(t: &Token) -> Value {
    let mut o =
        json!({"tokenid": t.tokenid, "privsep": if t.privsep { 1 } else { 0 }, "expire": t.expire});
    if let Some(c) = &t.comment {
        o["comment"] = json!(c);
    }
    o
}

fn user_must_exist(ctx: &Ctx) -> ReplyResult<String> {
    let userid = ctx.str("userid");
    if !ctx.sim.access.users.contains_key(&userid) {
        return Err(ErrorReply::die(format!("no such user ('{userid}')")));
    }
    Ok(userid)
}

pub fn token_list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let userid = user_must_exist(ctx)?;
    Ok(Value::Array(
        ctx.sim
            .access
            .tokens
            .values()
            .filter(|t| t.userid == userid)
            .map(token_info)
            .collect(),
    ))
}

fn full_id(ctx: &Ctx) -> String {
    format!("{}!{}", ctx.str("userid"), ctx.str("tokenid"))
}

fn no_such_token(ctx: &Ctx) -> ErrorReply {
    ErrorReply::die(format!(
        "no such token '{}' for user '{}'",
        ctx.str("tokenid"),
        ctx.str("userid")
    ))
}

pub fn token_get(ctx: &mut Ctx) -> ReplyResult<Value> {
    user_must_exist(ctx)?;
    let t = ctx
        .sim
        .access
        .tokens
        .get(&full_id(ctx))
        .ok_or_else(|| no_such_token(ctx))?;
    let mut v = token_info(t);
    v.as_object_mut().unwrap().remove("tokenid");
    Ok(v)
}

pub fn token_create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let userid = user_must_exist(ctx)?;
    let id = full_id(ctx);
    if ctx.sim.access.tokens.contains_key(&id) {
        return Err(ErrorReply::die(format!(
            "Token '{}' for user '{userid}' already exists.",
            ctx.str("tokenid")
        )));
    }
    let t = Token {
        userid,
        tokenid: ctx.str("tokenid"),
        secret: uuid_v4(),
        privsep: ctx.flag_or("privsep", true),
        expire: ctx.num("expire").unwrap_or(0),
        comment: ctx.opt("comment"),
    };
    let secret = t.secret.clone();
    let mut info = token_info(&t);
    info.as_object_mut().unwrap().remove("tokenid");
    ctx.sim.access.tokens.insert(id.clone(), t);
    Ok(json!({"full-tokenid": id, "info": info, "value": secret}))
}

pub fn token_update(ctx: &mut Ctx) -> ReplyResult<Value> {
    user_must_exist(ctx)?;
    let id = full_id(ctx);
    let (privsep, expire, comment) = (ctx.opt("privsep"), ctx.num("expire"), ctx.opt("comment"));
    let err = no_such_token(ctx);
    let t = ctx.sim.access.tokens.get_mut(&id).ok_or(err)?;
    if let Some(p) = privsep {
        t.privsep = p == "1";
    }
    if let Some(e) = expire {
        t.expire = e;
    }
    if let Some(c) = comment {
        t.comment = Some(c);
    }
    let mut v = token_info(t);
    v.as_object_mut().unwrap().remove("tokenid");
    Ok(v)
}

pub fn token_delete(ctx: &mut Ctx) -> ReplyResult<Value> {
    user_must_exist(ctx)?;
    let id = full_id(ctx);
    if ctx.sim.access.tokens.remove(&id).is_none() {
        return Err(no_such_token(ctx));
    }
    ctx.sim
        .access
        .acl
        .retain(|a| !(a.kind == "token" && a.ugid == id));
    Ok(Value::Null)
}

/// pve-access-control `verify_privname`: "invalid privilege" for a name the release does not know.
fn privs_list(ctx: &Ctx, s: &str) -> ReplyResult<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for p in s.split([',', ';', ' ']).filter(|p| !p.is_empty()) {
        if !ctx.sim.access.is_privilege(p) {
            return Err(ErrorReply::die(format!("invalid privilege '{p}'")));
        }
        out.insert(p.to_string());
    }
    Ok(out)
}

pub fn roles(ctx: &mut Ctx) -> ReplyResult<Value> {
    let a = &ctx.sim.access;
    Ok(Value::Array(
        a.roles
            .iter()
            .map(|(id, p)| {
                json!({"roleid": id, "privs": p.iter().cloned().collect::<Vec<_>>().join(","),
                    "special": if a.builtin.contains(id) { 1 } else { 0 }})
            })
            .collect(),
    ))
}

/// pve-access-control `PVE::AccessControl::lock_user_config($code, $errmsg)`: a `die` inside the
/// locked section comes out as `"$errmsg: $err"` (the same in PVE 8 and 9).
fn user_config_failed(what: &str, err: ErrorReply) -> ErrorReply {
    ErrorReply::die(format!("{what}: {}", err.message))
}

/// `PVE/API2/Role.pm` `create_role`.
pub fn role_create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("roleid");
    if id.to_ascii_lowercase().starts_with("pve") {
        return Err(ErrorReply::param(
            "roleid",
            "cannot use role ID starting with the (case-insensitive) 'PVE' namespace",
        ));
    }
    let locked = || -> ReplyResult<BTreeSet<String>> {
        if ctx.sim.access.roles.contains_key(&id) {
            return Err(ErrorReply::die(format!("role '{id}' already exists")));
        }
        privs_list(ctx, &ctx.str("privs"))
    };
    let privs = locked().map_err(|e| user_config_failed("create role failed", e))?;
    ctx.sim.access.roles.insert(id, privs);
    Ok(Value::Null)
}

pub fn role_get(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("roleid");
    let p = ctx
        .sim
        .access
        .roles
        .get(&id)
        .ok_or_else(|| ErrorReply::die(format!("role '{id}' does not exist")))?;
    Ok(Value::Object(
        p.iter().map(|p| (p.clone(), json!(1))).collect(),
    ))
}

/// `PVE/API2/Role.pm` `update_role`: special roles are refused before the lock.
pub fn role_update(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("roleid");
    if ctx.sim.access.builtin.contains(&id) {
        return Err(ErrorReply::die(format!(
            "auto-generated role '{id}' cannot be modified"
        )));
    }
    let locked = || -> ReplyResult<BTreeSet<String>> {
        if !ctx.sim.access.roles.contains_key(&id) {
            return Err(ErrorReply::die(format!("role '{id}' does not exist")));
        }
        privs_list(ctx, &ctx.str("privs"))
    };
    let privs = locked().map_err(|e| user_config_failed("update role failed", e))?;
    let append = ctx.flag("append");
    if let Some(r) = ctx.sim.access.roles.get_mut(&id) {
        if !append {
            r.clear();
        }
        r.extend(privs);
    }
    Ok(Value::Null)
}

/// `PVE/API2/Role.pm` `delete_role`.
pub fn role_delete(ctx: &mut Ctx) -> ReplyResult<Value> {
    let id = ctx.str("roleid");
    if ctx.sim.access.builtin.contains(&id) {
        return Err(ErrorReply::die(format!(
            "auto-generated role '{id}' cannot be deleted"
        )));
    }
    if ctx.sim.access.roles.remove(&id).is_none() {
        return Err(user_config_failed(
            "delete role failed",
            ErrorReply::die(format!("role '{id}' does not exist")),
        ));
    }
    ctx.sim.access.acl.retain(|a| a.roleid != id);
    Ok(Value::Null)
}

pub fn acl_list(ctx: &mut Ctx) -> ReplyResult<Value> {
    let a = &ctx.sim.access;
    Ok(Value::Array(
        a.acl
            .iter()
            .filter(|e| {
                a.has(&ctx.who, &e.path, "Permissions.Modify")
                    || a.has(&ctx.who, &e.path, "Sys.Audit")
            })
            .map(|e| {
                json!({"path": e.path, "type": e.kind, "ugid": e.ugid, "roleid": e.roleid,
                    "propagate": if e.propagate { 1 } else { 0 }})
            })
            .collect(),
    ))
}

pub fn acl_update(ctx: &mut Ctx) -> ReplyResult<Value> {
    let path = ctx.str("path");
    let delete = ctx.flag("delete");
    let propagate = ctx.flag_or("propagate", true);
    let split = |s: Option<String>| -> Vec<String> {
        s.map(|s| {
            s.split([',', ';', ' '])
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
    };
    let roles = split(ctx.opt("roles"));
    let mut subjects: Vec<(&str, String)> = Vec::new();
    subjects.extend(split(ctx.opt("users")).into_iter().map(|u| ("user", u)));
    subjects.extend(split(ctx.opt("groups")).into_iter().map(|g| ("group", g)));
    subjects.extend(split(ctx.opt("tokens")).into_iter().map(|t| ("token", t)));
    if subjects.is_empty() {
        return Err(ErrorReply::die(
            "either 'users', 'groups' or 'tokens' is required",
        ));
    }
    let a = &mut ctx.sim.access;
    for r in &roles {
        if !a.roles.contains_key(r) {
            return Err(ErrorReply::die(format!("role '{r}' does not exist")));
        }
    }
    for (kind, ugid) in &subjects {
        match *kind {
            "user" if !a.users.contains_key(ugid) => {
                return Err(ErrorReply::die(format!("user '{ugid}' does not exist")))
            }
            "token" if !a.tokens.contains_key(ugid) => {
                return Err(ErrorReply::die(format!("no such token '{ugid}'")))
            }
            _ => {}
        }
        for r in &roles {
            a.acl.retain(|e| {
                !(e.path == path && e.kind == *kind && e.ugid == *ugid && e.roleid == *r)
            });
            if !delete {
                a.acl.push(AclEntry {
                    path: path.clone(),
                    kind: kind.to_string(),
                    ugid: ugid.clone(),
                    roleid: r.clone(),
                    propagate,
                });
            }
        }
    }
    Ok(Value::Null)
}

pub fn permissions(ctx: &mut Ctx) -> ReplyResult<Value> {
    let who = match ctx.opt("userid") {
        Some(id) => {
            let (userid, tokenid) = match id.split_once('!') {
                Some((u, t)) => (u.to_string(), Some(t.to_string())),
                None => (id.clone(), None),
            };
            if id != ctx.who.auth_id() && !ctx.sim.access.has(&ctx.who, "/access", "Sys.Audit") {
                return Err(ErrorReply::perm("/access, Sys.Audit"));
            }
            Principal {
                userid,
                tokenid,
                via_ticket: false,
            }
        }
        None => ctx.who.clone(),
    };
    let a = &ctx.sim.access;
    let mut paths: BTreeSet<String> = a.acl.iter().map(|e| e.path.clone()).collect();
    paths.extend([
        "/".to_string(),
        "/vms".into(),
        "/storage".into(),
        "/nodes".into(),
        "/access".into(),
    ]);
    if let Some(p) = ctx.opt("path") {
        paths = [p].into_iter().collect();
    }
    let mut out = Map::new();
    for p in paths {
        let privs: Map<String, Value> = a
            .privs(&who, &p)
            .into_iter()
            .map(|x| (x, json!(1)))
            .collect();
        if !privs.is_empty() {
            out.insert(p, Value::Object(privs));
        }
    }
    Ok(Value::Object(out))
}
