//! `/access/users` writes and `/access/users/{userid}`: creating a user and reading one, as
//! `pveum user add` / `pveum user list` do (permissions are checked from the schema before this runs).

use serde_json::{json, Map, Value};

use crate::error::{ErrorReply, ReplyResult};
use crate::model::User;
use crate::server::Ctx;

/// Realms a simulated cluster has (upstream's defaults).
const REALMS: [&str; 2] = ["pam", "pve"];

pub fn user_create(ctx: &mut Ctx) -> ReplyResult<Value> {
    let userid = ctx.str("userid");
    let realm = userid.rsplit_once('@').map(|(_, r)| r).unwrap_or_default();
    if !REALMS.contains(&realm) {
        return Err(ErrorReply::die(format!(
            "create user failed: domain '{realm}' does not exist"
        )));
    }
    if ctx.sim.access.users.contains_key(&userid) {
        return Err(ErrorReply::die(format!(
            "create user failed: user '{userid}' already exists"
        )));
    }
    let password = ctx.opt("password");
    if password.is_some() && realm == "pam" {
        // Upstream sets passwords only for the pve realm; PAM users are the host's.
        return Err(ErrorReply::die(
            "create user failed: setting the password of a PAM user is not supported here",
        ));
    }
    let groups: Vec<String> = ctx
        .opt("groups")
        .map(|g| {
            g.split([',', ';', ' '])
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let user = User {
        userid: userid.clone(),
        password,
        enable: ctx.flag_or("enable", true),
        groups,
        expire: ctx.num("expire").unwrap_or(0),
    };
    ctx.sim.access.users.insert(userid, user);
    Ok(Value::Null)
}

pub fn user_get(ctx: &mut Ctx) -> ReplyResult<Value> {
    let userid = ctx.str("userid");
    let a = &ctx.sim.access;
    let u = a
        .users
        .get(&userid)
        .ok_or_else(|| ErrorReply::die(format!("no such user ('{userid}')")))?;
    let tokens: Map<String, Value> = a
        .tokens
        .values()
        .filter(|t| t.userid == userid)
        .map(|t| {
            let mut info = super::access::token_info(t);
            info.as_object_mut().map(|o| o.remove("tokenid"));
            (t.tokenid.clone(), info)
        })
        .collect();
    Ok(json!({
        "enable": if u.enable { 1 } else { 0 },
        "expire": u.expire,
        "groups": u.groups,
        "tokens": tokens,
    }))
}
