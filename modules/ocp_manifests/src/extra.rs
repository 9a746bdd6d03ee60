//! Extra manifests: the user's own Kubernetes objects for the agent build's `openshift/` folder,
//! which the installer loads as `openshift/*.yaml` and `openshift/*.yml`
//! (pkg/asset/agent/manifests/extramanifests.go, `ExtraManifests.Load`) and applies at install time.
//! A file it would skip (another extension) or a document the cluster would reject (no
//! `apiVersion`, `kind` or `metadata.name`) is refused here, before the one-hour install. Pure:
//! the caller reads the files.

use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::plan::Problem;

/// Where a manifest goes in the output and build folders.
pub const DIR: &str = "openshift";

const RULE: &str = "extra-manifest-object";

/// The file name a manifest keeps under `openshift/`, and every problem of its text: the file's
/// extension, YAML syntax, and per document (0-based index) the fields every object needs.
pub fn check(i: usize, path: &str, text: &str) -> (String, Vec<Problem>) {
    let at = format!("extra_manifests[{i}]");
    let name = path.rsplit('/').next().unwrap_or(path).to_string();
    let mut problems = Vec::new();
    let mut err = |rule: &'static str, msg: String| {
        problems.push(Problem {
            path: at.clone(),
            rule,
            msg: format!("{path}: {msg}"),
        })
    };
    if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
        err(
            "extra-manifest-extension",
            "the installer loads only *.yaml and *.yml files from openshift/".into(),
        );
    }
    let mut objects = 0;
    let mut broken = false;
    for (d, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = match Value::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                err(RULE, format!("document {d}: not YAML: {e}"));
                broken = true;
                break;
            }
        };
        if value.is_null() {
            continue; // an empty document (a leading or trailing `---`)
        }
        objects += 1;
        for missing in missing_fields(&value) {
            err(RULE, format!("document {d}: {missing}"));
        }
    }
    if objects == 0 && !broken {
        err(RULE, "holds no Kubernetes object".into());
    }
    (name, problems)
}

/// What a Kubernetes object lacks: a mapping with non-empty `apiVersion`, `kind` and
/// `metadata.name` strings.
fn missing_fields(v: &Value) -> Vec<String> {
    if !v.is_mapping() {
        return vec!["is not a mapping (a Kubernetes object)".into()];
    }
    let text = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    let metadata = v.get("metadata");
    [
        ("apiVersion", text(v.get("apiVersion"))),
        ("kind", text(v.get("kind"))),
        ("metadata.name", text(metadata.and_then(|m| m.get("name")))),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(field, _)| format!("{field} is missing or not a non-empty string"))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(path: &str, text: &str) -> Vec<String> {
        check(3, path, text)
            .1
            .iter()
            .map(|p| {
                assert_eq!(p.path, "extra_manifests[3]");
                format!("{} {}", p.rule, p.msg)
            })
            .collect()
    }

    #[test]
    fn kubernetes_objects_pass() {
        let two = "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\napiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-x\n  labels: {machineconfiguration.openshift.io/role: worker}\n---\n";
        let (name, problems) = check(0, "/srv/m/99-x.yaml", two);
        assert_eq!((name.as_str(), problems), ("99-x.yaml", vec![]));
        assert!(rules(
            "a.yml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
        )
        .is_empty());
    }

    /// The installer's TestIgnition_Generate "with extra manifests" (pkg/asset/agent/image/
    /// ignition_test.go): `openshift/test-configmap.yaml`, a leading `---` and two ConfigMaps, which
    /// it splits into two objects.
    #[test]
    fn the_installers_own_extra_manifest_passes() {
        let text = "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n    name: agent-test-1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n    name: agent-test-2";
        assert_eq!(check(0, "openshift/test-configmap.yaml", text).1, vec![]);
    }

    #[test]
    fn each_document_names_what_it_lacks() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\nkind: ConfigMap\nmetadata: {}\n---\n- a list\n";
        assert_eq!(
            rules("m.yaml", text),
            [
                "extra-manifest-object m.yaml: document 1: apiVersion is missing or not a non-empty string",
                "extra-manifest-object m.yaml: document 1: metadata.name is missing or not a non-empty string",
                "extra-manifest-object m.yaml: document 2: is not a mapping (a Kubernetes object)",
            ]
        );
    }

    #[test]
    fn syntax_extension_and_empty_files() {
        let bad = rules("m.yaml", "apiVersion: v1\nkind: [unclosed\n");
        assert!(
            bad.len() == 1 && bad[0].contains("document 0: not YAML"),
            "{bad:?}"
        );
        assert_eq!(
            rules("m.json", "apiVersion: v1\nkind: A\nmetadata: {name: a}\n"),
            ["extra-manifest-extension m.json: the installer loads only *.yaml and *.yml files from openshift/"]
        );
        assert_eq!(
            rules("m.yaml", "---\n"),
            ["extra-manifest-object m.yaml: holds no Kubernetes object"]
        );
    }
}
