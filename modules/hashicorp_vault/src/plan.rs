//! The pure part of the module: what an idempotent write must do, which keys change, the masked diff.
//! No I/O here; `lib.rs` feeds it what Vault answered (picking a read value is `vault_client::read`).

use serde_json::{json, Map, Value};
use vault_client::KvVersion;

/// What a diff shows instead of a value.
pub const MASKED: &str = "<masked>";

/// Key names (never values) that a write adds, changes or removes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    pub fn to_json(&self) -> Value {
        json!({"added": self.added, "changed": self.changed, "removed": self.removed})
    }
}

/// The key-level difference between two secrets.
pub fn diff_keys(before: &Map<String, Value>, after: &Map<String, Value>) -> Changes {
    let mut c = Changes::default();
    for (k, v) in after {
        match before.get(k) {
            None => c.added.push(k.clone()),
            Some(old) if old != v => c.changed.push(k.clone()),
            Some(_) => {}
        }
    }
    c.removed = before
        .keys()
        .filter(|k| !after.contains_key(*k))
        .cloned()
        .collect();
    c
}

/// The outcome of comparing what Vault holds with what the task wants.
#[derive(Debug, Clone, PartialEq)]
pub struct WritePlan {
    /// The whole secret to write (with `merge`, the current keys plus the desired ones).
    pub payload: Map<String, Value>,
    pub changes: Changes,
    /// Whether a write is needed at all.
    pub write: bool,
}

/// `current` is the live secret's data (`None`: absent, or the latest KV v2 version is deleted).
pub fn plan_write(
    current: Option<&Map<String, Value>>,
    desired: &Map<String, Value>,
    merge: bool,
) -> WritePlan {
    let empty = Map::new();
    let before = current.unwrap_or(&empty);
    let mut payload = if merge { before.clone() } else { Map::new() };
    for (k, v) in desired {
        payload.insert(k.clone(), v.clone());
    }
    let changes = diff_keys(before, &payload);
    // Writing `{}` where nothing exists still creates the secret.
    let write = current.is_none() || !changes.is_empty();
    WritePlan {
        payload,
        changes,
        write,
    }
}

/// The `options.cas` to send: KV v1 has none; an explicit `cas` wins; otherwise the version just
/// read (0 when the secret never existed), so a concurrent writer makes this write fail, not vanish.
pub fn cas_for(kv: KvVersion, explicit: Option<u64>, read_version: Option<u64>) -> Option<u64> {
    match kv {
        KvVersion::V1 => None,
        KvVersion::V2 => Some(explicit.unwrap_or(read_version.unwrap_or(0))),
    }
}

/// The diff pair for a write: every key present on each side, values replaced by placeholders that
/// differ only where the value changes, so the diff shows which keys change and nothing else.
pub fn masked_diff(before: Option<&Map<String, Value>>, plan: &WritePlan) -> (Value, Value) {
    let before_v = match before {
        Some(b) => Value::Object(b.keys().map(|k| (k.clone(), json!(MASKED))).collect()),
        None => json!({}),
    };
    let after_v = plan
        .payload
        .keys()
        .map(|k| {
            let shown = if plan.changes.added.contains(k) {
                format!("{MASKED} (added)")
            } else if plan.changes.changed.contains(k) {
                format!("{MASKED} (changed)")
            } else {
                MASKED.to_string()
            };
            (k.clone(), json!(shown))
        })
        .collect();
    (before_v, Value::Object(after_v))
}

/// Every string (and number, as text) inside a secret: what the module must mask in its output.
pub fn secret_strings(v: &Value, into: &mut Vec<String>) {
    match v {
        Value::String(s) if !s.is_empty() => into.push(s.clone()),
        Value::Number(n) => into.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|x| secret_strings(x, into)),
        Value::Object(m) => m.values().for_each(|x| secret_strings(x, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn equal_data_means_no_write() {
        let cur = m(json!({"user": "a", "pass": "b"}));
        let p = plan_write(Some(&cur), &m(json!({"pass": "b", "user": "a"})), false);
        assert!(!p.write && p.changes.is_empty());
    }

    #[test]
    fn replace_reports_added_changed_removed() {
        let cur = m(json!({"user": "a", "pass": "b", "old": 1}));
        let p = plan_write(
            Some(&cur),
            &m(json!({"user": "a", "pass": "c", "new": true})),
            false,
        );
        assert!(p.write);
        assert_eq!(
            p.changes,
            Changes {
                added: vec!["new".into()],
                changed: vec!["pass".into()],
                removed: vec!["old".into()]
            }
        );
        assert_eq!(p.payload, m(json!({"user": "a", "pass": "c", "new": true})));
    }

    #[test]
    fn merge_keeps_other_keys() {
        let cur = m(json!({"user": "a", "pass": "b"}));
        let p = plan_write(Some(&cur), &m(json!({"pass": "b"})), true);
        assert!(!p.write, "a subset that matches is no change under merge");
        let p = plan_write(Some(&cur), &m(json!({"pass": "z"})), true);
        assert_eq!(p.payload, m(json!({"user": "a", "pass": "z"})));
        assert_eq!(p.changes.changed, vec!["pass"]);
        assert!(p.changes.removed.is_empty());
    }

    #[test]
    fn absent_or_deleted_secret_is_written_even_when_empty() {
        let p = plan_write(None, &Map::new(), false);
        assert!(p.write && p.changes.is_empty());
        let p = plan_write(None, &m(json!({"k": "v"})), true);
        assert_eq!(p.changes.added, vec!["k"]);
    }

    #[test]
    fn types_matter() {
        let cur = m(json!({"port": "8443"}));
        assert!(plan_write(Some(&cur), &m(json!({"port": 8443})), false).write);
    }

    #[test]
    fn cas_choice() {
        assert_eq!(cas_for(KvVersion::V1, Some(3), Some(3)), None);
        assert_eq!(cas_for(KvVersion::V2, None, None), Some(0));
        assert_eq!(cas_for(KvVersion::V2, None, Some(4)), Some(4));
        assert_eq!(cas_for(KvVersion::V2, Some(2), Some(4)), Some(2));
    }

    #[test]
    fn diff_shows_keys_not_values() {
        let cur = m(json!({"user": "canary-user", "pass": "canary-old", "gone": "canary-gone"}));
        let p = plan_write(
            Some(&cur),
            &m(json!({"user": "canary-user", "pass": "canary-new", "add": "canary-add"})),
            false,
        );
        let (b, a) = masked_diff(Some(&cur), &p);
        let text = format!("{b}{a}");
        assert!(!text.contains("canary"), "{text}");
        assert_eq!(b, json!({"user": MASKED, "pass": MASKED, "gone": MASKED}));
        assert_eq!(
            a,
            json!({"user": MASKED, "pass": "<masked> (changed)", "add": "<masked> (added)"})
        );
        let (b, _) = masked_diff(None, &plan_write(None, &m(json!({"x": 1})), false));
        assert_eq!(b, json!({}));
    }

    #[test]
    fn secret_strings_walks_everything() {
        let mut out = vec![];
        secret_strings(
            &json!({"a": "x", "b": [1, {"c": "y"}], "d": true, "e": ""}),
            &mut out,
        );
        assert_eq!(out, vec!["x", "1", "y"]);
    }
}
