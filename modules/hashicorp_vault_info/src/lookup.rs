//! Backend of the `proxshift.hashi_vault.kv` lookup: the plugin (a thin Python file) sends the terms
//! and its options as JSON on stdin and gets one value per term back, which it marks unsafe.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use serde::Deserialize;
use serde_json::Value;
use vault_client::KvVersion;

use crate::version_option;
use vault_client::module_options::{connection_options, ConnectionOptions, KvVersions};
use vault_client::read::{location, pick};

/// Options the plugin sends but does not document: the terms, and whether `default` was given
/// (a `default` of `None` is a valid default).
pub const INTERNAL_OPTIONS: [&str; 2] = ["terms", "use_default"];

/// The lookup's options; `plugins/lookup/kv.py` documents these minus [`INTERNAL_OPTIONS`] (a test
/// compares).
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::list("terms", Type::Str).required(),
        Opt::str("key"),
        Opt::int("version"),
        Opt::raw("default"),
        Opt::bool("use_default").default(false),
        Opt::str("engine_mount_point").default("secret"),
        Opt::int("kv_version").choices(&[1, 2]),
        Opt::bool("return_metadata").default(false),
    ])
    .with(connection_options())
}

#[derive(Deserialize)]
struct Options {
    terms: Vec<String>,
    key: Option<String>,
    version: Option<i64>,
    default: Option<Value>,
    use_default: bool,
    engine_mount_point: String,
    kv_version: Option<u64>,
    return_metadata: bool,
    #[serde(flatten)]
    conn: ConnectionOptions,
}

/// `main` of `hashicorp_vault_info --lookup`.
pub fn main() -> ! {
    ansible_module::run_plugin("proxshift.hashi_vault.kv", argument_spec(), run)
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let version = version_option(o.version)?;
    if let Some(t) = o
        .terms
        .iter()
        .find(|t| vault_client::clean_path(t).is_empty())
    {
        return Err(Failure::new(format!(
            "the term {t:?} is not a secret path (it is empty)"
        )));
    }
    let mut kv = KvVersions::new(o.kv_version)?;
    let conn = o.conn.resolved_by_plugin();
    let vault = conn.connect(m)?;
    let mount = o.engine_mount_point.as_str();
    let ver = kv.get(&vault, mount)?;
    if version.is_some() && ver == KvVersion::V1 {
        return Err(Failure::new(format!(
            "version is set but mount '{mount}' is KV v1, which has no versions"
        )));
    }
    let mut values = Vec::with_capacity(o.terms.len());
    for term in &o.terms {
        let at = location(mount, term, version);
        let secret = vault
            .kv_read(ver, mount, term, version)
            .map_err(|e| Failure::new(format!("reading {at}: {e}")))?;
        match (pick(secret.as_ref(), o.key.as_deref()), o.use_default) {
            (Ok(v), _) if o.return_metadata => values.push(with_metadata(v, secret.as_ref())),
            (Ok(v), _) => values.push(v),
            (Err(_), true) => values.push(o.default.clone().unwrap_or(Value::Null)),
            (Err(missing), false) => {
                return Err(Failure::new(format!(
                    "{} (set default to allow this)",
                    missing.describe(&at)
                )))
            }
        }
    }
    Ok(Outcome::new(false).with("values", Value::Array(values)))
}

/// `{data, metadata}` of a read (`return_metadata`): the picked value and the secret's KV v2 metadata
/// (`version`, `created_time`, ...; `null` on KV v1).
fn with_metadata(data: Value, secret: Option<&vault_client::Secret>) -> Value {
    let metadata = secret
        .and_then(|s| s.metadata.clone())
        .unwrap_or(Value::Null);
    serde_json::json!({"data": data, "metadata": metadata})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_goes_beside_the_data() {
        let secret = vault_client::Secret {
            data: None,
            version: Some(3),
            metadata: Some(serde_json::json!({"version": 3})),
        };
        assert_eq!(
            with_metadata(serde_json::json!("v"), Some(&secret)),
            serde_json::json!({"data": "v", "metadata": {"version": 3}})
        );
        assert_eq!(
            with_metadata(serde_json::json!({}), None),
            serde_json::json!({"data": {}, "metadata": null})
        );
    }

    #[test]
    fn plugin_documentation_matches_spec() {
        module_testkit::assert_plugin_docs_match(
            &argument_spec(),
            "hashi_vault",
            "lookup/kv.py",
            "kv",
            &INTERNAL_OPTIONS,
            &["_terms"],
        );
    }
}
