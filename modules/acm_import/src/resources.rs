//! Pure builders for the hub objects of an import (see the ACM/OCM import order: namespace,
//! auto-import-secret, ManagedCluster, KlusterletAddonConfig).

use base64::Engine;
use serde_json::{json, Map, Value};

pub const CLUSTERSET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
pub const KEEP_SECRET_ANNOTATION: &str =
    "managedcluster-import-controller.open-cluster-management.io/keeping-auto-import-secret";
pub const AUTO_IMPORT_SECRET: &str = "auto-import-secret";
/// The auto-import-secret's key for how many times the import controller retries with it (0: one try;
/// without the key the controller tries once). stolostron/managedcluster-import-controller
/// `pkg/constants` `AutoImportRetryName`, read in `pkg/controller/autoimport`; the controller counts
/// it down as it retries, so an existing secret's value is left alone ([`auto_import_secret`]).
pub const AUTO_IMPORT_RETRY: &str = "autoImportRetry";

/// Set on an existing ManagedCluster to have the hub apply the klusterlet manifests again, whatever its
/// import state. Needed since ACM 2.14 (MCE 2.9), whose import controller defaults `autoImportStrategy`
/// to `ImportOnly`: once a cluster has joined, a new auto-import-secret alone is ignored. Older hubs
/// (`ImportAndSync`) ignore the annotation. Named as in stolostron/cluster-lifecycle-api
/// `constants.AnnotationImmediateImport`; the hub sets it to `Completed` when done.
pub const IMMEDIATE_IMPORT_ANNOTATION: &str = "import.open-cluster-management.io/immediate-import";

/// Labels the hub rewrites after import (`auto-detect` → detected values); set only on creation.
pub const DETECTED_LABELS: [&str; 2] = ["cloud", "vendor"];

/// Per-cluster addon switches of the KlusterletAddonConfig (`None` = the default).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Addons {
    pub application_manager: Option<bool>,
    pub policy_controller: Option<bool>,
    pub search_collector: Option<bool>,
    pub cert_policy_controller: Option<bool>,
    pub iam_policy_controller: Option<bool>,
}

pub fn namespace(cluster: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster}})
}

/// The ManagedCluster. `existing` is the object on the hub, if any: labels the hub detects are then
/// left alone unless the user set them, and other labels are merged (never removed). `annotations`
/// are merged the same way.
pub fn managed_cluster(
    cluster: &str,
    user_labels: &Map<String, Value>,
    clusterset: Option<&str>,
    existing: Option<&Value>,
    annotations: &Map<String, Value>,
) -> Value {
    let mut labels = Map::new();
    labels.insert("name".into(), json!(cluster));
    for l in DETECTED_LABELS {
        let present = existing
            .and_then(|e| e.pointer(&format!("/metadata/labels/{l}")))
            .is_some();
        if !present {
            labels.insert(l.into(), json!("auto-detect"));
        }
    }
    if let Some(cs) = clusterset {
        labels.insert(CLUSTERSET_LABEL.into(), json!(cs));
    }
    for (k, v) in user_labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut metadata = json!({"name": cluster, "labels": labels});
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations.clone());
    }
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": metadata,
        "spec": {"hubAcceptsClient": true},
    })
}

pub fn klusterlet_addon_config(cluster: &str, a: &Addons) -> Value {
    let on = |x: Option<bool>| json!({"enabled": x.unwrap_or(true)});
    let mut spec = json!({
        "clusterName": cluster,
        "clusterNamespace": cluster,
        "clusterLabels": {"cloud": "auto-detect", "vendor": "auto-detect"},
        "applicationManager": on(a.application_manager),
        "policyController": on(a.policy_controller),
        "searchCollector": on(a.search_collector),
        "certPolicyController": on(a.cert_policy_controller),
    });
    if let Some(iam) = a.iam_policy_controller {
        spec["iamPolicyController"] = json!({"enabled": iam});
    }
    json!({
        "apiVersion": "agent.open-cluster-management.io/v1",
        "kind": "KlusterletAddonConfig",
        "metadata": {"name": cluster, "namespace": cluster},
        "spec": spec,
    })
}

/// What the auto-import-secret carries.
pub enum SpokeCredentials {
    Kubeconfig(String),
    Token { server: String, token: String },
}

/// The auto-import-secret. `retry` is the `autoImportRetry` value already in the hub's secret (base64,
/// as stored: the import controller may have counted it down) or, for a new secret, the option's.
pub fn auto_import_secret(
    cluster: &str,
    creds: &SpokeCredentials,
    keep: bool,
    retry: RetryValue,
) -> Value {
    let b = |s: &str| json!(base64::engine::general_purpose::STANDARD.encode(s));
    let mut data = match creds {
        SpokeCredentials::Kubeconfig(k) => json!({"kubeconfig": b(k)}),
        SpokeCredentials::Token { server, token } => {
            json!({"server": b(server), "token": b(token)})
        }
    };
    data[AUTO_IMPORT_RETRY] = match retry {
        RetryValue::New(n) => b(&n.to_string()),
        RetryValue::Stored(v) => json!(v),
    };
    let mut meta = json!({"name": AUTO_IMPORT_SECRET, "namespace": cluster});
    if keep {
        meta["annotations"] = json!({KEEP_SECRET_ANNOTATION: ""});
    }
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, "data": data})
}

/// The `autoImportRetry` of an auto-import-secret about to be written.
pub enum RetryValue {
    /// A new secret: the option's count.
    New(u32),
    /// The value in the hub's secret (base64), left as the import controller counted it.
    Stored(String),
}

impl RetryValue {
    /// Keep the hub's count when its secret has one, else start at `n`.
    pub fn for_secret(existing: Option<&Value>, n: u32) -> Self {
        match existing
            .and_then(|s| s.pointer(&format!("/data/{AUTO_IMPORT_RETRY}")))
            .and_then(Value::as_str)
        {
            Some(v) if !v.is_empty() => RetryValue::Stored(v.to_string()),
            _ => RetryValue::New(n),
        }
    }
}

/// A key of the hub's `<cluster>-import` secret that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("key {key} of the import secret is not base64: {source}")]
    NotBase64 {
        key: &'static str,
        source: base64::DecodeError,
    },
    #[error("key {key} of the import secret is not UTF-8: {source}")]
    NotUtf8 {
        key: &'static str,
        source: std::string::FromUtf8Error,
    },
}

/// The `<cluster>-import` secret's manifests, once both keys are there: `(crds.yaml, import.yaml)`.
pub fn import_manifests(secret: &Value) -> Result<Option<(String, String)>, ManifestError> {
    let get = |key: &'static str| -> Result<Option<String>, ManifestError> {
        match secret
            .pointer(&format!("/data/{}", key.replace('/', "~1")))
            .and_then(Value::as_str)
        {
            None | Some("") => Ok(None),
            Some(b) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|source| ManifestError::NotBase64 { key, source })?;
                String::from_utf8(bytes)
                    .map(Some)
                    .map_err(|source| ManifestError::NotUtf8 { key, source })
            }
        }
    };
    Ok(match (get("crds.yaml")?, get("import.yaml")?) {
        (Some(c), Some(i)) => Some((c, i)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_cluster_labels_merge_and_keep_detected_values() {
        let mut user = Map::new();
        user.insert("env".into(), json!("lab"));
        let mc = managed_cluster("sno1", &user, Some("lab-set"), None, &Map::new());
        assert_eq!(mc["spec"]["hubAcceptsClient"], json!(true));
        let l = &mc["metadata"]["labels"];
        assert_eq!(l["name"], json!("sno1"));
        assert_eq!(l["cloud"], json!("auto-detect"));
        assert_eq!(l[CLUSTERSET_LABEL], json!("lab-set"));
        assert_eq!(l["env"], json!("lab"));
        let existing = json!({"metadata": {"labels": {"cloud": "Other", "vendor": "OpenShift"}}});
        let mc = managed_cluster("sno1", &Map::new(), None, Some(&existing), &Map::new());
        assert!(mc["metadata"]["labels"].get("cloud").is_none());
        assert!(mc["metadata"]["labels"].get(CLUSTERSET_LABEL).is_none());
        user.insert("vendor".into(), json!("OpenShift"));
        let mc = managed_cluster("sno1", &user, None, Some(&existing), &Map::new());
        assert_eq!(mc["metadata"]["labels"]["vendor"], json!("OpenShift"));
    }

    #[test]
    fn addon_config_defaults_and_switches() {
        let k = klusterlet_addon_config("c", &Addons::default());
        for f in [
            "applicationManager",
            "policyController",
            "searchCollector",
            "certPolicyController",
        ] {
            assert_eq!(k["spec"][f]["enabled"], json!(true), "{f}");
        }
        assert!(k["spec"].get("iamPolicyController").is_none());
        let k = klusterlet_addon_config(
            "c",
            &Addons {
                search_collector: Some(false),
                iam_policy_controller: Some(true),
                ..Default::default()
            },
        );
        assert_eq!(k["spec"]["searchCollector"]["enabled"], json!(false));
        assert_eq!(k["spec"]["iamPolicyController"]["enabled"], json!(true));
        assert_eq!(k["metadata"]["namespace"], json!("c"));
    }

    #[test]
    fn auto_import_secret_variants() {
        let s = auto_import_secret(
            "c",
            &SpokeCredentials::Token {
                server: "https://api:6443".into(),
                token: "t".into(),
            },
            true,
            RetryValue::New(5),
        );
        assert_eq!(s["data"]["server"], json!("aHR0cHM6Ly9hcGk6NjQ0Mw=="));
        assert_eq!(s["data"][AUTO_IMPORT_RETRY], json!("NQ=="), "\"5\"");
        assert_eq!(s["data"]["token"], json!("dA=="));
        assert_eq!(
            s["metadata"]["annotations"][KEEP_SECRET_ANNOTATION],
            json!("")
        );
        let s = auto_import_secret(
            "c",
            &SpokeCredentials::Kubeconfig("kc".into()),
            false,
            RetryValue::New(0),
        );
        assert_eq!(s["data"]["kubeconfig"], json!("a2M="));
        assert_eq!(
            s["data"][AUTO_IMPORT_RETRY],
            json!("MA=="),
            "\"0\": one try"
        );
        assert!(s["metadata"].get("annotations").is_none());
    }

    #[test]
    fn a_counted_down_retry_is_kept() {
        // The hub counted 5 down to 3 ("Mw=="): rewriting 5 would restart its count on every run.
        let hub = json!({"data": {AUTO_IMPORT_RETRY: "Mw==", "token": "dA=="}});
        let RetryValue::Stored(v) = RetryValue::for_secret(Some(&hub), 5) else {
            panic!("the stored count must be kept");
        };
        assert_eq!(v, "Mw==");
        assert!(matches!(
            RetryValue::for_secret(Some(&json!({"data": {"token": "dA=="}})), 5),
            RetryValue::New(5)
        ));
        assert!(matches!(
            RetryValue::for_secret(None, 2),
            RetryValue::New(2)
        ));
    }

    #[test]
    fn import_manifests_need_both_keys() {
        let s = json!({"data": {"crds.yaml": "Y3Jkcw==", "import.yaml": "aW1wb3J0"}});
        assert_eq!(
            import_manifests(&s).unwrap(),
            Some(("crds".into(), "import".into()))
        );
        assert_eq!(
            import_manifests(&json!({"data": {"crds.yaml": "Y3Jkcw=="}})).unwrap(),
            None
        );
        assert!(
            import_manifests(&json!({"data": {"crds.yaml": "!!", "import.yaml": "aW1wb3J0"}}))
                .is_err()
        );
    }
}
