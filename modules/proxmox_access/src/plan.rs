//! Pure planning: the access objects Proxmox has now, the ones the task wants, and the API calls
//! between them. No I/O; the caller reads the state and applies the steps.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// One ACL entry as `GET /access/acl` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Acl {
    pub path: String,
    /// `user`, `group` or `token`
    pub kind: String,
    pub ugid: String,
    pub role: String,
    pub propagate: bool,
}

impl Acl {
    pub fn to_json(&self) -> Value {
        json!({"path": self.path, "type": self.kind, "ugid": self.ugid, "roleid": self.role,
               "propagate": self.propagate})
    }
}

/// A token of the user as Proxmox lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    pub privsep: bool,
    pub comment: String,
}

/// What exists now, for the objects this task manages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Current {
    /// The role's privileges, `None` when the role does not exist.
    pub role: Option<BTreeSet<String>>,
    pub user_exists: bool,
    pub token: Option<TokenInfo>,
    /// Every ACL entry (the plan picks the ones it manages).
    pub acls: Vec<Acl>,
}

/// What the task asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub present: bool,
    pub role: String,
    pub privileges: BTreeSet<String>,
    pub user: String,
    /// Token name (no `!`).
    pub token: Option<String>,
    pub privsep: bool,
    pub token_comment: String,
    pub acl_paths: Vec<String>,
    pub propagate: bool,
}

impl Desired {
    pub fn full_token_id(&self) -> Option<String> {
        self.token.as_ref().map(|t| format!("{}!{t}", self.user))
    }

    /// The ACL entries this task manages: the role for the user on each path, and for the token too
    /// when it has privilege separation (a separated token has only its own ACLs).
    pub fn acls(&self) -> Vec<Acl> {
        let mut out = Vec::new();
        for path in &self.acl_paths {
            let mut add = |kind: &str, ugid: String| {
                out.push(Acl {
                    path: path.clone(),
                    kind: kind.into(),
                    ugid,
                    role: self.role.clone(),
                    propagate: self.propagate,
                })
            };
            add("user", self.user.clone());
            if self.privsep {
                if let Some(id) = self.full_token_id() {
                    add("token", id);
                }
            }
        }
        out
    }
}

/// One API call, in the order they must run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    CreateRole {
        privs: Vec<String>,
    },
    UpdateRole {
        privs: Vec<String>,
    },
    DeleteRole,
    CreateUser,
    CreateToken,
    UpdateToken,
    DeleteToken,
    /// `PUT /access/acl`, `delete` for removal.
    Acl {
        acl: Acl,
        delete: bool,
    },
}

impl Step {
    /// A line for the `actions` return value.
    pub fn describe(&self, d: &Desired) -> String {
        let token = d.full_token_id().unwrap_or_default();
        match self {
            Step::CreateRole { privs } => format!("create role {} ({})", d.role, privs.join(",")),
            Step::UpdateRole { privs } => {
                format!(
                    "set the privileges of role {} to {}",
                    d.role,
                    privs.join(",")
                )
            }
            Step::DeleteRole => format!("delete role {}", d.role),
            Step::CreateUser => format!("create user {}", d.user),
            Step::CreateToken => format!(
                "create API token {token} (privilege separation {})",
                if d.privsep { "on" } else { "off" }
            ),
            Step::UpdateToken => format!(
                "update API token {token} (privilege separation {}, comment)",
                if d.privsep { "on" } else { "off" }
            ),
            Step::DeleteToken => format!("delete API token {token}"),
            Step::Acl { acl, delete } => format!(
                "{} ACL {} {} {} on {}{}",
                if *delete { "remove" } else { "grant" },
                acl.role,
                acl.kind,
                acl.ugid,
                acl.path,
                if acl.propagate || *delete {
                    ""
                } else {
                    " (no propagation)"
                }
            ),
        }
    }
}

fn same_entry(a: &Acl, b: &Acl) -> bool {
    a.path == b.path && a.kind == b.kind && a.ugid == b.ugid && a.role == b.role
}

/// The calls that take `cur` to `want`, in a safe order: role, user and token before the ACLs
/// that name them; on removal, ACLs and the token before the role.
pub fn plan(cur: &Current, want: &Desired) -> Vec<Step> {
    let mut steps = Vec::new();
    let wanted = want.acls();
    if want.present {
        let privs: Vec<String> = want.privileges.iter().cloned().collect();
        match &cur.role {
            None => steps.push(Step::CreateRole { privs }),
            Some(have) if *have != want.privileges => steps.push(Step::UpdateRole { privs }),
            Some(_) => {}
        }
        if !cur.user_exists {
            steps.push(Step::CreateUser);
        }
        if want.token.is_some() {
            match &cur.token {
                None => steps.push(Step::CreateToken),
                Some(t) if t.privsep != want.privsep || t.comment != want.token_comment => {
                    steps.push(Step::UpdateToken)
                }
                Some(_) => {}
            }
        }
        for acl in &wanted {
            if !cur.acls.iter().any(|a| a == acl) {
                steps.push(Step::Acl {
                    acl: acl.clone(),
                    delete: false,
                });
            }
        }
        // A token that lost privilege separation keeps no ACL of its own for this role.
        if !want.privsep {
            if let Some(id) = want.full_token_id() {
                for a in cur
                    .acls
                    .iter()
                    .filter(|a| a.kind == "token" && a.ugid == id && a.role == want.role)
                {
                    steps.push(Step::Acl {
                        acl: a.clone(),
                        delete: true,
                    });
                }
            }
        }
    } else {
        // Every managed entry that exists, whatever its propagate flag or token mode.
        let mut managed = wanted.clone();
        if let Some(id) = want.full_token_id() {
            managed.extend(want.acl_paths.iter().map(|p| Acl {
                path: p.clone(),
                kind: "token".into(),
                ugid: id.clone(),
                role: want.role.clone(),
                propagate: true,
            }));
        }
        for a in &cur.acls {
            if managed.iter().any(|m| same_entry(m, a))
                && !steps
                    .iter()
                    .any(|s| matches!(s, Step::Acl { acl, .. } if same_entry(acl, a)))
            {
                steps.push(Step::Acl {
                    acl: a.clone(),
                    delete: true,
                });
            }
        }
        if want.token.is_some() && cur.token.is_some() {
            steps.push(Step::DeleteToken);
        }
        if cur.role.is_some() {
            steps.push(Step::DeleteRole);
        }
    }
    steps
}

/// The managed objects as a diff side.
pub fn view(cur: &Current, want: &Desired) -> Value {
    let managed: Vec<Value> = cur
        .acls
        .iter()
        .filter(|a| {
            a.role == want.role
                && (a.ugid == want.user || Some(&a.ugid) == want.full_token_id().as_ref())
        })
        .map(Acl::to_json)
        .collect();
    json!({
        "role": cur.role.as_ref().map(|p| json!({"roleid": want.role, "privileges": p.iter().collect::<Vec<_>>()})),
        "user": if cur.user_exists { json!(want.user) } else { Value::Null },
        "token": cur.token.as_ref().map(|t| json!({"full_tokenid": want.full_token_id(), "privsep": t.privsep, "comment": t.comment})),
        "acls": managed,
    })
}

/// `cur` after `steps` (for the diff's "after" side and check mode's result).
pub fn apply(cur: &Current, want: &Desired, steps: &[Step]) -> Current {
    let mut next = cur.clone();
    for s in steps {
        match s {
            Step::CreateRole { privs } | Step::UpdateRole { privs } => {
                next.role = Some(privs.iter().cloned().collect())
            }
            Step::DeleteRole => {
                next.role = None;
                next.acls.retain(|a| a.role != want.role);
            }
            Step::CreateUser => next.user_exists = true,
            Step::CreateToken | Step::UpdateToken => {
                next.token = Some(TokenInfo {
                    privsep: want.privsep,
                    comment: want.token_comment.clone(),
                })
            }
            Step::DeleteToken => {
                next.token = None;
                let id = want.full_token_id();
                next.acls
                    .retain(|a| !(a.kind == "token" && Some(&a.ugid) == id.as_ref()));
            }
            Step::Acl { acl, delete } => {
                next.acls.retain(|a| !same_entry(a, acl));
                if !delete {
                    next.acls.push(acl.clone());
                }
            }
        }
    }
    next
}

/// The privileges in the names the server's release uses, with a note per name replaced.
///
/// pve-access-control `PVE/AccessControl.pm`, `$privgroups`: PVE 9 (libpve-access-control 9.0.3,
/// commits 922f7105 "add VM.GuestAgent privileges" and 07069454 "privileges: drop VM.Monitor")
/// split PVE 8's `VM.Monitor` into `VM.GuestAgent.*`, and each release refuses the other's
/// names ("invalid privilege"). So on PVE 8 any `VM.GuestAgent.*` asked for becomes
/// `VM.Monitor` (qemu-server 8 guards every guest agent call with it), and on PVE 9
/// `VM.Monitor` becomes `VM.GuestAgent.Audit` (its read-only part: the narrowest that keeps the
/// agent readable). Other unknown names are left for [`validate`] to report.
pub fn in_server_names(
    privileges: &BTreeSet<String>,
    known: &BTreeSet<String>,
) -> (BTreeSet<String>, Vec<String>) {
    let mut out = BTreeSet::new();
    let mut notes = Vec::new();
    for p in privileges {
        let replacement = match p.as_str() {
            _ if known.contains(p) => None,
            g if g.starts_with("VM.GuestAgent.") && known.contains("VM.Monitor") => {
                Some("VM.Monitor")
            }
            "VM.Monitor" if known.contains("VM.GuestAgent.Audit") => Some("VM.GuestAgent.Audit"),
            _ => None,
        };
        match replacement {
            Some(r) => {
                notes.push(format!(
                    "privileges: this Proxmox VE has no '{p}'; '{r}' is its name for it here"
                ));
                out.insert(r.to_string());
            }
            None => {
                out.insert(p.clone());
            }
        }
    }
    (out, notes)
}

/// Problems with the requested names and privileges, all at once.
pub fn validate(want: &Desired, known_privs: Option<&BTreeSet<String>>) -> Vec<String> {
    let ident = |s: &str| {
        let mut c = s.chars();
        c.next().is_some_and(|f| f.is_ascii_alphabetic())
            && c.all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
    };
    let mut errs = Vec::new();
    if !ident(&want.role) {
        errs.push(format!(
            "role '{}' is not a valid role ID (a letter, then letters, digits, '-', '_' or '.')",
            want.role
        ));
    }
    match want.user.rsplit_once('@') {
        Some((name, realm)) if !name.is_empty() && ident(realm) && !name.contains('!') => {}
        _ => errs.push(format!(
            "user '{}' must be user@realm (for example proxshift@pve)",
            want.user
        )),
    }
    if let Some(t) = &want.token {
        if !ident(t) {
            errs.push(format!(
                "token '{t}' is not a valid token name (a letter, then letters, digits, '-', '_' or '.'); give the name only, not user!name"
            ));
        }
    }
    if want.present && want.privileges.is_empty() {
        errs.push("privileges must list at least one privilege when state=present".into());
    }
    if let Some(known) = known_privs {
        for p in want.privileges.iter().filter(|p| !known.contains(*p)) {
            errs.push(format!(
                "privileges: '{p}' is not a privilege this Proxmox VE knows"
            ));
        }
    }
    for p in &want.acl_paths {
        if !p.starts_with('/') {
            errs.push(format!("acl_paths: '{p}' must start with '/'"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want() -> Desired {
        Desired {
            present: true,
            role: "ProxShift".into(),
            privileges: ["VM.Audit", "VM.Allocate"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            user: "proxshift@pve".into(),
            token: Some("ansible".into()),
            privsep: true,
            token_comment: "ProxShift".into(),
            acl_paths: vec!["/".into()],
            propagate: true,
        }
    }

    fn acl(kind: &str, ugid: &str, role: &str) -> Acl {
        Acl {
            path: "/".into(),
            kind: kind.into(),
            ugid: ugid.into(),
            role: role.into(),
            propagate: true,
        }
    }

    /// Everything `want()` asks for, already there (privilege-separated token, both ACL entries).
    fn converged(w: &Desired) -> Current {
        Current {
            role: Some(w.privileges.clone()),
            user_exists: true,
            token: Some(TokenInfo {
                privsep: true,
                comment: "ProxShift".into(),
            }),
            acls: vec![
                acl("user", "proxshift@pve", "ProxShift"),
                acl("token", "proxshift@pve!ansible", "ProxShift"),
            ],
        }
    }

    #[test]
    fn from_nothing_creates_everything_in_order() {
        let steps = plan(&Current::default(), &want());
        let text: Vec<String> = steps.iter().map(|s| s.describe(&want())).collect();
        assert_eq!(
            text,
            [
                "create role ProxShift (VM.Allocate,VM.Audit)",
                "create user proxshift@pve",
                "create API token proxshift@pve!ansible (privilege separation on)",
                "grant ACL ProxShift user proxshift@pve on /",
                "grant ACL ProxShift token proxshift@pve!ansible on /",
            ]
        );
        // Applying the steps reaches a state with nothing left to do.
        let after = apply(&Current::default(), &want(), &steps);
        assert_eq!(plan(&after, &want()), vec![]);
    }

    #[test]
    fn converged_state_needs_nothing_and_drift_is_fixed() {
        let w = want();
        let mut cur = converged(&w);
        cur.acls.push(acl("user", "other@pve", "PVEAdmin"));
        assert_eq!(plan(&cur, &w), vec![]);
        let mut drift = cur.clone();
        drift.role = Some(
            ["VM.Audit", "Sys.Modify"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
        drift.acls[1].propagate = false;
        let steps = plan(&drift, &w);
        assert_eq!(
            steps,
            vec![
                Step::UpdateRole {
                    privs: vec!["VM.Allocate".into(), "VM.Audit".into()]
                },
                Step::Acl {
                    acl: acl("token", "proxshift@pve!ansible", "ProxShift"),
                    delete: false
                },
            ]
        );
    }

    #[test]
    fn turning_privsep_off_drops_the_tokens_own_acl() {
        let mut w = want();
        w.privsep = false;
        let cur = converged(&w);
        assert_eq!(
            plan(&cur, &w),
            vec![
                Step::UpdateToken,
                Step::Acl {
                    acl: acl("token", "proxshift@pve!ansible", "ProxShift"),
                    delete: true
                }
            ]
        );
    }

    #[test]
    fn absent_removes_acls_token_and_role_but_not_others() {
        let mut w = want();
        w.present = false;
        let mut cur = converged(&w);
        cur.acls.push(acl("user", "proxshift@pve", "PVEAuditor"));
        let steps = plan(&cur, &w);
        let text: Vec<String> = steps.iter().map(|s| s.describe(&w)).collect();
        assert_eq!(
            text,
            [
                "remove ACL ProxShift user proxshift@pve on /",
                "remove ACL ProxShift token proxshift@pve!ansible on /",
                "delete API token proxshift@pve!ansible",
                "delete role ProxShift",
            ]
        );
        let after = apply(&cur, &w, &steps);
        assert_eq!(after.acls, vec![acl("user", "proxshift@pve", "PVEAuditor")]);
        assert_eq!(plan(&after, &w), vec![]);
    }

    #[test]
    fn validation_lists_every_problem() {
        let mut w = want();
        w.role = "1bad".into();
        w.user = "nouser".into();
        w.token = Some("root@pam!x".into());
        w.privileges.insert("VM.Fly".into());
        w.acl_paths = vec!["vms".into()];
        let known: BTreeSet<String> = ["VM.Audit", "VM.Allocate"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let errs = validate(&w, Some(&known));
        assert_eq!(errs.len(), 5, "{errs:?}");
        assert!(errs[0].contains("role '1bad'"));
        assert!(errs[1].contains("user@realm"));
        assert!(errs[2].contains("not user!name"));
        assert!(errs[3].contains("'VM.Fly' is not a privilege"));
        assert!(errs[4].contains("'vms' must start with '/'"));
        assert!(validate(&want(), Some(&known)).is_empty());
    }

    #[test]
    fn diff_view_shows_only_managed_objects() {
        let w = want();
        let cur = Current {
            role: None,
            user_exists: true,
            token: None,
            acls: vec![acl("user", "other@pve", "ProxShift")],
        };
        assert_eq!(
            view(&cur, &w),
            json!({"role": null, "user": "proxshift@pve", "token": null, "acls": []})
        );
    }

    #[test]
    fn guest_agent_privileges_take_the_servers_names() {
        let set = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let asked = set(&["VM.Audit", "VM.GuestAgent.Audit", "VM.GuestAgent.FileRead"]);
        let pve8 = set(&["VM.Audit", "VM.Monitor"]);
        let (p, notes) = in_server_names(&asked, &pve8);
        assert_eq!(p, set(&["VM.Audit", "VM.Monitor"]));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("no 'VM.GuestAgent.Audit'"), "{notes:?}");
        let pve9 = set(&["VM.Audit", "VM.GuestAgent.Audit", "VM.GuestAgent.FileRead"]);
        assert_eq!(in_server_names(&asked, &pve9), (asked.clone(), vec![]));
        let (p, notes) = in_server_names(&set(&["VM.Monitor", "VM.Teleport"]), &pve9);
        assert_eq!(p, set(&["VM.GuestAgent.Audit", "VM.Teleport"]));
        assert_eq!(notes.len(), 1);
    }
}
