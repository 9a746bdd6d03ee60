//! `proxshift.proxmox.proxmox_access`: the least-privilege access objects ProxShift needs on a
//! Proxmox VE cluster — a role with exactly the given privileges, a user, the role on ACL paths, and
//! an API token with privilege separation (plus the token's own ACL entries). Idempotent; check mode
//! and diff; the token secret is returned only when the token is created (Proxmox shows it once).
//!
//! `plan.rs` is the pure part (state → steps); this file reads the state and applies the steps
//! through the shared `pve-client`.

pub mod plan;

use std::collections::BTreeSet;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use pve_client::{Client, Params};
use serde::Deserialize;
use serde_json::{json, Value};

use plan::{Acl, Current, Desired, Step, TokenInfo};

pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("state")
            .default("present")
            .choices(&["present", "absent"]),
        Opt::str("role").required(),
        Opt::list("privileges", Type::Str),
        Opt::str("user").required(),
        Opt::str("token"),
        Opt::bool("privsep").default(true),
        Opt::str("token_comment").default("ProxShift automation"),
        Opt::list("acl_paths", Type::Str).default(json!(["/"])),
        Opt::bool("propagate").default(true),
    ])
    .with(pve_client::connection_options())
    .required_if("state", "present", &["privileges"])
}

#[derive(Debug, Deserialize)]
pub struct Options {
    pub state: String,
    pub role: String,
    pub privileges: Option<Vec<String>>,
    pub user: String,
    pub token: Option<String>,
    pub privsep: bool,
    pub token_comment: String,
    pub acl_paths: Vec<String>,
    pub propagate: bool,
}

impl Options {
    pub fn desired(&self) -> Desired {
        Desired {
            present: self.state == "present",
            role: self.role.trim().to_string(),
            privileges: self
                .privileges
                .iter()
                .flatten()
                .map(|p| p.trim().to_string())
                .collect(),
            user: self.user.trim().to_string(),
            token: self.token.as_ref().map(|t| t.trim().to_string()),
            privsep: self.privsep,
            token_comment: self.token_comment.clone(),
            acl_paths: self.acl_paths.clone(),
            propagate: self.propagate,
        }
    }
}

fn api_err(what: &str, e: pve_client::Error) -> Failure {
    let hint = if e.status() == Some(403) {
        " — the connection's user or token needs Sys.Audit and Permissions.Modify on /, User.Modify on /access/groups and Realm.AllocateUser on the realm (root@pam or an administrator token)"
    } else {
        ""
    };
    Failure::new(format!("{what}: {e}{hint}"))
}

fn as_bool(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_i64() == Some(1),
        Value::String(s) => s == "1",
        _ => false,
    }
}

fn privs(v: &Value) -> BTreeSet<String> {
    v.as_str()
        .unwrap_or_default()
        .split([',', ';', ' '])
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The current state of the managed objects, plus every privilege the server knows (from the
/// built-in Administrator role, which holds them all).
pub fn read(
    client: &Client,
    want: &Desired,
) -> Result<(Current, Option<BTreeSet<String>>), Failure> {
    let roles = client
        .get("/access/roles", &Params::new())
        .map_err(|e| api_err("cannot list roles (GET /access/roles)", e))?;
    let roles = roles.as_array().cloned().unwrap_or_default();
    let role_privs = |id: &str| {
        roles
            .iter()
            .find(|r| r["roleid"].as_str() == Some(id))
            .map(|r| privs(&r["privs"]))
    };
    let known = role_privs("Administrator");
    let users = client
        .get("/access/users", &Params::new().set("full", 1))
        .map_err(|e| api_err("cannot list users (GET /access/users)", e))?;
    let user = users
        .as_array()
        .into_iter()
        .flatten()
        .find(|u| u["userid"].as_str() == Some(&want.user));
    let token = match (&want.token, user) {
        (Some(name), Some(u)) => u["tokens"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["tokenid"].as_str() == Some(name))
            .map(|t| TokenInfo {
                privsep: as_bool(&t["privsep"]),
                comment: t["comment"].as_str().unwrap_or_default().to_string(),
            }),
        _ => None,
    };
    let acls = client
        .get("/access/acl", &Params::new())
        .map_err(|e| api_err("cannot list ACLs (GET /access/acl)", e))?
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| Acl {
            path: a["path"].as_str().unwrap_or_default().to_string(),
            kind: a["type"].as_str().unwrap_or_default().to_string(),
            ugid: a["ugid"].as_str().unwrap_or_default().to_string(),
            role: a["roleid"].as_str().unwrap_or_default().to_string(),
            propagate: as_bool(&a["propagate"]),
        })
        .collect();
    Ok((
        Current {
            role: role_privs(&want.role),
            user_exists: user.is_some(),
            token,
            acls,
        },
        known,
    ))
}

/// Run one step; returns the token secret when the step created the token.
fn apply_step(
    client: &Client,
    want: &Desired,
    step: &Step,
) -> Result<Option<String>, pve_client::Error> {
    let role_path = format!("/access/roles/{}", want.role);
    let token_path = format!(
        "/access/users/{}/token/{}",
        want.user,
        want.token.as_deref().unwrap_or_default()
    );
    match step {
        Step::CreateRole { privs } => {
            client.post(
                "/access/roles",
                &Params::new()
                    .set("roleid", &want.role)
                    .set("privs", privs.join(",")),
            )?;
        }
        Step::UpdateRole { privs } => {
            client.put(&role_path, &Params::new().set("privs", privs.join(",")))?;
        }
        Step::DeleteRole => {
            client.delete(&role_path, &Params::new())?;
        }
        Step::CreateUser => {
            client.post(
                "/access/users",
                &Params::new()
                    .set("userid", &want.user)
                    .set("comment", "ProxShift automation (API tokens only)"),
            )?;
        }
        Step::CreateToken => {
            let data = client.post(
                &token_path,
                &Params::new()
                    .flag("privsep", want.privsep)
                    .set("comment", &want.token_comment),
            )?;
            return Ok(data["value"].as_str().map(str::to_string));
        }
        Step::UpdateToken => {
            client.put(
                &token_path,
                &Params::new()
                    .flag("privsep", want.privsep)
                    .set("comment", &want.token_comment),
            )?;
        }
        Step::DeleteToken => {
            client.delete(&token_path, &Params::new())?;
        }
        Step::Acl { acl, delete } => {
            let who = if acl.kind == "token" {
                "tokens"
            } else {
                "users"
            };
            client.put(
                "/access/acl",
                &Params::new()
                    .set("path", &acl.path)
                    .set("roles", &acl.role)
                    .set(who, &acl.ugid)
                    .flag("propagate", acl.propagate)
                    .flag("delete", *delete),
            )?;
        }
    }
    Ok(None)
}

/// The module against a connected client.
pub fn execute(m: &mut Module, o: &Options, client: &Client) -> Result<Outcome, Failure> {
    let mut want = o.desired();
    let early = plan::validate(&want, None);
    if !early.is_empty() {
        return Err(Failure::new(early.join("; ")));
    }
    let (cur, known) = read(client, &want)?;
    if let Some(known) = &known {
        let (privileges, notes) = plan::in_server_names(&want.privileges, known);
        want.privileges = privileges;
        for n in notes {
            m.warn(n);
        }
    }
    let problems = plan::validate(&want, known.as_ref());
    if !problems.is_empty() {
        return Err(Failure::new(problems.join("; ")));
    }
    let steps = plan::plan(&cur, &want);
    let after = plan::apply(&cur, &want, &steps);
    let actions: Vec<String> = steps.iter().map(|s| s.describe(&want)).collect();
    if !steps.is_empty() {
        m.add_diff(
            plan::view(&cur, &want),
            plan::view(&after, &want),
            "proxmox access (before)",
            "proxmox access (after)",
        );
    }
    let mut secret = None;
    if !m.check_mode {
        for (i, step) in steps.iter().enumerate() {
            match apply_step(client, &want, step) {
                Ok(Some(s)) => secret = Some(s),
                Ok(None) => {}
                Err(e) => {
                    let mut f = api_err(&format!("cannot {}", actions[i]), e)
                        .changed(i > 0)
                        .with("actions", json!(actions[..i]));
                    // A token created before the failure: its secret is shown only now.
                    if let Some(s) = &secret {
                        f = f.with("token_secret", s.clone());
                    }
                    return Err(f);
                }
            }
        }
    }
    let shown = plan::view(&after, &want);
    let mut out = Outcome::new(!steps.is_empty())
        .msg(if steps.is_empty() {
            "access objects are as requested".to_string()
        } else if m.check_mode {
            format!("would {}", actions.join("; "))
        } else {
            actions.join("; ")
        })
        .with("actions", json!(actions))
        .with("role", shown["role"].clone())
        .with("user", shown["user"].clone())
        .with("token", shown["token"].clone())
        .with("acls", shown["acls"].clone());
    if let Some(s) = secret {
        out = out.with("token_secret", s);
    }
    Ok(out)
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let early = plan::validate(&o.desired(), None);
    if !early.is_empty() {
        return Err(Failure::new(early.join("; ")));
    }
    let conn: pve_client::ConnectionOptions = m.options()?;
    let client = pve_client::connect_module(m, &conn)
        .map_err(|e| Failure::new(format!("cannot connect to Proxmox: {e}")))?;
    execute(m, &o, &client)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "proxmox",
            "proxmox_access",
        );
    }
}
