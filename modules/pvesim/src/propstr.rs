//! Proxmox property strings (`virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10`):
//! parsing against a schema `format` object and printing back.
//!
//! pvesim keeps its own property-string code on purpose, apart from `pve-types`: the
//! simulator must not share the client's assumptions (a shared bug would agree with itself
//! and pass every test). It follows PVE's `parse_property_string`, not our client.

use serde_json::{Map, Value};

/// An ordered list of `key=value` pairs after alias resolution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PropString {
    pub items: Vec<(String, String)>,
}

impl PropString {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.items.iter_mut().find(|(k, _)| k == key) {
            Some(item) => item.1 = value,
            None => self.items.push((key.to_string(), value)),
        }
    }
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let pos = self.items.iter().position(|(k, _)| k == key)?;
        Some(self.items.remove(pos).1)
    }
    /// Prints with `default_key` first and without its name, the rest sorted by key,
    /// which is how qemu-server writes drive and NIC strings.
    pub fn print(&self, default_key: Option<&str>) -> String {
        let mut out: Vec<String> = Vec::new();
        if let Some(dk) = default_key {
            if let Some(v) = self.get(dk) {
                out.push(v.to_string());
            }
        }
        let mut rest: Vec<&(String, String)> = self
            .items
            .iter()
            .filter(|(k, _)| Some(k.as_str()) != default_key)
            .collect();
        rest.sort_by(|a, b| a.0.cmp(&b.0));
        out.extend(rest.iter().map(|(k, v)| format!("{k}={v}")));
        out.join(",")
    }
}

/// The key a format marks with `default_key`.
pub fn default_key(format: &Map<String, Value>) -> Option<&str> {
    format
        .iter()
        .find(|(_, v)| v.get("default_key").map(truthy).unwrap_or(false))
        .map(|(k, _)| k.as_str())
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_i64() != Some(0),
        Value::String(s) => s == "1",
        _ => false,
    }
}

/// A property string that does not fit its format (PVE's wording: the text is the reply's).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PropStringError {
    #[error("duplicate key in comma-separated list property: {0}")]
    DuplicateKey(String),
    #[error("value without key, but schema does not define a default key: {0}")]
    NoDefaultKey(String),
    #[error("invalid key in comma-separated list property: {0}")]
    InvalidKey(String),
}

/// Splits and resolves aliases; does not type-check values (see `schema::check_prop_string`).
/// Errors use PVE's wording.
pub fn parse(format: &Map<String, Value>, text: &str) -> Result<PropString, PropStringError> {
    let dk = default_key(format);
    let mut ps = PropString::default();
    for part in text.split(',') {
        if part.is_empty() {
            continue;
        }
        let (mut key, value) = match part.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match dk {
                Some(dk) => {
                    if ps.get(dk).is_some() {
                        return Err(PropStringError::DuplicateKey(dk.to_string()));
                    }
                    (dk.to_string(), part.to_string())
                }
                None => return Err(PropStringError::NoDefaultKey(part.to_string())),
            },
        };
        let Some(schema) = format.get(&key) else {
            return Err(PropStringError::InvalidKey(key));
        };
        // `virtio=MAC` is {keyAlias: model, alias: macaddr}: model=virtio, macaddr=MAC.
        if let Some(key_alias) = schema.get("keyAlias").and_then(Value::as_str) {
            let alias = schema
                .get("alias")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if ps.get(key_alias).is_some() {
                return Err(PropStringError::DuplicateKey(key_alias.to_string()));
            }
            ps.items.push((key_alias.to_string(), key.clone()));
            key = alias.to_string();
        } else if let Some(alias) = schema.get("alias").and_then(Value::as_str) {
            key = alias.to_string();
        }
        if ps.get(&key).is_some() {
            return Err(PropStringError::DuplicateKey(key));
        }
        ps.items.push((key, value));
    }
    Ok(ps)
}

/// Parses a string in the generic `k=v,...` form with an optional default key name, for
/// config values whose schema is not at hand (e.g. `memory`, `boot`, `agent`).
pub fn parse_loose(text: &str, default_key: &str) -> PropString {
    let mut ps = PropString::default();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) => ps.items.push((k.to_string(), v.to_string())),
            None => ps.items.push((default_key.to_string(), part.to_string())),
        }
    }
    ps
}

#[cfg(test)]
mod tests {
    use super::{parse, parse_loose, Map, Value};
    use serde_json::json;

    fn net_format() -> Map<String, Value> {
        json!({
            "model": {"default_key": 1, "type": "string", "enum": ["virtio", "e1000"]},
            "macaddr": {"type": "string", "optional": 1},
            "bridge": {"type": "string", "optional": 1},
            "tag": {"type": "integer", "optional": 1},
            "virtio": {"alias": "macaddr", "keyAlias": "model"},
            "e1000": {"alias": "macaddr", "keyAlias": "model"}
        })
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn key_alias_sets_model_and_mac() {
        let ps = parse(
            &net_format(),
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10",
        )
        .unwrap();
        assert_eq!(ps.get("model"), Some("virtio"));
        assert_eq!(ps.get("macaddr"), Some("BC:24:11:00:00:01"));
        assert_eq!(ps.get("tag"), Some("10"));
    }

    #[test]
    fn default_key_and_print_order() {
        let ps = parse(&net_format(), "virtio,tag=5,bridge=vmbr1").unwrap();
        assert_eq!(ps.print(Some("model")), "virtio,bridge=vmbr1,tag=5");
    }

    #[test]
    fn unknown_and_duplicate_keys_are_errors() {
        assert_eq!(
            parse(&net_format(), "virtio,bogus=1")
                .unwrap_err()
                .to_string(),
            "invalid key in comma-separated list property: bogus"
        );
        assert!(parse(&net_format(), "virtio,e1000")
            .unwrap_err()
            .to_string()
            .contains("duplicate key"));
        assert!(
            parse(&net_format(), "model=virtio,virtio=BC:24:11:00:00:01")
                .unwrap_err()
                .to_string()
                .contains("duplicate key")
        );
    }

    #[test]
    fn set_remove_roundtrip() {
        let mut ps = parse_loose("local-lvm:vm-1-disk-0,format=raw", "file");
        assert_eq!(ps.remove("format").as_deref(), Some("raw"));
        ps.set("size", "32G");
        assert_eq!(ps.print(Some("file")), "local-lvm:vm-1-disk-0,size=32G");
    }
}
