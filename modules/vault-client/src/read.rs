//! Pure part of reading, shared by the `hashicorp_vault` (state=read) and `hashicorp_vault_info`
//! modules and the kv lookup: pick the value a caller asked for out of a KV read, or say what is missing.

use crate::Secret;
use serde_json::{Map, Value};

/// Why a read has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// Nothing at the path (or that version never existed).
    Secret,
    /// KV v2: the version is soft-deleted or destroyed.
    Deleted,
    /// The secret exists but has no such key.
    Key(String),
}

impl Missing {
    /// `at` is `mount/path` (with the version when one was asked for).
    pub fn describe(&self, at: &str) -> String {
        match self {
            Missing::Secret => format!("no secret at {at}"),
            Missing::Deleted => format!("the secret at {at} is deleted or destroyed"),
            Missing::Key(k) => format!("the secret at {at} has no key '{k}'"),
        }
    }
}

/// The whole secret (a dict), or the value of `key` in it.
pub fn pick(secret: Option<&Secret>, key: Option<&str>) -> Result<Value, Missing> {
    let secret = secret.ok_or(Missing::Secret)?;
    let data: &Map<String, Value> = secret.data.as_ref().ok_or(Missing::Deleted)?;
    match key {
        None => Ok(Value::Object(data.clone())),
        Some(k) => data
            .get(k)
            .cloned()
            .ok_or_else(|| Missing::Key(k.to_string())),
    }
}

/// `mount/path`, plus ` (version N)` when a version was asked for.
pub fn location(mount: &str, path: &str, version: Option<u64>) -> String {
    let at = format!("{}/{}", crate::clean_path(mount), crate::clean_path(path));
    match version {
        Some(n) => format!("{at} (version {n})"),
        None => at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(data: Option<Value>) -> Secret {
        Secret {
            data: data.map(|d| d.as_object().unwrap().clone()),
            version: Some(3),
            metadata: None,
        }
    }

    #[test]
    fn picks_a_key_or_the_whole_secret() {
        let s = secret(Some(json!({"a": 1, "b": "x"})));
        assert_eq!(pick(Some(&s), Some("b")), Ok(json!("x")));
        assert_eq!(pick(Some(&s), None), Ok(json!({"a": 1, "b": "x"})));
        assert_eq!(pick(Some(&s), Some("c")), Err(Missing::Key("c".into())));
    }

    #[test]
    fn missing_and_deleted_are_told_apart() {
        assert_eq!(pick(None, None), Err(Missing::Secret));
        assert_eq!(pick(Some(&secret(None)), Some("a")), Err(Missing::Deleted));
        assert_eq!(
            Missing::Key("k".into()).describe(&location("secret/", "/a/b/", Some(2))),
            "the secret at secret/a/b (version 2) has no key 'k'"
        );
    }

    #[test]
    fn picking_values() {
        // The hashicorp_vault module's cases (formerly its own `plan::pick`).
        let d = secret(Some(json!({"a": 1})));
        assert_eq!(pick(Some(&d), None), Ok(json!({"a": 1})));
        assert_eq!(pick(Some(&d), Some("a")), Ok(json!(1)));
        assert_eq!(pick(Some(&d), Some("b")), Err(Missing::Key("b".into())));
        assert_eq!(pick(None, None), Err(Missing::Secret));
        assert_eq!(pick(Some(&secret(None)), Some("a")), Err(Missing::Deleted));
    }
}
