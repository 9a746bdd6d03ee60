//! The pure half: which objects the task names, what counts as a change, and what a diff or a
//! result may show of them.
//!
//! How `changed` is decided: every object is first applied with `dryRun=All`. The server answers
//! with exactly what it would store (its validation, defaulting, admission and the merge of the
//! other field managers' fields included) and stores nothing. That answer is compared with the
//! object as it is now, both [`normalize`]d: `metadata.managedFields` (bookkeeping that moves with
//! every apply, not state), `resourceVersion` and `generation` (they follow a write, which the dry
//! run did not make) are left out. Equal means the apply would change nothing: no write is sent
//! and `changed` is false. Different means the real apply is sent (in check mode it is not: the dry
//! run was the whole run). So check mode and a real run take the same decision from the same
//! server answer, and a converged object costs a GET and a dry-run PATCH, never a write.

use base64::Engine;
use serde_json::{Map, Value};

use crate::error::{ConfigError, ObjectProblem};

/// One object of the task.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Where it came from, for messages: `objects[0]`, `definition document 2`.
    pub origin: String,
    pub api_version: String,
    pub kind: String,
    /// `None` only with state=read: every object of the kind.
    pub name: Option<String>,
    /// As given (`metadata.namespace`); which one is used is decided once the kind's scope is known.
    pub namespace: Option<String>,
    pub body: Value,
}

impl Target {
    /// `v1 Secret ns/name` (the namespace once resolved), for messages and diff headers.
    pub fn describe(&self, ns: Option<&str>) -> String {
        let name = self.name.as_deref().unwrap_or("*");
        match ns {
            Some(ns) => format!("{} {} {ns}/{name}", self.api_version, self.kind),
            None => format!("{} {} {name}", self.api_version, self.kind),
        }
    }
}

/// The task's objects, `objects` first then the documents of `definition`, each checked for
/// apiVersion, kind and (unless `names_optional`) metadata.name.
pub fn targets(
    objects: &[Value],
    definition: Option<&Value>,
    names_optional: bool,
) -> Result<Vec<Target>, ConfigError> {
    let mut out = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        out.push(target(format!("objects[{i}]"), o, names_optional)?);
    }
    for (i, o) in definition_documents(definition)?.iter().enumerate() {
        out.push(target(
            format!("definition document {}", i + 1),
            o,
            names_optional,
        )?);
    }
    if out.is_empty() {
        return Err(ConfigError::Nothing);
    }
    Ok(out)
}

/// `definition` as kubernetes.core's `k8s` takes it: YAML text (several documents), one mapping, or a
/// list of mappings (a nested list is flattened, as there); null or empty text is nothing.
pub fn definition_documents(definition: Option<&Value>) -> Result<Vec<Value>, ConfigError> {
    match definition {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(kube_client::objects::parse_documents(text)?),
        Some(Value::Object(_)) => Ok(vec![definition.cloned().unwrap_or_default()]),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::Null => {}
                    Value::Array(_) => out.extend(definition_documents(Some(item))?),
                    _ => out.push(item.clone()),
                }
            }
            Ok(out)
        }
        Some(Value::Bool(_)) => Err(ConfigError::DefinitionType("a boolean")),
        Some(Value::Number(_)) => Err(ConfigError::DefinitionType("a number")),
    }
}

fn target(origin: String, o: &Value, names_optional: bool) -> Result<Target, ConfigError> {
    let bad = |problem| ConfigError::BadObject {
        origin: origin.clone(),
        problem,
    };
    if !o.is_object() {
        return Err(bad(ObjectProblem::NotAnObject));
    }
    let text = |ptr: &str, what: &'static str, required: bool| match o.pointer(ptr) {
        None | Some(Value::Null) if !required => Ok(None),
        None | Some(Value::Null) => Err(bad(ObjectProblem::Missing(what))),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(bad(ObjectProblem::NotAString(what))),
    };
    let api_version = text("/apiVersion", "apiVersion", true)?.unwrap_or_default();
    let kind = text("/kind", "kind", true)?.unwrap_or_default();
    let name = text("/metadata/name", "metadata.name", !names_optional)?;
    let namespace = text("/metadata/namespace", "metadata.namespace", false)?;
    Ok(Target {
        origin: origin.clone(),
        api_version,
        kind,
        name,
        namespace,
        body: kube_client::objects::clean_manifest(o),
    })
}

/// The namespace an object is applied in: its own, else `default_ns`, else `default`; none for a
/// cluster-scoped kind (whose body then carries none either: the server's path has none).
pub fn resolve_namespace(
    t: &mut Target,
    namespaced: bool,
    default_ns: Option<&str>,
) -> Option<String> {
    if !namespaced {
        if let Some(Value::Object(meta)) = t.body.get_mut("metadata") {
            meta.remove("namespace");
        }
        return None;
    }
    let ns = t
        .namespace
        .clone()
        .or_else(|| default_ns.filter(|n| !n.is_empty()).map(str::to_string))
        .unwrap_or_else(|| "default".into());
    if let Some(Value::Object(meta)) = t.body.get_mut("metadata") {
        meta.insert("namespace".into(), Value::String(ns.clone()));
    }
    Some(ns)
}

/// The object without what moves on every write but is not its state (see the module comment).
pub fn normalize(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(Value::Object(meta)) = o.get_mut("metadata") {
        for k in ["managedFields", "resourceVersion", "generation"] {
            meta.remove(k);
        }
    }
    o
}

/// The object as compared for a change: [`normalize`]d, without `status`.
fn comparable(obj: &Value) -> Value {
    let mut o = normalize(obj);
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    o
}

/// Would applying change the object? `current` is `None` when it does not exist yet.
pub fn would_change(current: Option<&Value>, predicted: &Value) -> bool {
    match current {
        None => true,
        Some(c) => comparable(c) != comparable(predicted),
    }
}

const HIDDEN: &str = "<hidden>";
const HIDDEN_CHANGED: &str = "<hidden, changed>";
/// kubectl keeps the whole applied object, Secret data included, in this annotation.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn is_secret(o: &Value) -> bool {
    o.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// A before/after pair for a diff, normalised, with a Secret's `data`/`stringData` values (and
/// kubectl's last-applied annotation) hidden: `<hidden>` where the value stays, `<hidden, changed>`
/// on the after side where it changes, so a diff still shows *which* keys change.
pub fn masked_pair(before: &Value, after: &Value) -> (Value, Value) {
    let (mut b, mut a) = (normalize(before), normalize(after));
    if !is_secret(&b) && !is_secret(&a) {
        return (b, a);
    }
    let old = b.clone();
    for key in ["data", "stringData"] {
        if let Some(Value::Object(m)) = b.get_mut(key) {
            m.values_mut()
                .for_each(|v| *v = Value::String(HIDDEN.into()));
        }
        if let Some(Value::Object(m)) = a.get_mut(key) {
            for (k, v) in m.iter_mut() {
                let same = old.get(key).and_then(|d| d.get(k)) == Some(&*v);
                let mark = if same { HIDDEN } else { HIDDEN_CHANGED };
                *v = Value::String(mark.into());
            }
        }
    }
    for o in [&mut b, &mut a] {
        if let Some(Value::Object(ann)) = o.pointer_mut("/metadata/annotations") {
            if let Some(v) = ann.get_mut(LAST_APPLIED) {
                *v = Value::String(HIDDEN.into());
            }
        }
    }
    (b, a)
}

/// One object as a result may show it: without managedFields, Secret values hidden. Its
/// `resourceVersion` is kept: a caller that merges into what it read applies over that version.
pub fn masked(obj: &Value) -> Value {
    let mut out = masked_pair(obj, obj).0;
    let rv = obj.pointer("/metadata/resourceVersion").cloned();
    if let (Some(rv), Some(Value::Object(meta))) = (rv, out.get_mut("metadata")) {
        meta.insert("resourceVersion".into(), rv);
    }
    out
}

/// The shortest secret value registered for masking: shorter ones would blank out ordinary words
/// of the output, and the diff and results hide Secret values by structure anyway.
const MIN_SECRET_LEN: usize = 4;

/// A Secret's values as the task gives them and as the server returns them (`data` base64 and
/// decoded, `stringData` plain and encoded), for masking everywhere in the output (an API error
/// message may quote a value).
pub fn secret_values(obj: &Value) -> Vec<String> {
    if !is_secret(obj) {
        return Vec::new();
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let strings = |key: &str| -> Vec<String> {
        obj.get(key)
            .and_then(Value::as_object)
            .map(|m| {
                m.values()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    // (plain, encoded) pairs; a value too short to mask goes with both of its forms.
    let mut pairs = Vec::new();
    for v in strings("data") {
        let plain = b64
            .decode(v.as_bytes())
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        pairs.push((plain.unwrap_or_else(|| v.clone()), v));
    }
    for v in strings("stringData") {
        pairs.push((v.clone(), b64.encode(v.as_bytes())));
    }
    let mut out = Vec::new();
    for (plain, encoded) in pairs {
        if plain.len() >= MIN_SECRET_LEN {
            out.push(plain);
            out.push(encoded);
        }
    }
    out
}

/// `2 created, 1 unchanged` over the per-object actions, in the order first seen.
pub fn summary(actions: &[&str]) -> String {
    let mut counts: Map<String, Value> = Map::new();
    for a in actions {
        let n = counts.get(*a).and_then(Value::as_u64).unwrap_or(0);
        counts.insert((*a).to_string(), Value::from(n + 1));
    }
    counts
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n",
            "resourceVersion": "7", "managedFields": [{"manager": "x"}]}, "data": data})
    }

    #[test]
    fn targets_come_from_objects_then_definition() {
        let objs = [json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})];
        let def =
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: a}\nstatus: {}\n";
        let t = targets(&objs, Some(&json!(def)), false).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].origin, "objects[0]");
        assert_eq!(t[1].origin, "definition document 1");
        assert_eq!(t[1].namespace.as_deref(), Some("a"));
        // A manifest's status is the server's: never applied.
        assert!(t[1].body.get("status").is_none());
        assert_eq!(t[1].describe(Some("a")), "v1 ConfigMap a/c");
    }

    /// kubernetes.core's `definition`: YAML text, one mapping, or a list of mappings (nested lists
    /// flattened), so a `k8s` task ported by its module name alone works.
    #[test]
    fn definition_takes_what_kubernetes_core_takes() {
        let cm = |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "a"}});
        let one = targets(&[], Some(&cm("x")), false).unwrap();
        assert_eq!(one[0].name.as_deref(), Some("x"));
        let list = targets(&[], Some(&json!([cm("x"), [cm("y")], null])), false).unwrap();
        let names: Vec<_> = list.iter().map(|t| t.name.clone().unwrap()).collect();
        assert_eq!(names, ["x", "y"]);
        assert_eq!(list[1].origin, "definition document 2");
        assert!(matches!(
            targets(&[], Some(&json!(true)), false),
            Err(ConfigError::DefinitionType("a boolean"))
        ));
        assert!(matches!(
            targets(&[], Some(&json!([])), false),
            Err(ConfigError::Nothing)
        ));
        let e = targets(&[], Some(&json!(["x"])), false).unwrap_err();
        assert_eq!(e.to_string(), "definition document 1 is not a mapping");
    }

    #[test]
    fn bad_objects_name_the_entry_and_the_field() {
        let e = targets(
            &[json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})],
            None,
            false,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "objects[0] has no metadata.name");
        let e = targets(&[json!({"kind": "ConfigMap"})], None, false).unwrap_err();
        assert_eq!(e.to_string(), "objects[0] has no apiVersion");
        let e = targets(&[json!({"apiVersion": "v1", "kind": 3})], None, true).unwrap_err();
        assert_eq!(e.to_string(), "objects[0] kind must be a non-empty string");
        let e = targets(&[json!("x")], None, false).unwrap_err();
        assert!(matches!(
            e,
            ConfigError::BadObject {
                problem: ObjectProblem::NotAnObject,
                ..
            }
        ));
        assert!(matches!(
            targets(&[], Some(&json!("---\n")), false),
            Err(ConfigError::Nothing)
        ));
        let e = targets(&[], Some(&json!("a: [\n")), false).unwrap_err();
        assert!(
            e.to_string().starts_with("definition: YAML document 1"),
            "{e}"
        );
        // state=read lists a kind when no name is given.
        assert_eq!(
            targets(&[json!({"apiVersion": "v1", "kind": "Node"})], None, true).unwrap()[0].name,
            None
        );
    }

    #[test]
    fn namespaces_resolve_by_scope() {
        let mut t = targets(
            &[json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})],
            None,
            false,
        )
        .unwrap()
        .remove(0);
        assert_eq!(
            resolve_namespace(&mut t, true, Some("apps")).as_deref(),
            Some("apps")
        );
        assert_eq!(t.body["metadata"]["namespace"], json!("apps"));
        assert_eq!(
            resolve_namespace(&mut t, true, None).as_deref(),
            Some("default")
        );
        let mut n = targets(&[json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w", "namespace": "x"}})], None, false)
            .unwrap()
            .remove(0);
        assert_eq!(resolve_namespace(&mut n, false, Some("apps")), None);
        assert!(n.body["metadata"].get("namespace").is_none());
    }

    #[test]
    fn a_change_is_a_difference_in_state_not_in_bookkeeping() {
        let cur = json!({"metadata": {"name": "a", "resourceVersion": "5", "generation": 2,
            "managedFields": [{"manager": "kubectl"}]}, "spec": {"x": 1}});
        let same = json!({"metadata": {"name": "a", "resourceVersion": "5", "generation": 3,
            "managedFields": [{"manager": "kubectl"}, {"manager": "proxshift"}]}, "spec": {"x": 1}});
        assert!(!would_change(Some(&cur), &same));
        // A controller's status update between the GET and the dry run is not our change.
        let heartbeat = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"beat": 2}});
        assert!(!would_change(Some(&cur), &heartbeat));
        let other = json!({"metadata": {"name": "a"}, "spec": {"x": 2}});
        assert!(would_change(Some(&cur), &other));
        assert!(would_change(None, &same));
    }

    #[test]
    fn a_result_keeps_the_resource_version_but_not_managed_fields() {
        let shown = masked(&secret(json!({"a": "b2xk"})));
        assert_eq!(shown["metadata"]["resourceVersion"], json!("7"));
        assert!(shown["metadata"].get("managedFields").is_none());
        assert_eq!(shown["data"]["a"], json!(HIDDEN));
    }

    #[test]
    fn secret_values_are_hidden_but_changed_keys_show() {
        let before = secret(json!({"a": "b2xk", "b": "c2FtZQ=="}));
        let mut after = secret(json!({"a": "bmV3", "b": "c2FtZQ==", "c": "YWRkZWQ="}));
        after["metadata"]["annotations"] = json!({LAST_APPLIED: "{\"data\":{\"a\":\"bmV3\"}}"});
        let (b, a) = masked_pair(&before, &after);
        assert_eq!(b["data"], json!({"a": HIDDEN, "b": HIDDEN}));
        assert_eq!(
            a["data"],
            json!({"a": HIDDEN_CHANGED, "b": HIDDEN, "c": HIDDEN_CHANGED})
        );
        assert_eq!(a["metadata"]["annotations"][LAST_APPLIED], json!(HIDDEN));
        assert!(a["metadata"].get("managedFields").is_none());
        let text = format!("{b}{a}");
        for v in ["b2xk", "bmV3", "c2FtZQ==", "YWRkZWQ="] {
            assert!(!text.contains(v), "{text}");
        }
        let plain = json!({"kind": "ConfigMap", "data": {"k": "v"}});
        assert_eq!(masked(&plain), plain);
    }

    #[test]
    fn secret_values_cover_both_encodings() {
        let s = json!({"kind": "Secret", "data": {"t": "c2VjcmV0LXZhbHVl"}, "stringData": {"p": "pass-word"}});
        let v = secret_values(&s);
        for want in [
            "c2VjcmV0LXZhbHVl",
            "secret-value",
            "pass-word",
            "cGFzcy13b3Jk",
        ] {
            assert!(v.contains(&want.to_string()), "{v:?}");
        }
        assert!(
            secret_values(&json!({"kind": "ConfigMap", "data": {"a": "long-value"}})).is_empty()
        );
        assert!(secret_values(&json!({"kind": "Secret", "stringData": {"a": "x"}})).is_empty());
    }

    #[test]
    fn summaries_count_actions() {
        assert_eq!(
            summary(&["created", "unchanged", "created"]),
            "2 created, 1 unchanged"
        );
    }
}
