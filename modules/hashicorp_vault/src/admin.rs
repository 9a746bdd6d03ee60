//! `state=policy` and `state=kubernetes_auth`: the Vault side of a cluster's Kubernetes login —
//! an ACL policy, the `kubernetes` auth mount with its config (API URL, CA, token-reviewer JWT) and
//! its roles. Read first, write only what differs, nothing in check mode; decisions in `kube_auth`.

use ansible_module::{Failure, Module, Outcome};
use serde_json::{json, Map, Value};
use vault_client::{clean_path, Vault};

use crate::kube_auth::{
    config_body, config_changes, config_view, policy_differs, role_body, role_changes, role_view,
    ConfigWant, RoleWant,
};
use crate::Options;

/// `state=policy`: ACL policy `name` holds `rules`.
pub fn policy(m: &mut Module, vault: &Vault, o: &Options) -> Result<Outcome, Failure> {
    let name = clean_path(o.name.as_deref().unwrap_or_default());
    let rules = o.rules.as_deref().unwrap_or_default();
    let at = format!("sys/policies/acl/{name}");
    let current = vault
        .acl_policy(&name)
        .map_err(|e| Failure::new(format!("reading policy {name}: {e}")))?;
    if !policy_differs(current.as_deref(), rules) {
        return Ok(Outcome::new(false)
            .msg(format!("policy {name} already holds the rules"))
            .with("path", at));
    }
    m.add_diff(
        json!(current.unwrap_or_default()),
        json!(rules),
        &format!("{at} (current)"),
        &format!("{at} (desired)"),
    );
    if m.check_mode {
        return Ok(Outcome::new(true)
            .msg(format!("policy {name} would be written (check mode)"))
            .with("path", at));
    }
    vault
        .put_acl_policy(&name, rules)
        .map_err(|e| Failure::new(format!("writing policy {name}: {e}")))?;
    Ok(Outcome::new(true)
        .msg(format!("wrote policy {name}"))
        .with("path", at))
}

/// What one run of `state=kubernetes_auth` found and did, in the order it happened.
struct Report {
    changes: Vec<String>,
    before: Map<String, Value>,
    after: Map<String, Value>,
}

impl Report {
    fn record(&mut self, what: String, fields: &[&str], before: Value, after: Value) {
        self.changes.push(format!("{what}: {}", fields.join(", ")));
        self.before.insert(what.clone(), before);
        self.after.insert(what, after);
    }
}

/// `state=kubernetes_auth`: the `kubernetes` auth method at `auth/<auth_mount>`, its config and roles.
pub fn kubernetes_auth(m: &mut Module, vault: &Vault, o: &Options) -> Result<Outcome, Failure> {
    let mount = clean_path(o.auth_mount.as_deref().unwrap_or_default());
    let roles: Vec<RoleWant> = o.roles.clone().unwrap_or_default();
    let want = ConfigWant {
        kubernetes_host: o.kubernetes_host.clone().unwrap_or_default(),
        kubernetes_ca_cert: o.kubernetes_ca_cert.clone(),
        reviewer_jwt: o.token_reviewer_jwt.is_some(),
    };
    let mut report = Report {
        changes: Vec::new(),
        before: Map::new(),
        after: Map::new(),
    };
    let here = format!("auth/{mount}");
    let kind = vault
        .auth_mount_type(&mount)
        .map_err(|e| Failure::new(format!("reading the auth mounts to find {here}: {e}")))?;
    let fresh = match kind.as_deref() {
        Some("kubernetes") => false,
        Some(other) => {
            return Err(Failure::new(format!(
            "{here} is an auth method of type {other}, not kubernetes; choose another auth_mount"
        )))
        }
        None => {
            report.record(
                here.clone(),
                &["enabled"],
                json!({}),
                json!({"type": "kubernetes"}),
            );
            if !m.check_mode {
                vault
                    .enable_auth(
                        &mount,
                        "kubernetes",
                        "ProxShift: service accounts of one cluster",
                    )
                    .map_err(|e| {
                        Failure::new(format!(
                            "enabling the kubernetes auth method at {here}: {e}"
                        ))
                    })?;
            }
            true
        }
    };
    // A mount this run created (or, in check mode, would create) has no config and no roles yet.
    let read = |path: &str| -> Result<Option<Value>, Failure> {
        if fresh {
            return Ok(None);
        }
        let v = vault
            .read_optional(path)
            .map_err(|e| Failure::new(format!("reading {path}: {e}")))?;
        Ok(v.map(|v| v["data"].clone()))
    };
    let config_at = format!("{here}/config");
    let current = read(&config_at)?;
    let fields = config_changes(current.as_ref(), &want);
    if !fields.is_empty() {
        report.record(
            config_at.clone(),
            &fields,
            config_view(current.as_ref(), None),
            config_view(None, Some(&want)),
        );
        if !m.check_mode {
            let body = config_body(&want, o.token_reviewer_jwt.as_deref());
            vault
                .write(&config_at, &body)
                .map_err(|e| Failure::new(format!("writing {config_at}: {e}")))?;
        }
    }
    for role in &roles {
        let role_at = format!("{here}/role/{}", clean_path(&role.name));
        let current = read(&role_at)?;
        let fields = role_changes(current.as_ref(), role);
        if fields.is_empty() {
            continue;
        }
        let body = role_body(role);
        report.record(
            role_at.clone(),
            &fields,
            role_view(current.as_ref()),
            body.clone(),
        );
        if !m.check_mode {
            vault
                .write(&role_at, &body)
                .map_err(|e| Failure::new(format!("writing {role_at}: {e}")))?;
        }
    }
    let changed = !report.changes.is_empty();
    if changed {
        m.add_diff(
            Value::Object(report.before),
            Value::Object(report.after),
            &format!("{here} (current)"),
            &format!("{here} (desired)"),
        );
    }
    let msg = match (changed, m.check_mode) {
        (false, _) => format!("{here} already has the desired config and roles"),
        (true, true) => format!(
            "{here} would change (check mode): {}",
            report.changes.join("; ")
        ),
        (true, false) => format!("{here} changed: {}", report.changes.join("; ")),
    };
    Ok(Outcome::new(changed)
        .msg(msg)
        .with("path", here)
        .with("auth_changes", json!(report.changes)))
}
