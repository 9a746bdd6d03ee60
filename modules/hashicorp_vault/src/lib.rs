//! `proxshift.hashi_vault.hashicorp_vault`: read, write and delete KV secrets in HashiCorp Vault or OpenBao;
//! manage ACL policies and a `kubernetes` auth mount with its config and roles (`admin`, `kube_auth`).
//!
//! The Vault protocol lives in the `vault-client` crate, the decisions (what to write, which keys
//! change, what to mask) in [`plan`]; this file wires options to both and shapes the result.

mod admin;
pub mod kube_auth;
pub mod lease;
mod lease_keeper;
mod lease_state;
pub mod plan;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use vault_client::{Error as VaultError, KvVersion, Vault};

use plan::{cas_for, masked_diff, plan_write, secret_strings};
use vault_client::module_options::{connection_options, ConnectionOptions, KvVersions};
use vault_client::read::pick;

/// The module's options; the documentation stub `plugins/modules/hashicorp_vault.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    let item = ArgSpec::new(vec![
        Opt::str("name").required(),
        Opt::str("path").required(),
        Opt::str("key"),
        Opt::int("version"),
        Opt::raw("default"),
        Opt::str("engine_mount_point"),
    ]);
    let role = ArgSpec::new(vec![
        Opt::str("name").required(),
        Opt::list("bound_service_account_names", Type::Str).required(),
        Opt::list("bound_service_account_namespaces", Type::Str).required(),
        Opt::list("token_policies", Type::Str).default(json!([])),
        Opt::int("token_ttl").default(3600),
        Opt::str("audience"),
    ]);
    let holder = ArgSpec::new(vec![
        Opt::str("run_id").required(),
        Opt::str("host").default(""),
        Opt::str("job_id").default(""),
    ]);
    ArgSpec::new(vec![
        Opt::str("state")
            .choices(&[
                "read",
                "present",
                "absent",
                "policy",
                "kubernetes_auth",
                "lease_acquire",
                "lease_renew",
                "lease_release",
                "lease_keep",
            ])
            .default("present"),
        Opt::str("engine_mount_point").default("secret"),
        Opt::int("kv_version").choices(&[1, 2]),
        Opt::str("path"),
        Opt::dict("data").no_log(),
        Opt::bool("merge").default(false),
        Opt::int("cas"),
        Opt::bool("destroy").default(false),
        Opt::list("secrets", Type::Dict).options(item),
        Opt::str("name"),
        Opt::str("rules"),
        Opt::str("auth_mount"),
        Opt::str("kubernetes_host"),
        Opt::str("kubernetes_ca_cert"),
        Opt::str("token_reviewer_jwt").no_log(),
        Opt::list("roles", Type::Dict).options(role),
        Opt::dict("holder").options(holder),
        Opt::str("lease_phase"),
        Opt::int("lease_ttl").default(1800),
        Opt::str("lease_break"),
        Opt::int("lease_wait").default(0),
        Opt::int("lease_watch_pid"),
        Opt::path("lease_lost_file"),
    ])
    .with(connection_options())
    .required_if("state", "read", &["secrets"])
    .required_if("state", "present", &["path", "data"])
    .required_if("state", "absent", &["path"])
    .required_if("state", "policy", &["name", "rules"])
    .required_if("state", "lease_acquire", &["path", "holder"])
    .required_if("state", "lease_renew", &["path", "holder"])
    .required_if("state", "lease_release", &["path", "holder"])
    .required_if("state", "lease_keep", &["path", "holder"])
    .required_if(
        "state",
        "kubernetes_auth",
        &["auth_mount", "kubernetes_host"],
    )
    .required_if("auth_method", "approle", &["role_id"])
    .required_if("auth_method", "kubernetes", &["role"])
    .required_if("auth_method", "jwt", &["jwt"])
    .required_if("auth_method", "userpass", &["username", "password"])
}

#[derive(Debug, Deserialize)]
struct ReadItem {
    name: String,
    path: String,
    key: Option<String>,
    version: Option<u64>,
    default: Option<Value>,
    engine_mount_point: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct Options {
    pub(crate) state: String,
    pub(crate) engine_mount_point: String,
    kv_version: Option<u64>,
    pub(crate) path: Option<String>,
    data: Option<Map<String, Value>>,
    merge: bool,
    cas: Option<i64>,
    destroy: bool,
    secrets: Option<Vec<ReadItem>>,
    pub(crate) name: Option<String>,
    pub(crate) rules: Option<String>,
    pub(crate) auth_mount: Option<String>,
    pub(crate) kubernetes_host: Option<String>,
    pub(crate) kubernetes_ca_cert: Option<String>,
    pub(crate) token_reviewer_jwt: Option<String>,
    pub(crate) roles: Option<Vec<kube_auth::RoleWant>>,
    pub(crate) holder: Option<lease::Holder>,
    pub(crate) lease_phase: Option<String>,
    pub(crate) lease_ttl: i64,
    pub(crate) lease_break: Option<String>,
    pub(crate) lease_wait: i64,
    pub(crate) lease_watch_pid: Option<i64>,
    pub(crate) lease_lost_file: Option<String>,
    #[serde(flatten)]
    conn: ConnectionOptions,
}

/// The module binary's `main`: the module, or with `--lease-keeper` (options on stdin) the keeper that
/// `state=lease_keep` starts ([`lease_keeper`]).
pub fn main() -> ! {
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(lease_keeper::KEEPER_FLAG))
    {
        ansible_module::run_stdin("hashicorp_vault", argument_spec(), lease_keeper::serve)
    }
    ansible_module::run(argument_spec(), run)
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let mut kv = KvVersions::new(o.kv_version)?;
    let cas = match o.cas {
        Some(c) if c < 0 => return Err("cas must be 0 (create only) or a version number".into()),
        c => c.map(|c| c as u64),
    };
    if o.state != "present" && (cas.is_some() || o.merge) {
        m.warn(format!(
            "cas and merge only apply to state=present; ignored for state={}",
            o.state
        ));
    }
    let empty_item = o
        .secrets
        .iter()
        .flatten()
        .find(|i| vault_client::clean_path(&i.path).is_empty());
    if let Some(item) = empty_item {
        return Err(Failure::new(format!(
            "secrets[{}]: path is empty",
            item.name
        )));
    }
    let kv_state = matches!(
        o.state.as_str(),
        "present" | "absent" | "lease_acquire" | "lease_renew" | "lease_release" | "lease_keep"
    );
    if kv_state
        && o.path
            .as_deref()
            .map(vault_client::clean_path)
            .unwrap_or_default()
            .is_empty()
    {
        return Err("path must name a secret inside the mount (it is empty)".into());
    }
    let named = |v: &Option<String>| {
        v.as_deref()
            .map(vault_client::clean_path)
            .unwrap_or_default()
    };
    if o.state == "policy" && named(&o.name).is_empty() {
        return Err("name must name the policy (it is empty)".into());
    }
    if o.state == "kubernetes_auth" && named(&o.auth_mount).is_empty() {
        return Err(
            "auth_mount must name the auth mount path, e.g. kubernetes/cluster1 (it is empty)"
                .into(),
        );
    }
    let vault = o.conn.connect(m)?;
    match o.state.as_str() {
        "read" => read(&vault, &mut kv, &o),
        "present" => present(m, &vault, &mut kv, &o, cas),
        "policy" => admin::policy(m, &vault, &o),
        "kubernetes_auth" => admin::kubernetes_auth(m, &vault, &o),
        "lease_acquire" | "lease_renew" | "lease_release" => {
            lease_state::run(m, &vault, &mut kv, &o)
        }
        "lease_keep" => lease_keeper::start(m, &vault, &mut kv, &o),
        _ => absent(m, &vault, &mut kv, &o),
    }
}

fn read(vault: &Vault, kv: &mut KvVersions, o: &Options) -> Result<Outcome, Failure> {
    let items = o.secrets.as_deref().unwrap_or_default();
    let mut values = Map::new();
    let mut info = Map::new();
    for item in items {
        if values.contains_key(&item.name) {
            return Err(Failure::new(format!(
                "secrets: the name '{}' is used twice",
                item.name
            )));
        }
        let mount = item
            .engine_mount_point
            .as_deref()
            .unwrap_or(&o.engine_mount_point);
        let ver = kv.get(vault, mount)?;
        if item.version.is_some() && ver == KvVersion::V1 {
            return Err(Failure::new(format!(
                "secrets[{}]: version is set but mount '{mount}' is KV v1, which has no versions",
                item.name
            )));
        }
        let where_ = format!("{mount}/{}", vault_client::clean_path(&item.path));
        let secret = vault
            .kv_read(ver, mount, &item.path, item.version)
            .map_err(|e| Failure::new(format!("secrets[{}]: reading {where_}: {e}", item.name)))?;
        let picked = pick(secret.as_ref(), item.key.as_deref());
        let (value, defaulted) = match (picked, &item.default) {
            (Ok(v), _) => (v, false),
            (Err(_), Some(d)) => (d.clone(), true),
            (Err(why), None) => {
                let at = match item.version {
                    Some(n) => format!("{where_} (version {n})"),
                    None => where_.clone(),
                };
                let reason = why.describe(&at);
                return Err(Failure::new(format!(
                    "secrets[{}]: {reason} (set default to allow this)",
                    item.name
                )));
            }
        };
        values.insert(item.name.clone(), value);
        info.insert(
            item.name.clone(),
            json!({
                "mount": mount,
                "path": vault_client::clean_path(&item.path),
                "kv_version": ver.number(),
                "version": secret.as_ref().and_then(|s| s.version),
                "defaulted": defaulted,
            }),
        );
    }
    let n = values.len();
    Ok(Outcome::new(false)
        .msg(format!("read {n} secret{}", if n == 1 { "" } else { "s" }))
        .with("secrets", Value::Object(values))
        .with("secrets_info", Value::Object(info)))
}

/// Mask every value of a secret we read: only the read state may show them.
fn mask_read(m: &mut Module, data: Option<&Map<String, Value>>) {
    if let Some(d) = data {
        let mut found = Vec::new();
        secret_strings(&Value::Object(d.clone()), &mut found);
        for s in found {
            m.add_secret(s);
        }
    }
}

fn present(
    m: &mut Module,
    vault: &Vault,
    kv: &mut KvVersions,
    o: &Options,
    cas: Option<u64>,
) -> Result<Outcome, Failure> {
    let mount = o.engine_mount_point.as_str();
    let path = o.path.as_deref().unwrap_or_default();
    let desired = o.data.clone().unwrap_or_default();
    let ver = kv.get(vault, mount)?;
    if ver == KvVersion::V1 && cas.is_some() {
        return Err(Failure::new(format!(
            "cas is set but mount '{mount}' is KV v1, which has no check-and-set"
        )));
    }
    let where_ = format!("{mount}/{}", vault_client::clean_path(path));
    // One re-read and retry when another writer got in between our read and our write.
    for attempt in 1..=2 {
        let current = vault
            .kv_read(ver, mount, path, None)
            .map_err(|e| Failure::new(format!("reading {where_}: {e}")))?;
        let current_data = current.as_ref().and_then(|s| s.data.as_ref());
        let read_version = current.as_ref().and_then(|s| s.version);
        mask_read(m, current_data);
        let plan = plan_write(current_data, &desired, o.merge);
        let shaped = |changed: bool, version: Option<u64>| {
            Outcome::new(changed)
                .with("path", where_.clone())
                .with("kv_version", ver.number())
                .with("version", version.map(Value::from).unwrap_or(Value::Null))
                .with("changes", plan.changes.to_json())
        };
        if !plan.write {
            return Ok(
                shaped(false, read_version).msg(format!("{where_} already holds the desired data"))
            );
        }
        let (before, after) = masked_diff(current_data, &plan);
        let (before_h, after_h) = (format!("{where_} (current)"), format!("{where_} (desired)"));
        if m.check_mode {
            m.add_diff(before, after, &before_h, &after_h);
            return Ok(
                shaped(true, read_version).msg(format!("{where_} would be written (check mode)"))
            );
        }
        let send_cas = cas_for(ver, cas, read_version);
        match vault.kv_write(ver, mount, path, &plan.payload, send_cas) {
            Ok(new_version) => {
                m.add_diff(before, after, &before_h, &after_h);
                return Ok(shaped(true, new_version).msg(format!("wrote {where_}")));
            }
            // Another writer got in first: re-read, re-plan (their data may already be ours).
            Err(e) if e.is_cas_mismatch() && cas.is_none() && attempt == 1 => continue,
            Err(e) if e.is_cas_mismatch() => {
                let expected = send_cas.unwrap_or_default();
                let why = if cas.is_some() {
                    format!("the cas option ({expected}) does not match the current version")
                } else {
                    "another writer changed it again between our re-read and our write".to_string()
                };
                return Err(Failure::new(format!(
                    "check-and-set conflict writing {where_}: {why}; nothing was written"
                )));
            }
            Err(e) => return Err(Failure::new(format!("writing {where_}: {e}"))),
        }
    }
    unreachable!("the loop returns on its second attempt")
}

fn absent(
    m: &mut Module,
    vault: &Vault,
    kv: &mut KvVersions,
    o: &Options,
) -> Result<Outcome, Failure> {
    let mount = o.engine_mount_point.as_str();
    let path = o.path.as_deref().unwrap_or_default();
    let ver = kv.get(vault, mount)?;
    let where_ = format!("{mount}/{}", vault_client::clean_path(path));
    let ctx = |what: &str, e: VaultError| Failure::new(format!("{what} {where_}: {e}"));
    let current = vault
        .kv_read(ver, mount, path, None)
        .map_err(|e| ctx("reading", e))?;
    mask_read(m, current.as_ref().and_then(|s| s.data.as_ref()));
    let version = current.as_ref().and_then(|s| s.version);
    let destroy = o.destroy && ver == KvVersion::V2;
    let exists = if destroy {
        // Destroy also removes metadata and older versions, which outlive a soft delete.
        vault
            .kv_metadata(mount, path)
            .map_err(|e| ctx("reading the metadata of", e))?
            .is_some()
    } else {
        current.as_ref().is_some_and(|s| !s.is_deleted())
    };
    let result = |changed: bool| {
        Outcome::new(changed)
            .with("path", where_.clone())
            .with("kv_version", ver.number())
            .with("version", version.map(Value::from).unwrap_or(Value::Null))
            .with("destroyed", destroy)
    };
    if !exists {
        return Ok(result(false).msg(format!("{where_} is already absent")));
    }
    if m.diff_mode {
        let keys = current
            .as_ref()
            .and_then(|s| s.data.as_ref())
            .map(|d| Value::Object(d.keys().map(|k| (k.clone(), json!(plan::MASKED))).collect()));
        m.add_diff(
            keys.unwrap_or(json!({})),
            json!({}),
            &format!("{where_} (current)"),
            &format!("{where_} (absent)"),
        );
    }
    let verb = if destroy {
        "destroy all versions and metadata of"
    } else {
        "delete"
    };
    if m.check_mode {
        return Ok(result(true).msg(format!("would {verb} {where_} (check mode)")));
    }
    if destroy {
        vault
            .kv_destroy(ver, mount, path)
            .map_err(|e| ctx("destroying", e))?;
    } else {
        vault
            .kv_delete(ver, mount, path)
            .map_err(|e| ctx("deleting", e))?;
    }
    let done = if destroy {
        "destroyed all versions and metadata of"
    } else {
        "deleted"
    };
    Ok(result(true).msg(format!("{done} {where_}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "hashi_vault",
            "hashicorp_vault",
        );
    }

    fn run_args(args: Value) -> Value {
        module_testkit::TestModule::new("hashicorp_vault", argument_spec(), run)
            .run(&args)
            .0
    }

    #[test]
    fn option_rules_name_the_option() {
        let r = run_args(json!({"url": "http://127.0.0.1:9", "state": "present", "path": "a"}));
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("state is present but all of the following are missing: data"),
            "{r}"
        );
        let r = run_args(
            json!({"url": "http://127.0.0.1:9", "state": "read", "auth_method": "userpass", "secrets": []}),
        );
        assert!(
            r["msg"].as_str().unwrap().contains("username, password"),
            "{r}"
        );
    }

    #[test]
    fn empty_paths_are_refused_before_connecting() {
        let r = run_args(json!({"url": "http://127.0.0.1:9", "path": "/", "data": {}}));
        assert_eq!(
            r["msg"],
            json!("path must name a secret inside the mount (it is empty)")
        );
        let r = run_args(json!({"url": "http://127.0.0.1:9", "state": "read",
                                "secrets": [{"name": "a", "path": ""}]}));
        assert_eq!(r["msg"], json!("secrets[a]: path is empty"));
    }

    #[test]
    fn missing_token_is_a_clear_error() {
        let r = run_args(
            json!({"url": "http://127.0.0.1:9", "state": "absent", "path": "a",
                                "token_path": "/nonexistent/vault-token"}),
        );
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("no token was found") && msg.contains("/nonexistent/vault-token"),
            "{msg}"
        );
    }

    #[test]
    fn data_values_are_masked_even_in_errors() {
        // Nothing listens on port 9: the failure message must not echo the data.
        let r = run_args(
            json!({"url": "http://127.0.0.1:9", "token": "canary-token-1", "retries": 0,
                                "path": "canary-value-9", "data": {"k": "canary-value-9"}}),
        );
        assert_eq!(r["failed"], json!(true));
        let text = r.to_string();
        assert!(
            !text.contains("canary-value-9") && !text.contains("canary-token-1"),
            "{text}"
        );
        assert!(text.contains("cannot reach Vault"), "{text}");
    }
}
