//! Certificate keeping, the pure half: which Secrets are kept and what they are wired to, the copy of
//! a Secret a backup stores (no server-managed metadata), the Secret's PEM texts, and the objects that
//! wire a restored certificate in — `IngressController/default` `spec.defaultCertificate` and
//! `APIServer/cluster` `spec.servingCerts.namedCertificates` (an atomic list: the other entries are kept,
//! an entry for the same hostname is replaced in place). The certificate checks are `cert_check`'s.

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Where OpenShift reads each kind of kept certificate from.
pub const INGRESS_NAMESPACE: &str = "openshift-ingress";
pub const API_NAMESPACE: &str = "openshift-config";

/// One entry of the `certificates` option.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct KeepOpt {
    pub namespace: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub hostname: Option<String>,
}

impl KeepOpt {
    /// `namespace/name`, the key of the backup map.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The report entry before its contents are judged.
    pub fn kept(&self, source: &str) -> cert_check::Kept {
        cert_check::Kept {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            kind: self.kind.clone(),
            hostname: self.hostname.clone().filter(|h| !h.is_empty()),
            source: source.to_string(),
            certificate: None,
            key_matches: None,
            problems: Vec::new(),
        }
    }
}

/// What is wrong with the `certificates` option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeepProblem {
    #[error(
        "certificates[{index}] ({key}): type {kind} needs a hostname (the name it is served for)"
    )]
    NoHostname {
        index: usize,
        key: String,
        kind: String,
    },
    #[error("certificates[{index}] ({key}): a certificate of type {kind} must be in namespace {wanted}, where OpenShift reads it")]
    Namespace {
        index: usize,
        key: String,
        kind: String,
        wanted: &'static str,
    },
    #[error("certificates[{index}]: namespace and name must not be empty")]
    Blank { index: usize },
    #[error("certificates[{index}] ({key}) is listed twice")]
    Duplicate { index: usize, key: String },
    #[error("certificates[{index}]: only one ingress certificate can be the default one")]
    SecondIngress { index: usize },
}

/// Every problem of the list, in its order.
pub fn check_list(list: &[KeepOpt]) -> Vec<KeepProblem> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    let mut ingress = false;
    for (index, k) in list.iter().enumerate() {
        let key = k.key();
        if k.namespace.trim().is_empty() || k.name.trim().is_empty() {
            out.push(KeepProblem::Blank { index });
        }
        if seen.contains(&key) {
            out.push(KeepProblem::Duplicate {
                index,
                key: key.clone(),
            });
        }
        seen.push(key.clone());
        let wanted = match k.kind.as_str() {
            "ingress" => Some(INGRESS_NAMESPACE),
            "api" => Some(API_NAMESPACE),
            _ => None,
        };
        let Some(wanted) = wanted else { continue };
        if k.hostname.as_deref().is_none_or(|h| h.trim().is_empty()) {
            out.push(KeepProblem::NoHostname {
                index,
                key: key.clone(),
                kind: k.kind.clone(),
            });
        }
        if k.namespace != wanted {
            out.push(KeepProblem::Namespace {
                index,
                key: key.clone(),
                kind: k.kind.clone(),
                wanted,
            });
        }
        if k.kind == "ingress" {
            if ingress {
                out.push(KeepProblem::SecondIngress { index });
            }
            ingress = true;
        }
    }
    out
}

/// The Secret as a backup keeps it: apiVersion, kind, name, namespace, labels, annotations (without
/// kubectl's last-applied copy, which repeats the values), type and data. No uid, resourceVersion,
/// creationTimestamp, managedFields or ownerReferences: they belong to the cluster it was read from.
pub fn backup_copy(secret: &Value) -> Value {
    let meta = secret.get("metadata").cloned().unwrap_or_default();
    let mut m = Map::new();
    for k in ["name", "namespace", "labels"] {
        if let Some(v) = meta.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    if let Some(Value::Object(a)) = meta.get("annotations") {
        let kept: Map<String, Value> = a
            .iter()
            .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            m.insert("annotations".into(), Value::Object(kept));
        }
    }
    let mut out = json!({"apiVersion": "v1", "kind": "Secret", "metadata": m});
    for k in ["type", "data"] {
        if let Some(v) = secret.get(k) {
            out[k] = v.clone();
        }
    }
    out
}

/// A data key of a Secret as text (`tls.crt`, `tls.key`); None when absent or not base64 UTF-8 text.
pub fn data_text(secret: &Value, key: &str) -> Option<String> {
    let b64 = secret.get("data")?.get(key)?.as_str()?;
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(raw).ok()
}

/// `IngressController/default` serving the Secret (in `openshift-ingress`) as its default certificate.
pub fn ingress_wiring(secret: &str) -> Value {
    json!({
        "apiVersion": "operator.openshift.io/v1",
        "kind": "IngressController",
        "metadata": {"name": "default", "namespace": "openshift-ingress-operator"},
        "spec": {"defaultCertificate": {"name": secret}},
    })
}

/// `APIServer/cluster` serving each (hostname, Secret in `openshift-config`) pair: the current
/// `namedCertificates` with an entry naming one of those hostnames replaced in place by ours, ours
/// appended otherwise, every other entry kept as it is.
pub fn apiserver_wiring(current: Option<&Value>, wanted: &[(String, String)]) -> Value {
    let entry =
        |host: &str, secret: &str| json!({"names": [host], "servingCertificate": {"name": secret}});
    let existing = current
        .and_then(|c| c.pointer("/spec/servingCerts/namedCertificates"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut placed = vec![false; wanted.len()];
    let mut list = Vec::new();
    for e in existing {
        let names: Vec<String> = e
            .get("names")
            .and_then(Value::as_array)
            .map(|n| {
                n.iter()
                    .filter_map(Value::as_str)
                    .map(|s| s.to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        let ours = wanted
            .iter()
            .position(|(h, _)| names.contains(&h.to_ascii_lowercase()));
        match ours {
            Some(i) if !placed[i] => {
                placed[i] = true;
                list.push(entry(&wanted[i].0, &wanted[i].1));
            }
            Some(_) => {}
            None => list.push(e),
        }
    }
    for (i, (h, s)) in wanted.iter().enumerate() {
        if !placed[i] {
            list.push(entry(h, s));
        }
    }
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "APIServer",
        "metadata": {"name": "cluster"},
        "spec": {"servingCerts": {"namedCertificates": list}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(ns: &str, name: &str, kind: &str, host: Option<&str>) -> KeepOpt {
        KeepOpt {
            namespace: ns.into(),
            name: name.into(),
            kind: kind.into(),
            hostname: host.map(str::to_string),
        }
    }

    #[test]
    fn list_problems_are_all_named() {
        let list = [
            keep(
                "openshift-ingress",
                "apps",
                "ingress",
                Some("*.apps.x.example.com"),
            ),
            keep(
                "openshift-ingress",
                "apps2",
                "ingress",
                Some("*.apps.x.example.com"),
            ),
            keep("default", "api", "api", None),
            keep("openshift-ingress", "apps", "other", None),
            keep("anywhere", "mine", "other", None),
            keep("", "nameless-namespace", "other", None),
        ];
        let p: Vec<String> = check_list(&list).iter().map(|p| p.to_string()).collect();
        assert_eq!(
            p,
            vec![
                "certificates[1]: only one ingress certificate can be the default one",
                "certificates[2] (default/api): type api needs a hostname (the name it is served for)",
                "certificates[2] (default/api): a certificate of type api must be in namespace openshift-config, where OpenShift reads it",
                "certificates[3] (openshift-ingress/apps) is listed twice",
                "certificates[5]: namespace and name must not be empty",
            ]
        );
    }

    #[test]
    fn backup_keeps_the_secret_not_the_server_bookkeeping() {
        let live = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {
                "name": "apps", "namespace": "openshift-ingress", "uid": "u-1",
                "resourceVersion": "42", "creationTimestamp": "2025-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl"}], "ownerReferences": [{"name": "x"}],
                "labels": {"team": "lab"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "note": "kept"},
            },
            "data": {"tls.crt": "Y3J0", "tls.key": "a2V5"},
        });
        assert_eq!(
            backup_copy(&live),
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "apps", "namespace": "openshift-ingress", "labels": {"team": "lab"},
                             "annotations": {"note": "kept"}},
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": "Y3J0", "tls.key": "a2V5"},
            })
        );
        assert_eq!(data_text(&live, "tls.crt").as_deref(), Some("crt"));
        assert_eq!(data_text(&live, "ca.crt"), None);
    }

    #[test]
    fn apiserver_entries_for_other_names_are_kept_ours_replaced_in_place() {
        let current = json!({"spec": {"servingCerts": {"namedCertificates": [
            {"names": ["other.example.com"], "servingCertificate": {"name": "other"}},
            {"names": ["API.x.example.com"], "servingCertificate": {"name": "old"}},
            {"names": ["third.example.com"], "servingCertificate": {"name": "third"}},
        ]}}});
        let wanted = vec![("api.x.example.com".to_string(), "api-cert".to_string())];
        let w = apiserver_wiring(Some(&current), &wanted);
        let names: Vec<&str> = w["spec"]["servingCerts"]["namedCertificates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["servingCertificate"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["other", "api-cert", "third"]);
        // Applying it again changes nothing.
        assert_eq!(apiserver_wiring(Some(&w), &wanted), w);
        // Nothing there yet: ours alone.
        assert_eq!(
            apiserver_wiring(None, &wanted)["spec"]["servingCerts"]["namedCertificates"],
            json!([{"names": ["api.x.example.com"], "servingCertificate": {"name": "api-cert"}}])
        );
        assert_eq!(
            ingress_wiring("apps")["spec"]["defaultCertificate"]["name"],
            "apps"
        );
    }
}
