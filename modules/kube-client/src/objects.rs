//! Pure helpers on Kubernetes objects as JSON: resource paths, conditions, "is the desired state
//! already there", JSON merge patches, and masking Secret data for diffs.

use serde_json::{Map, Value};

/// Where a kind lives in the API: `group/version` (`v1` for core), plural, namespaced or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub api_version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Resource {
    pub fn new(api_version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Resource {
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// The collection path, e.g. `/api/v1/namespaces/x/secrets` or `/apis/g/v1/things`.
    pub fn collection(&self, namespace: Option<&str>) -> String {
        let root = api_root(&self.api_version);
        match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{root}/namespaces/{ns}/{}", self.plural),
            _ => format!("{root}/{}", self.plural),
        }
    }

    pub fn item(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{name}", self.collection(namespace))
    }

    /// A list item as `kubectl get -o json` shows it: the API server leaves `apiVersion` and `kind`
    /// out of a List's items (they belong to the list), and whatever judges an item by its kind (a
    /// Secret's values are hidden by kind) needs them back.
    pub fn typed(&self, mut item: Value) -> Value {
        if let Value::Object(m) = &mut item {
            m.entry("apiVersion")
                .or_insert_with(|| Value::String(self.api_version.clone()));
            m.entry("kind")
                .or_insert_with(|| Value::String(self.kind.clone()));
        }
        item
    }

    /// `Secret open-cluster-management-agent/bootstrap-hub-kubeconfig`, for messages.
    pub fn describe(&self, namespace: Option<&str>, name: &str) -> String {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{} {ns}/{name}", self.kind),
            _ => format!("{} {name}", self.kind),
        }
    }
}

/// `/api/v1` for the core group, `/apis/<group>/<version>` otherwise.
pub fn api_root(api_version: &str) -> String {
    if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    }
}

/// The resources the modules use; anything else is found by discovery.
pub mod known {
    use super::Resource;
    pub fn namespaces() -> Resource {
        Resource::new("v1", "Namespace", "namespaces", false)
    }
    pub fn secrets() -> Resource {
        Resource::new("v1", "Secret", "secrets", true)
    }
    pub fn nodes() -> Resource {
        Resource::new("v1", "Node", "nodes", false)
    }
    pub fn pods() -> Resource {
        Resource::new("v1", "Pod", "pods", true)
    }
    pub fn certificate_signing_requests() -> Resource {
        Resource::new(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            false,
        )
    }
    pub fn managed_clusters() -> Resource {
        Resource::new(
            "cluster.open-cluster-management.io/v1",
            "ManagedCluster",
            "managedclusters",
            false,
        )
    }
    pub fn klusterlet_addon_configs() -> Resource {
        Resource::new(
            "agent.open-cluster-management.io/v1",
            "KlusterletAddonConfig",
            "klusterletaddonconfigs",
            true,
        )
    }
    pub fn cluster_versions() -> Resource {
        Resource::new(
            "config.openshift.io/v1",
            "ClusterVersion",
            "clusterversions",
            false,
        )
    }
    pub fn cluster_operators() -> Resource {
        Resource::new(
            "config.openshift.io/v1",
            "ClusterOperator",
            "clusteroperators",
            false,
        )
    }
    pub fn machine_config_pools() -> Resource {
        Resource::new(
            "machineconfiguration.openshift.io/v1",
            "MachineConfigPool",
            "machineconfigpools",
            false,
        )
    }
}

/// One entry of `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

pub fn conditions(obj: &Value) -> Vec<Condition> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| Condition {
                    type_: str_at(c, "type").unwrap_or_default(),
                    status: str_at(c, "status").unwrap_or_else(|| "Unknown".into()),
                    reason: str_at(c, "reason"),
                    message: str_at(c, "message"),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a Kubernetes timestamp (YYYY-MM-DDTHH:MM:SSZ): {0:?}")]
pub struct TimeError(pub String);

/// Seconds since the Unix epoch of a `metav1.Time` (RFC 3339 in UTC, as the API server writes it).
pub fn parse_time(s: &str) -> Result<i64, TimeError> {
    let bad = || TimeError(s.to_string());
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<i64>().map_err(|_| bad());
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return Err(bad());
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(days * 86_400 + h * 3600 + mi * 60 + se)
}

/// When the object's condition `type_` last changed (`lastTransitionTime`, Unix seconds), if it has one.
pub fn condition_since(obj: &Value, type_: &str) -> Option<i64> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .and_then(|t| parse_time(t).ok())
}

fn str_at(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// Which of the `wanted` `(type, status)` pairs the object does not meet yet, each as
/// `Type=Status (now: Actual, reason: message)`. Empty means all are met. Conditions count only
/// with the exact status (a condition that merely exists is not "True").
pub fn unmet(obj: &Value, wanted: &[(&str, &str)]) -> Vec<String> {
    let have = conditions(obj);
    wanted
        .iter()
        .filter_map(|(t, s)| {
            let c = have.iter().find(|c| c.type_ == *t);
            match c {
                Some(c) if c.status == *s => None,
                Some(c) => {
                    let mut why = format!("{t}={s} (now {}", c.status);
                    if let Some(r) = c.reason.as_deref().filter(|r| !r.is_empty()) {
                        why.push_str(&format!(", {r}"));
                    }
                    if let Some(m) = c.message.as_deref().filter(|m| !m.is_empty()) {
                        why.push_str(&format!(": {m}"));
                    }
                    why.push(')');
                    Some(why)
                }
                None => Some(format!("{t}={s} (not reported yet)")),
            }
        })
        .collect()
}

/// The value at a JSONPath-like `path` in `obj`: dotted keys with optional list indexes,
/// `status.phase`, `status.conditions[0].type`, `.spec.x` or `{.spec.x}` (kubectl's spelling). `None`
/// when any step is missing (or the path is malformed: an index that is not a number).
pub fn value_at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let p = p.strip_prefix('.').unwrap_or(p);
    let mut cur = obj;
    for part in p.split('.').filter(|s| !s.is_empty()) {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            cur = cur.get(key)?;
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let i: usize = r[..end].parse().ok()?;
            cur = cur.get(i)?;
            rest = &r[end + 1..];
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(cur)
}

/// A scalar as text for comparisons (`"Succeeded"`, `3`, `true`); objects and lists as JSON.
pub fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Which `(path, value)` checks the object does not meet yet, each as `path=value (now X)`; a check
/// without a value wants the path to exist (not null). Values compare as text ([`scalar_text`]).
pub fn unmet_values(obj: &Value, wanted: &[(&str, Option<&str>)]) -> Vec<String> {
    wanted
        .iter()
        .filter_map(|(path, want)| {
            let have = value_at(obj, path).filter(|v| !v.is_null());
            match (have, want) {
                (Some(h), Some(w)) if scalar_text(h) == *w => None,
                (Some(_), None) => None,
                (Some(h), Some(w)) => Some(format!("{path}={w} (now {})", scalar_text(h))),
                (None, Some(w)) => Some(format!("{path}={w} (not set yet)")),
                (None, None) => Some(format!("{path} to be set")),
            }
        })
        .collect()
}

/// Does `current` already hold everything in `desired`? Objects compare key by key (extra keys in
/// `current` are fine: server defaults, other owners' labels); anything else compares equal.
pub fn contains(current: &Value, desired: &Value) -> bool {
    match (current, desired) {
        (Value::Object(c), Value::Object(d)) => d.iter().all(|(k, dv)| match c.get(k) {
            Some(cv) => contains(cv, dv),
            None => dv.is_null(),
        }),
        (c, d) => c == d,
    }
}

/// RFC 7386 JSON merge patch applied to `target` (what the server will do with a merge patch).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// The parts of `current` that `desired` talks about, for a readable diff.
pub fn project(current: &Value, desired: &Value) -> Value {
    match (current, desired) {
        (Value::Object(c), Value::Object(d)) => {
            let mut out = Map::new();
            for (k, dv) in d {
                if let Some(cv) = c.get(k) {
                    out.insert(k.clone(), project(cv, dv));
                }
            }
            Value::Object(out)
        }
        (c, _) => c.clone(),
    }
}

/// Replace Secret `data`/`stringData` values (for diffs and results).
pub fn mask_secret(obj: &Value) -> Value {
    let mut o = obj.clone();
    if o.get("kind").and_then(Value::as_str) == Some("Secret") || o.get("data").is_some() {
        for key in ["data", "stringData"] {
            if let Some(Value::Object(m)) = o.get_mut(key) {
                for v in m.values_mut() {
                    *v = Value::String("<hidden>".into());
                }
            }
        }
    }
    o
}

/// A manifest as it should be applied and compared: without `status` (the server owns it; generated
/// CRD files carry an empty one) and without `metadata.creationTimestamp: null` (from `-o yaml` dumps),
/// either of which would make an unchanged object look different on every run.
pub fn clean_manifest(doc: &Value) -> Value {
    let mut d = doc.clone();
    if let Some(m) = d.as_object_mut() {
        m.remove("status");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            if meta.get("creationTimestamp").is_some_and(Value::is_null) {
                meta.remove("creationTimestamp");
            }
        }
    }
    d
}

/// `metadata.name` and `metadata.namespace`.
pub fn name_of(obj: &Value) -> (Option<String>, Option<String>) {
    (
        obj.pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string),
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string),
    )
}

/// Why a YAML stream is not a list of objects; `index` counts documents from 1.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("YAML document {index} is not valid: {source}")]
    Invalid {
        index: usize,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("YAML document {index} is not an object but {value}")]
    NotAnObject { index: usize, value: Value },
}

/// Split a multi-document YAML stream into JSON objects, skipping empty documents and `List`s flattened.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, DocumentError> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(doc).map_err(|source| DocumentError::Invalid {
            index: i + 1,
            source,
        })?;
        match v {
            Value::Null => {}
            Value::Object(ref m)
                if m.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                if let Some(items) = m.get("items").and_then(Value::as_array) {
                    out.extend(items.iter().cloned());
                }
            }
            Value::Object(_) => out.push(v),
            other => {
                return Err(DocumentError::NotAnObject {
                    index: i + 1,
                    value: other,
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn list_items_get_their_kind_back_and_keep_their_own() {
        let r = Resource::new("v1", "Secret", "secrets", true);
        let item = r.typed(json!({"metadata": {"name": "repo"}, "data": {"password": "cHc="}}));
        assert_eq!(item["kind"], "Secret");
        assert_eq!(item["apiVersion"], "v1");
        let kept = r.typed(json!({"apiVersion": "v2", "kind": "Other"}));
        assert_eq!(
            (kept["apiVersion"].as_str(), kept["kind"].as_str()),
            (Some("v2"), Some("Other"))
        );
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        let s = known::secrets();
        assert_eq!(s.item(Some("ns"), "a"), "/api/v1/namespaces/ns/secrets/a");
        let m = known::managed_clusters();
        assert_eq!(
            m.item(Some("ignored"), "c1"),
            "/apis/cluster.open-cluster-management.io/v1/managedclusters/c1"
        );
        assert_eq!(s.describe(Some("ns"), "a"), "Secret ns/a");
    }

    #[test]
    fn unmet_conditions_need_the_exact_status() {
        let o = json!({"status": {"conditions": [
            {"type": "ManagedClusterJoined", "status": "True"},
            {"type": "ManagedClusterConditionAvailable", "status": "Unknown", "reason": "LeaseExpired", "message": "no lease"}]}});
        let u = unmet(
            &o,
            &[
                ("ManagedClusterJoined", "True"),
                ("ManagedClusterConditionAvailable", "True"),
                ("HubAcceptedManagedCluster", "True"),
            ],
        );
        assert_eq!(
            u,
            vec![
                "ManagedClusterConditionAvailable=True (now Unknown, LeaseExpired: no lease)"
                    .to_string(),
                "HubAcceptedManagedCluster=True (not reported yet)".to_string(),
            ]
        );
        assert!(unmet(&o, &[("ManagedClusterJoined", "True")]).is_empty());
        assert_eq!(unmet(&json!({}), &[("A", "True")]).len(), 1);
    }

    #[test]
    fn paths_are_read_like_jsonpath() {
        let o = json!({"status": {"phase": "Succeeded", "replicas": 3,
            "conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(value_at(&o, "status.phase"), Some(&json!("Succeeded")));
        assert_eq!(value_at(&o, "{.status.phase}"), Some(&json!("Succeeded")));
        assert_eq!(
            value_at(&o, ".status.conditions[0].type"),
            Some(&json!("Ready"))
        );
        assert_eq!(value_at(&o, "status.conditions[1].type"), None);
        assert_eq!(value_at(&o, "status.conditions[x]"), None);
        assert_eq!(value_at(&o, "status.nope"), None);
        assert!(unmet_values(
            &o,
            &[
                ("status.phase", Some("Succeeded")),
                ("status.replicas", Some("3"))
            ]
        )
        .is_empty());
        assert_eq!(
            unmet_values(
                &o,
                &[
                    ("status.phase", Some("Failed")),
                    ("status.x", Some("1")),
                    ("status.y", None)
                ]
            ),
            vec![
                "status.phase=Failed (now Succeeded)".to_string(),
                "status.x=1 (not set yet)".to_string(),
                "status.y to be set".to_string(),
            ]
        );
        assert!(unmet_values(&o, &[("status.phase", None)]).is_empty());
    }

    #[test]
    fn contains_ignores_extra_keys_but_not_changed_values() {
        let cur = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "uid": "x"}, "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": 60}});
        assert!(contains(
            &cur,
            &json!({"metadata": {"labels": {"a": "1"}}, "spec": {"hubAcceptsClient": true}})
        ));
        assert!(!contains(
            &cur,
            &json!({"metadata": {"labels": {"a": "9"}}})
        ));
        assert!(!contains(
            &cur,
            &json!({"metadata": {"labels": {"c": "3"}}})
        ));
        assert!(contains(
            &cur,
            &json!({"metadata": {"labels": {"c": null}}})
        ));
        assert!(!contains(&json!({"l": [1, 2]}), &json!({"l": [1]})));
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1]});
        merge_patch(
            &mut t,
            &json!({"a": "z", "c": {"f": null, "h": 1}, "l": [2, 3]}),
        );
        assert_eq!(t, json!({"a": "z", "c": {"d": "e", "h": 1}, "l": [2, 3]}));
    }

    #[test]
    fn project_and_mask() {
        let cur = json!({"kind": "Secret", "metadata": {"name": "s", "uid": "u"}, "data": {"token": "c2VjcmV0"}});
        let p = project(
            &cur,
            &json!({"metadata": {"name": "s"}, "data": {"token": "bmV3"}}),
        );
        assert_eq!(
            p,
            json!({"metadata": {"name": "s"}, "data": {"token": "c2VjcmV0"}})
        );
        assert_eq!(mask_secret(&cur)["data"]["token"], json!("<hidden>"));
    }

    #[test]
    fn manifests_lose_status_and_null_timestamps() {
        let d = json!({"kind": "CustomResourceDefinition", "metadata": {"name": "x", "creationTimestamp": null},
            "spec": {"group": "g"}, "status": {"storedVersions": [], "acceptedNames": {"kind": ""}}});
        assert_eq!(
            clean_manifest(&d),
            json!({"kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {"group": "g"}})
        );
        let keep = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(clean_manifest(&keep), keep);
    }

    #[test]
    fn documents_split_and_lists_flatten() {
        let docs = parse_documents("---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\nkind: List\nitems:\n- {kind: Secret, metadata: {name: b}}\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(name_of(&docs[1]).0.as_deref(), Some("b"));
        assert!(parse_documents("- 1\n")
            .unwrap_err()
            .to_string()
            .contains("not an object"));
    }
}
