//! `mode: manual`: wait for the hub's `<cluster>-import` secret, then apply its `crds.yaml` and
//! `import.yaml` to the spoke ourselves.

use std::time::Duration;

use ansible_module::Module;
use kube_client::objects::{clean_manifest, known, name_of, parse_documents};
use kube_client::{Client, KubeError, Method, Poll, Resolved, Resource, WaitError};
use serde_json::{json, Value};

use crate::error::ImportError;
use crate::{resources, Opts, Report};

/// What installs the kinds of `import.yaml` that the spoke does not serve yet.
const CRDS_FROM: &str = "crds.yaml of the hub's import Secret";

/// Wait for `<cluster>-import`, then apply `crds.yaml` and `import.yaml` to the spoke.
pub fn import(
    m: &mut Module,
    o: &Opts,
    hub: &Client,
    spoke: &Client,
    report: &mut Report,
) -> Result<Vec<Value>, ImportError> {
    let name = &o.cluster_name;
    let secret_name = format!("{name}-import");
    let Some((crds, import)) = wait_for_manifests(m, o, hub, &secret_name, report)? else {
        return Ok(Vec::new());
    };
    let mut applied = Vec::new();
    for (file, text) in [("crds.yaml", &crds), ("import.yaml", &import)] {
        let docs = parse_documents(text).map_err(|e| ImportError::ImportManifest {
            secret: secret_name.clone(),
            file,
            source: e.into(),
        })?;
        for doc in docs.iter().map(clean_manifest) {
            apply_one(m, o, spoke, report, file, &doc, &mut applied)?;
        }
    }
    Ok(applied)
}

/// The two manifests, or `None` in check mode when the hub has not rendered them yet.
fn wait_for_manifests(
    m: &Module,
    o: &Opts,
    hub: &Client,
    secret_name: &str,
    report: &mut Report,
) -> Result<Option<(String, String)>, ImportError> {
    let name = &o.cluster_name;
    let secrets = known::secrets();
    // Check mode looks once instead of waiting.
    let secret_wait = if m.check_mode {
        Duration::ZERO
    } else {
        o.timeout()
    };
    let waited = kube_client::wait_for(secret_wait, o.interval(), || {
        let Some(s) = hub
            .get(&secrets, Some(name), secret_name)
            .map_err(ImportError::Kube)?
        else {
            return Ok(Poll::Pending(format!(
                "Secret {name}/{secret_name} to be rendered by the hub's import controller"
            )));
        };
        Ok(match resources::import_manifests(&s)? {
            Some(x) => Poll::Ready(x),
            None => Poll::Pending(format!(
                "Secret {name}/{secret_name} to hold both crds.yaml and import.yaml"
            )),
        })
    });
    match waited {
        Ok(x) => Ok(Some(x)),
        Err(WaitError::Timeout { .. }) if m.check_mode => {
            report.changed = true;
            report.actions.push(json!({"side": "spoke", "object": "import manifests",
                "action": format!("would be applied once the hub renders Secret {name}/{secret_name}")}));
            Ok(None)
        }
        Err(WaitError::Timeout { waited, pending }) => {
            Err(ImportError::Timeout { waited, pending })
        }
        Err(WaitError::Failed(e)) => Err(e),
        Err(WaitError::Stopped { waited, reason }) => Err(ImportError::Stopped { waited, reason }),
    }
}

fn apply_one(
    m: &mut Module,
    o: &Opts,
    spoke: &Client,
    report: &mut Report,
    file: &'static str,
    doc: &Value,
    applied: &mut Vec<Value>,
) -> Result<(), ImportError> {
    let field = |k: &str| {
        doc.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let obj_name = name_of(doc).0.unwrap_or_default();
    // In check mode the CRDs of crds.yaml are not there: objects of their kinds are predicted (the
    // rule shared with cluster_config, kube_client::pending). Other errors surface in resolve_kind.
    if let Ok(Resolved::NotYet(why)) =
        spoke.resolve_pending(&api_version, &kind, m.check_mode, Some(CRDS_FROM))
    {
        report.changed = true;
        let what = format!("{kind} {obj_name}");
        let note = why.prediction();
        report
            .actions
            .push(json!({"side": "spoke", "object": what, "action": "created", "note": note}));
        applied.push(json!({"object": what, "action": "created", "from": file, "note": note}));
        return Ok(());
    }
    let res =
        resolve_kind(o, spoke, &api_version, &kind).map_err(|source| ImportError::SpokeKind {
            file,
            kind: kind.clone(),
            name: obj_name.clone(),
            source: Box::new(source),
        })?;
    let method = Method::Apply {
        force: o.force_conflicts,
    };
    let e = spoke
        .ensure(&res, doc, method, m.check_mode)
        .map_err(|source| {
            if source.is_conflict() && !o.force_conflicts {
                ImportError::ApplyConflict { source }
            } else {
                ImportError::Kube(source)
            }
        })?;
    report.record(m, "spoke", &e);
    applied.push(json!({"object": e.description, "action": e.action.as_str(), "from": file}));
    if res.kind == "CustomResourceDefinition" && !m.check_mode {
        spoke
            .wait_for_conditions(
                &res,
                None,
                &obj_name,
                &[("Established", "True")],
                o.timeout(),
                o.interval().min(Duration::from_secs(1)),
            )
            .map_err(|source| ImportError::CrdNotEstablished {
                crd: obj_name.clone(),
                source: Box::new(source),
            })?;
    }
    Ok(())
}

/// Kinds from crds.yaml appear in discovery a moment after their CRD is Established.
fn resolve_kind(
    o: &Opts,
    spoke: &Client,
    api_version: &str,
    kind: &str,
) -> Result<Resource, WaitError<KubeError>> {
    kube_client::wait_for(
        Duration::from_secs(60).min(o.timeout().max(Duration::from_secs(5))),
        Duration::from_millis(500),
        || match spoke.resolve(api_version, kind) {
            Ok(r) => Ok(Poll::Ready(r)),
            // Discovery does not list the kind (yet).
            Err(e) if e.is_not_served() => {
                spoke.forget_discovery();
                Ok(Poll::Pending(e.to_string()))
            }
            Err(e) => Err(e),
        },
    )
}
