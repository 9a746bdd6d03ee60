//! `proxshift.hashi_vault.hashicorp_vault_info`: read one KV secret (v1 or v2, any version) and its
//! metadata from HashiCorp Vault or OpenBao. Read-only: check mode runs the same reads.
//!
//! The connection and auth options (those of the `hashicorp_vault` module) and the pure value
//! picking come from `vault_client` (`module_options`, `read`); [`lookup`] is the backend of the
//! `proxshift.hashi_vault.kv` lookup.

pub mod lookup;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};
use serde::Deserialize;
use serde_json::{json, Value};
use vault_client::module_options::{connection_options, ConnectionOptions, KvVersions};
use vault_client::{read, KvVersion};

/// The module's options; the documentation stub `plugins/modules/hashicorp_vault_info.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("path").required(),
        Opt::str("engine_mount_point").default("secret"),
        Opt::int("kv_version").choices(&[1, 2]),
        Opt::int("version"),
    ])
    .with(connection_options())
}

#[derive(Deserialize)]
struct Options {
    path: String,
    engine_mount_point: String,
    kv_version: Option<u64>,
    version: Option<i64>,
    #[serde(flatten)]
    conn: ConnectionOptions,
}

/// A version number the user gave: 1 or more.
pub fn version_option(v: Option<i64>) -> Result<Option<u64>, Failure> {
    match v {
        Some(n) if n < 1 => Err(Failure::new(format!("version must be 1 or more (got {n})"))),
        v => Ok(v.map(|n| n as u64)),
    }
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let version = version_option(o.version)?;
    if vault_client::clean_path(&o.path).is_empty() {
        return Err("path must name a secret inside the mount (it is empty)".into());
    }
    let mut kv = KvVersions::new(o.kv_version)?;
    let vault = o.conn.connect(m)?;
    let mount = o.engine_mount_point.as_str();
    let ver = kv.get(&vault, mount)?;
    let at = read::location(mount, &o.path, version);
    if version.is_some() && ver == KvVersion::V1 {
        return Err(Failure::new(format!(
            "version is set but mount '{mount}' is KV v1, which has no versions"
        )));
    }
    let secret = vault
        .kv_read(ver, mount, &o.path, version)
        .map_err(|e| Failure::new(format!("reading {at}: {e}")))?;
    let found = secret.as_ref().is_some_and(|s| !s.is_deleted());
    let msg = match read::pick(secret.as_ref(), None) {
        Ok(_) => format!("read {at}"),
        Err(missing) => missing.describe(&at),
    };
    let data = secret
        .as_ref()
        .and_then(|s| s.data.clone())
        .map(Value::Object)
        .unwrap_or(Value::Null);
    Ok(Outcome::new(false)
        .msg(msg)
        .with("found", found)
        .with("data", data)
        .with(
            "metadata",
            secret
                .as_ref()
                .and_then(|s| s.metadata.clone())
                .unwrap_or(Value::Null),
        )
        .with("version", json!(secret.as_ref().and_then(|s| s.version)))
        .with("kv_version", ver.number())
        .with("path", read::location(mount, &o.path, None)))
}

/// `main` of the module; with `--lookup` as `argv[1]`, the `proxshift.hashi_vault.kv` lookup's backend (JSON options on stdin).
pub fn main() -> ! {
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("--lookup")) {
        lookup::main()
    }
    ansible_module::run(argument_spec(), run)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "hashi_vault",
            "hashicorp_vault_info",
        );
    }

    fn run_args(args: Value) -> Value {
        module_testkit::TestModule::new("hashicorp_vault_info", super::argument_spec(), super::run)
            .run(&args)
            .0
    }

    #[test]
    fn bad_input_is_named_before_connecting() {
        let r = run_args(json!({"url": "http://127.0.0.1:9", "path": "/"}));
        assert_eq!(
            r["msg"],
            json!("path must name a secret inside the mount (it is empty)")
        );
        let r = run_args(json!({"url": "http://127.0.0.1:9", "path": "a", "version": 0}));
        assert_eq!(r["msg"], json!("version must be 1 or more (got 0)"));
    }

    #[test]
    fn the_token_is_masked_in_errors() {
        let r = run_args(
            json!({"url": "http://127.0.0.1:9", "token": "canary-token-7",
                                "retries": 0, "path": "a"}),
        );
        assert_eq!(r["failed"], json!(true));
        let text = r.to_string();
        assert!(!text.contains("canary-token-7"), "{text}");
        assert!(text.contains("cannot reach Vault"), "{text}");
    }
}
