//! Authentication (API tokens, tickets + CSRF) and ACL-based privilege checks.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::ErrorReply;
use crate::model::{AclEntry, Token, User};
use crate::sim::Generation;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub userid: String,
    /// Token name (without the user) when authenticated with an API token.
    pub tokenid: Option<String>,
    pub via_ticket: bool,
}

impl Principal {
    /// `user@realm` or `user@realm!token` as shown in UPIDs and ACLs.
    pub fn auth_id(&self) -> String {
        match &self.tokenid {
            Some(t) => format!("{}!{}", self.userid, t),
            None => self.userid.clone(),
        }
    }
    pub fn is_root(&self) -> bool {
        self.userid == "root@pam"
    }
    /// qemu-server's `$authuser eq 'root@pam'`: a root@pam session. A token's authuser is the token
    /// id (`root@pam!name`, pve-access-control `verify_token`), so root's own tokens are not root here.
    pub fn is_root_session(&self) -> bool {
        self.is_root() && self.tokenid.is_none()
    }
}

pub const TICKET_LIFETIME: u64 = 7200;

/// Every privilege PVE 9 knows (pve-access-control `PVE/AccessControl.pm`, `$privgroups`);
/// [`privileges`] gives a release's own list.
pub const ALL_PRIVS: &[&str] = &[
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.AllocateTemplate",
    "Datastore.Audit",
    "Group.Allocate",
    "Mapping.Audit",
    "Mapping.Modify",
    "Mapping.Use",
    "Permissions.Modify",
    "Pool.Allocate",
    "Pool.Audit",
    "Realm.Allocate",
    "Realm.AllocateUser",
    "SDN.Allocate",
    "SDN.Audit",
    "SDN.Use",
    "Sys.AccessNetwork",
    "Sys.Audit",
    "Sys.Console",
    "Sys.Incoming",
    "Sys.Modify",
    "Sys.PowerMgmt",
    "Sys.Syslog",
    "User.Modify",
    "VM.Allocate",
    "VM.Audit",
    "VM.Backup",
    "VM.Clone",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Cloudinit",
    "VM.Config.Disk",
    "VM.Config.HWType",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
    "VM.Console",
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.FileRead",
    "VM.GuestAgent.FileSystemMgmt",
    "VM.GuestAgent.FileWrite",
    "VM.GuestAgent.Unrestricted",
    "VM.Migrate",
    "VM.PowerMgmt",
    "VM.Replicate",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
];

/// Privileges of PVE 8 that PVE 9 dropped, and PVE 9's new ones. pve-access-control
/// `PVE/AccessControl.pm`, `$privgroups`: commits 922f7105 ("add VM.GuestAgent privileges"),
/// 07069454 ("privileges: drop VM.Monitor") and 5f7544f4 ("add VM.Replicate privilege"), all
/// July 2025, first released in libpve-access-control 9.0.3 (PVE 9.0). In PVE 8 the guest
/// agent API needs `VM.Monitor` (qemu-server 8 `PVE/API2/Qemu/Agent.pm`, `register_command`:
/// `$perm //= 'VM.Monitor'`); in PVE 9 `VM.GuestAgent.*`.
const PVE8_ONLY: &[&str] = &["VM.Monitor"];
const PVE9_ONLY: &[&str] = &[
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.FileRead",
    "VM.GuestAgent.FileSystemMgmt",
    "VM.GuestAgent.FileWrite",
    "VM.GuestAgent.Unrestricted",
    "VM.Replicate",
];

/// The privileges a release knows, sorted.
pub fn privileges(g: Generation) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = ALL_PRIVS
        .iter()
        .copied()
        .filter(|p| g == Generation::Pve9 || !PVE9_ONLY.contains(p))
        .collect();
    if g == Generation::Pve8 {
        v.extend(PVE8_ONLY);
        v.sort_unstable();
    }
    v
}

/// Built-in roles of a release (pve-access-control `create_roles`), marked `special`.
pub fn builtin_roles(g: Generation) -> BTreeMap<String, BTreeSet<String>> {
    let known = privileges(g);
    let set = |l: &[&str]| {
        l.iter()
            .filter(|p| known.contains(p))
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
    };
    let vm_all: Vec<&str> = known
        .iter()
        .copied()
        .filter(|p| p.starts_with("VM."))
        .collect();
    let mut vm_admin = vm_all.clone();
    vm_admin.extend([
        "Datastore.AllocateSpace",
        "Datastore.Audit",
        "SDN.Use",
        "Mapping.Use",
    ]);
    let admin_minus: Vec<&str> = known
        .iter()
        .copied()
        .filter(|p| !matches!(*p, "Permissions.Modify" | "Realm.Allocate"))
        .collect();
    let mut m = BTreeMap::new();
    m.insert("Administrator".into(), set(&known));
    m.insert("NoAccess".into(), BTreeSet::new());
    m.insert("PVEAdmin".into(), set(&admin_minus));
    m.insert("PVEVMAdmin".into(), set(&vm_admin));
    m.insert(
        "PVEVMUser".into(),
        set(&[
            "VM.Audit",
            "VM.Backup",
            "VM.Config.CDROM",
            "VM.Config.Cloudinit",
            "VM.Console",
            "VM.PowerMgmt",
            "VM.GuestAgent.Audit",
        ]),
    );
    m.insert(
        "PVEAuditor".into(),
        set(&[
            "Datastore.Audit",
            "Mapping.Audit",
            "Pool.Audit",
            "SDN.Audit",
            "Sys.Audit",
            "VM.Audit",
            "VM.GuestAgent.Audit",
        ]),
    );
    m.insert(
        "PVEDatastoreUser".into(),
        set(&[
            "Datastore.AllocateSpace",
            "Datastore.AllocateTemplate",
            "Datastore.Audit",
        ]),
    );
    m.insert(
        "PVEDatastoreAdmin".into(),
        set(&[
            "Datastore.Allocate",
            "Datastore.AllocateSpace",
            "Datastore.AllocateTemplate",
            "Datastore.Audit",
        ]),
    );
    m.insert("PVETemplateUser".into(), set(&["VM.Audit", "VM.Clone"]));
    m.insert(
        "PVEUserAdmin".into(),
        set(&[
            "Group.Allocate",
            "Realm.AllocateUser",
            "Sys.Audit",
            "User.Modify",
        ]),
    );
    m.insert(
        "PVESysAdmin".into(),
        set(&[
            "Sys.Audit",
            "Sys.Console",
            "Sys.Modify",
            "Sys.PowerMgmt",
            "Sys.Syslog",
            "Sys.AccessNetwork",
        ]),
    );
    m
}

/// Access-control data plus the ticket signing key.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub users: BTreeMap<String, User>,
    /// Keyed by full token id `user@realm!name`.
    pub tokens: BTreeMap<String, Token>,
    pub roles: BTreeMap<String, BTreeSet<String>>,
    pub builtin: BTreeSet<String>,
    pub acl: Vec<AclEntry>,
    pub key: String,
    /// The release's privileges ([`privileges`]); empty: PVE 9's ([`ALL_PRIVS`]).
    pub known: BTreeSet<String>,
}

fn sign(key: &str, data: &str) -> String {
    let mut h = Sha256::new();
    h.update(key.as_bytes());
    h.update(b"\0");
    h.update(data.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Access {
    /// Whether `p` is a privilege of the release played.
    pub fn is_privilege(&self, p: &str) -> bool {
        if self.known.is_empty() {
            ALL_PRIVS.contains(&p)
        } else {
            self.known.contains(p)
        }
    }

    pub fn new_ticket(&self, userid: &str, now: u64) -> String {
        let plain = format!("PVE:{userid}:{now:08X}");
        format!("{plain}::{}", sign(&self.key, &plain))
    }

    pub fn csrf_token(&self, userid: &str, ticket_time: u64) -> String {
        let t = format!("{ticket_time:08X}");
        format!("{t}:{}", &sign(&self.key, &format!("{t}:{userid}"))[..43])
    }

    /// Verifies a ticket; returns (userid, ticket time).
    pub fn verify_ticket(&self, ticket: &str, now: u64) -> Option<(String, u64)> {
        let (plain, sig) = ticket.rsplit_once("::")?;
        if sign(&self.key, plain) != sig {
            return None;
        }
        let rest = plain.strip_prefix("PVE:")?;
        let (user, time) = rest.rsplit_once(':')?;
        let time = u64::from_str_radix(time, 16).ok()?;
        if now > time + TICKET_LIFETIME || time > now + 300 {
            return None;
        }
        let u = self.users.get(user)?;
        (u.enable && (u.expire == 0 || u.expire > now)).then(|| (user.to_string(), time))
    }

    pub fn check_csrf(&self, userid: &str, ticket_time: u64, token: Option<&str>) -> bool {
        token == Some(self.csrf_token(userid, ticket_time).as_str())
    }

    pub fn check_password(&self, userid: &str, password: &str, now: u64) -> bool {
        match self.users.get(userid) {
            Some(u) => {
                u.enable
                    && (u.expire == 0 || u.expire > now)
                    && u.password.as_deref() == Some(password)
            }
            None => false,
        }
    }

    /// `PVEAPIToken=USER@REALM!TOKENID=SECRET` (split at the last `=`).
    pub fn verify_token(&self, value: &str, now: u64) -> Option<Principal> {
        let (id, secret) = value.rsplit_once('=')?;
        let tok = self.tokens.get(id.trim())?;
        let user = self.users.get(&tok.userid)?;
        let live = user.enable
            && (user.expire == 0 || user.expire > now)
            && (tok.expire == 0 || tok.expire > now);
        (live && tok.secret == secret.trim()).then(|| Principal {
            userid: tok.userid.clone(),
            tokenid: Some(tok.tokenid.clone()),
            via_ticket: false,
        })
    }

    fn groups_of(&self, userid: &str) -> Vec<String> {
        self.users
            .get(userid)
            .map(|u| u.groups.clone())
            .unwrap_or_default()
    }

    /// Privileges of one ACL subject (user with its groups, or a token) on `path`.
    fn acl_privs(
        &self,
        ugid: &str,
        groups: &[String],
        is_token: bool,
        path: &str,
    ) -> BTreeSet<String> {
        let mut current: BTreeSet<String> = BTreeSet::new();
        let mut prefixes = vec!["/".to_string()];
        let mut acc = String::new();
        for part in path.split('/').filter(|s| !s.is_empty()) {
            acc.push('/');
            acc.push_str(part);
            prefixes.push(acc.clone());
        }
        for (i, p) in prefixes.iter().enumerate() {
            let last = i + 1 == prefixes.len();
            let applicable = |e: &&AclEntry| e.path == *p && (last || e.propagate);
            // User (or token) entries override group entries at the same level.
            let direct: Vec<&AclEntry> = self
                .acl
                .iter()
                .filter(applicable)
                .filter(|e| e.ugid == ugid && e.kind == if is_token { "token" } else { "user" })
                .collect();
            let chosen: Vec<&AclEntry> = if !direct.is_empty() {
                direct
            } else if !is_token {
                self.acl
                    .iter()
                    .filter(applicable)
                    .filter(|e| e.kind == "group" && groups.contains(&e.ugid))
                    .collect()
            } else {
                vec![]
            };
            if !chosen.is_empty() {
                current = chosen
                    .iter()
                    .flat_map(|e| self.roles.get(&e.roleid).cloned().unwrap_or_default())
                    .collect();
            }
        }
        current
    }

    /// Effective privileges on `path`.
    pub fn privs(&self, who: &Principal, path: &str) -> BTreeSet<String> {
        let user_privs = if who.is_root() {
            if self.known.is_empty() {
                ALL_PRIVS.iter().map(|s| s.to_string()).collect()
            } else {
                self.known.clone()
            }
        } else {
            self.acl_privs(&who.userid, &self.groups_of(&who.userid), false, path)
        };
        match &who.tokenid {
            None => user_privs,
            Some(_) => {
                let tok = self.tokens.get(&who.auth_id());
                if tok.map(|t| t.privsep).unwrap_or(true) {
                    let tp = self.acl_privs(&who.auth_id(), &[], true, path);
                    user_privs.intersection(&tp).cloned().collect()
                } else {
                    user_privs
                }
            }
        }
    }

    pub fn has(&self, who: &Principal, path: &str, privilege: &str) -> bool {
        self.privs(who, path).contains(privilege)
    }

    /// `Permission check failed (<path>, <priv>)` unless one (`any`) or all privileges are held.
    pub fn require(
        &self,
        who: &Principal,
        path: &str,
        privs: &[&str],
        any: bool,
    ) -> Result<(), ErrorReply> {
        let have = self.privs(who, path);
        let missing: Vec<&str> = privs
            .iter()
            .copied()
            .filter(|p| !have.contains(*p))
            .collect();
        let ok = if any {
            missing.len() < privs.len()
        } else {
            missing.is_empty()
        };
        if ok {
            Ok(())
        } else {
            let shown = if any {
                privs.join("|")
            } else {
                missing.join(", ")
            };
            Err(ErrorReply::perm(format!("{path}, {shown}")))
        }
    }

    /// Evaluates a schema `permissions.check` expression.
    pub fn eval_check(
        &self,
        who: &Principal,
        check: &Value,
        params: &BTreeMap<String, String>,
    ) -> Result<(), ErrorReply> {
        let Some(list) = check.as_array() else {
            return Ok(());
        };
        let op = list.first().and_then(Value::as_str).unwrap_or_default();
        match op {
            "perm" => {
                let tmpl = list.get(1).and_then(Value::as_str).unwrap_or("/");
                let privs: Vec<&str> = list
                    .get(2)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut any = false;
                let mut i = 3;
                while i + 1 < list.len() + 1 && i < list.len() {
                    match list[i].as_str() {
                        Some("any") => any = true,
                        Some("require_param") => {
                            let p = list.get(i + 1).and_then(Value::as_str).unwrap_or_default();
                            if !params.contains_key(p) {
                                return Err(ErrorReply::perm(format!("missing parameter '{p}'")));
                            }
                        }
                        _ => {}
                    }
                    i += 2;
                }
                let path = expand(tmpl, params);
                self.require(who, &path, &privs, any)
            }
            "and" => {
                for sub in &list[1..] {
                    self.eval_check(who, sub, params)?;
                }
                Ok(())
            }
            "or" => {
                let mut first_err = None;
                for sub in &list[1..] {
                    match self.eval_check(who, sub, params) {
                        Ok(()) => return Ok(()),
                        Err(e) => {
                            first_err.get_or_insert(e);
                        }
                    }
                }
                Err(first_err.unwrap_or_else(|| ErrorReply::perm("/")))
            }
            "userid-param" => {
                let uid = params.get("userid").map(String::as_str).unwrap_or_default();
                // ["userid-param", "Realm.AllocateUser"]: that privilege on the user's realm.
                if let Some(privilege) =
                    list.get(1).and_then(Value::as_str).filter(|p| *p != "self")
                {
                    let realm = uid.rsplit_once('@').map(|(_, r)| r).unwrap_or_default();
                    return self.require(
                        who,
                        &format!("/access/realm/{realm}"),
                        &[privilege],
                        false,
                    );
                }
                if who.tokenid.is_none() && who.userid == uid {
                    Ok(())
                } else {
                    Err(ErrorReply::perm("user mismatch"))
                }
            }
            "userid-group" => {
                let privs: Vec<&str> = list
                    .get(1)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                self.require(who, "/access/groups", &privs, false)
            }
            "perm-modify" => {
                let path = expand(list.get(1).and_then(Value::as_str).unwrap_or("/"), params);
                self.require(who, &path, &["Permissions.Modify"], false)
            }
            _ => Ok(()),
        }
    }
}

/// Substitutes `{param}` placeholders in a permission path.
pub fn expand(tmpl: &str, params: &BTreeMap<String, String>) -> String {
    let mut out = tmpl.to_string();
    for (k, v) in params {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{
        builtin_roles, Access, AclEntry, Generation, Principal, Token, User, TICKET_LIFETIME,
    };

    fn access() -> Access {
        let mut a = Access {
            roles: builtin_roles(Generation::Pve9),
            key: "k".into(),
            ..Default::default()
        };
        for u in ["root@pam", "ops@pve", "aud@pve"] {
            a.users.insert(
                u.into(),
                User {
                    userid: u.into(),
                    password: Some("pw".into()),
                    enable: true,
                    groups: if u == "aud@pve" {
                        vec!["auditors".into()]
                    } else {
                        vec![]
                    },
                    expire: 0,
                },
            );
        }
        a.tokens.insert(
            "ops@pve!ci".into(),
            Token {
                userid: "ops@pve".into(),
                tokenid: "ci".into(),
                secret: "s".into(),
                privsep: true,
                expire: 0,
                comment: None,
            },
        );
        let acl = |path: &str, kind: &str, ugid: &str, role: &str, propagate| AclEntry {
            path: path.into(),
            kind: kind.into(),
            ugid: ugid.into(),
            roleid: role.into(),
            propagate,
        };
        a.acl.push(acl("/", "user", "ops@pve", "PVEVMAdmin", true));
        a.acl
            .push(acl("/vms/666", "user", "ops@pve", "NoAccess", true));
        a.acl
            .push(acl("/vms", "token", "ops@pve!ci", "PVEVMUser", true));
        a.acl
            .push(acl("/", "group", "auditors", "PVEAuditor", false));
        a
    }

    fn who(user: &str, token: Option<&str>) -> Principal {
        Principal {
            userid: user.into(),
            tokenid: token.map(Into::into),
            via_ticket: token.is_none(),
        }
    }

    #[test]
    fn acl_inheritance_and_override() {
        let a = access();
        assert!(a.has(&who("ops@pve", None), "/vms/101", "VM.Config.Disk"));
        assert!(!a.has(&who("ops@pve", None), "/vms/666", "VM.Audit"));
        // Non-propagating group ACL only applies on "/" itself.
        assert!(a.has(&who("aud@pve", None), "/", "Sys.Audit"));
        assert!(!a.has(&who("aud@pve", None), "/nodes/pve1", "Sys.Audit"));
        assert!(a.has(&who("root@pam", None), "/anything", "Sys.Modify"));
    }

    #[test]
    fn privsep_token_is_intersection() {
        let a = access();
        let t = who("ops@pve", Some("ci"));
        assert!(a.has(&t, "/vms/101", "VM.PowerMgmt"));
        assert!(!a.has(&t, "/vms/101", "VM.Config.Disk"));
        let err = a
            .require(&t, "/vms/101", &["VM.Config.Disk"], false)
            .unwrap_err();
        assert_eq!(err.status, 403);
        assert_eq!(
            err.message,
            "Permission check failed (/vms/101, VM.Config.Disk)"
        );
    }

    #[test]
    fn tickets_and_csrf() {
        let a = access();
        let t = a.new_ticket("ops@pve", 1_000_000);
        assert_eq!(
            a.verify_ticket(&t, 1_000_100),
            Some(("ops@pve".into(), 1_000_000))
        );
        assert_eq!(a.verify_ticket(&t, 1_000_000 + TICKET_LIFETIME + 1), None);
        assert_eq!(a.verify_ticket(&t.replace("ops", "root"), 1_000_100), None);
        let c = a.csrf_token("ops@pve", 1_000_000);
        assert!(a.check_csrf("ops@pve", 1_000_000, Some(&c)));
        assert!(!a.check_csrf("ops@pve", 1_000_000, Some("x")));
        assert!(a.verify_token("ops@pve!ci=s", 0).is_some());
        assert!(a.verify_token("ops@pve!ci=wrong", 0).is_none());
    }
}
