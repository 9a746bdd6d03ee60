//! `proxshift.openshift.acm_import`: Import an OpenShift cluster into Red Hat ACM / open-cluster-management.
//!
//! `mode: auto` writes the hub objects (namespace, auto-import-secret, ManagedCluster,
//! KlusterletAddonConfig) and lets the hub's import controller reach the spoke. `mode: manual` writes
//! the same hub objects minus the secret, waits for the hub's `<cluster>-import` secret and applies its
//! `crds.yaml` then `import.yaml` to the spoke. Objects are updated in place (labels merged), never
//! deleted and recreated — except the auto-import-secret when a different cluster now stands behind
//! the name (see [`identity`]). Importing the hub into itself is refused. `state: absent` detaches.

pub mod detach;
pub mod error;
pub mod identity;
pub mod manual;
pub mod resources;

use std::path::PathBuf;
use std::time::Duration;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};
use kube_client::connect::{cluster_id_once, hub_opts};
use kube_client::objects::{conditions, known, unmet, Resource};
use kube_client::{Client, ConnectionParams, Ensured, HubOptions, Method, WaitError};
use resources::{Addons, SpokeCredentials};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use error::ImportError;
use identity::Replaced;

const JOINED: [(&str, &str); 2] = [
    ("ManagedClusterJoined", "True"),
    ("ManagedClusterConditionAvailable", "True"),
];

/// The spoke options: no environment fallbacks (the environment's credential is the hub's).
fn spoke_opts() -> Vec<Opt> {
    vec![
        Opt::str("spoke_kubeconfig").no_log(),
        Opt::str("spoke_context"),
        Opt::str("spoke_host"),
        Opt::str("spoke_api_key").no_log(),
        Opt::path("spoke_ca_cert"),
        Opt::bool("spoke_validate_certs").default(true),
    ]
}

/// The module's options; the documentation stub `plugins/modules/acm_import.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("state")
            .choices(&["present", "absent"])
            .default("present"),
        Opt::str("cluster_name").required().aliases(&["name"]),
        Opt::str("mode")
            .choices(&["auto", "manual"])
            .default("auto"),
        Opt::dict("labels").default(json!({})),
        Opt::str("clusterset").default("default"),
        Opt::bool("klusterlet_addon_config").default(true),
        Opt::dict("addons").options(ArgSpec::new(vec![
            Opt::bool("application_manager"),
            Opt::bool("policy_controller"),
            Opt::bool("search_collector"),
            Opt::bool("cert_policy_controller"),
            Opt::bool("iam_policy_controller"),
        ])),
        Opt::bool("keep_auto_import_secret").default(false),
        Opt::int("auto_import_retry").default(5),
        Opt::bool("force_conflicts").default(false),
        Opt::bool("delete_namespace").default(true),
        Opt::bool("wait").default(false),
        Opt::int("wait_timeout").default(600),
        Opt::int("poll_interval").default(10),
    ])
    .with(hub_opts())
    .with(spoke_opts())
    .required_one_of(&["hub_kubeconfig", "hub_host"])
    .mutually_exclusive(&["spoke_kubeconfig", "spoke_api_key"])
}

#[derive(Debug, Deserialize)]
pub struct Opts {
    state: String,
    cluster_name: String,
    mode: String,
    labels: Map<String, Value>,
    clusterset: Option<String>,
    klusterlet_addon_config: bool,
    addons: Option<Addons>,
    keep_auto_import_secret: bool,
    auto_import_retry: i64,
    force_conflicts: bool,
    delete_namespace: bool,
    wait: bool,
    wait_timeout: i64,
    poll_interval: i64,
    #[serde(flatten)]
    hub: HubOptions,
    spoke_kubeconfig: Option<String>,
    spoke_context: Option<String>,
    spoke_host: Option<String>,
    spoke_api_key: Option<String>,
    spoke_ca_cert: Option<PathBuf>,
    spoke_validate_certs: bool,
}

impl Opts {
    fn spoke(&self) -> ConnectionParams {
        ConnectionParams {
            kubeconfig: self.spoke_kubeconfig.clone(),
            context: self.spoke_context.clone(),
            host: self.spoke_host.clone(),
            api_key: self.spoke_api_key.clone(),
            ca_cert: self.spoke_ca_cert.clone(),
            validate_certs: self.spoke_validate_certs,
            ..Default::default()
        }
    }
    fn has_spoke(&self) -> bool {
        self.spoke_kubeconfig.is_some() || self.spoke_host.is_some()
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(self.wait_timeout.max(0) as u64)
    }
    fn interval(&self) -> Duration {
        Duration::from_secs(self.poll_interval.max(1) as u64)
    }
    fn clusterset(&self) -> Option<&str> {
        self.clusterset.as_deref().filter(|s| !s.is_empty())
    }
}

/// Collects what the run did, for `changed`, the result and the diff.
pub struct Report {
    actions: Vec<Value>,
    changed: bool,
}

impl Report {
    fn record(&mut self, m: &mut Module, side: &str, e: &Ensured) {
        self.changed |= e.action.changed();
        self.actions
            .push(json!({"side": side, "object": e.description, "action": e.action.as_str()}));
        if e.action.changed() {
            m.add_diff(
                e.before.clone(),
                e.after.clone(),
                &format!("{side}: {} (before)", e.description),
                &format!("{side}: {} (after)", e.description),
            );
        }
    }
    fn note(&mut self, side: &str, object: String, action: impl Into<String>) {
        self.actions
            .push(json!({"side": side, "object": object, "action": action.into()}));
    }
    fn fail(&self, e: impl Into<ImportError>) -> Failure {
        Failure::new(e.into().to_string())
            .changed(self.changed)
            .with("actions", json!(self.actions))
    }
}

/// Connect one side; its token is masked and a "certificates not checked" warning given.
fn connect(
    side: &'static str,
    p: &ConnectionParams,
    m: &mut Module,
) -> Result<Client, ImportError> {
    let c = kube_client::connect(side, p)?;
    if let Some(t) = c.token {
        m.add_secret(t);
    }
    if let Some(w) = c.warning {
        m.warn(w);
    }
    Ok(c.client)
}

fn check_options(o: &Opts) -> Result<(), Failure> {
    if o.wait_timeout < 0 || o.poll_interval < 1 {
        return Err(Failure::new(
            "wait_timeout must be >= 0 and poll_interval >= 1 (seconds)",
        ));
    }
    if !(0..=i64::from(u16::MAX)).contains(&o.auto_import_retry) {
        return Err(Failure::new(format!(
            "auto_import_retry must be between 0 (one try) and {}, not {}",
            u16::MAX,
            o.auto_import_retry
        )));
    }
    let name = o.cluster_name.as_str();
    if name.is_empty()
        || name.len() > 63
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || name.starts_with('-')
        || name.ends_with('-')
    {
        return Err(Failure::new(format!(
            "cluster_name {name:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63 characters)"
        )));
    }
    for (k, v) in &o.labels {
        if !v.is_string() {
            return Err(Failure::new(format!(
                "labels: the value of {k:?} must be a string (quote it), not {v}"
            )));
        }
    }
    if o.state == "present" && !o.has_spoke() {
        return Err(Failure::new(if o.mode == "auto" {
            "mode=auto needs the spoke's credentials for the auto-import-secret: spoke_kubeconfig, or spoke_host with spoke_api_key"
        } else {
            "mode=manual applies the import manifests to the spoke: give spoke_kubeconfig or spoke_host (with spoke_api_key)"
        }));
    }
    Ok(())
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Opts = m.options()?;
    check_options(&o)?;
    let mut report = Report {
        actions: Vec::new(),
        changed: false,
    };
    let hub = connect("hub", &o.hub.params(), m).map_err(|e| report.fail(e))?;
    if o.state == "absent" {
        detach::detach(m, &o, &hub, &mut report).map_err(|e| report.fail(e))?;
        return Ok(detached(m, &o, &report));
    }
    present(m, &o, &hub, &mut report).map_err(|e| match e {
        Stop::Failed(f) => f,
        Stop::Error(e) => report.fail(e),
    })
}

/// Why `present` stopped: a failure already carrying its extra fields, or an error to report.
enum Stop {
    Failed(Failure),
    Error(ImportError),
}

impl<E: Into<ImportError>> From<E> for Stop {
    fn from(e: E) -> Self {
        Stop::Error(e.into())
    }
}

/// The spoke as far as the controller can see it.
struct Spoke {
    client: Client,
    id: Option<String>,
    /// Why the ID could not be read, for the result.
    unread: Option<String>,
}

/// Connect the spoke and ask which cluster it is. A spoke the controller cannot reach (the hub may
/// reach it when we cannot) is not an error: a new cluster behind the same name then goes
/// unnoticed, and the result says why (`spoke_cluster_id_error`). Not a warning: it would repeat on
/// every converged run.
fn spoke(m: &mut Module, o: &Opts) -> Result<Spoke, ImportError> {
    let mut client = connect("spoke", &o.spoke(), m)?;
    let (id, unread) = match cluster_id_once(&mut client) {
        Ok(id) => (id, None),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(Spoke { client, id, unread })
}

/// Check mode on a cluster that is not installed yet (`site.yaml --check` on a fresh cluster): the
/// spoke's kubeconfig is a path the install has not written. The hub is read and the import predicted
/// from it alone; nothing about the spoke can be checked (its identity, the self-import refusal).
fn spoke_not_installed(o: &Opts, check_mode: bool) -> bool {
    check_mode
        && o.spoke_kubeconfig.as_deref().is_some_and(|k| {
            !kube_client::kubeconfig::looks_like_content(k) && !std::path::Path::new(k).exists()
        })
}

/// What `present` says about the spoke when it is not installed yet.
const SPOKE_NOT_INSTALLED: &str =
    "not installed yet (check mode: spoke_kubeconfig is a file the install has not written)";

fn present(m: &mut Module, o: &Opts, hub: &Client, report: &mut Report) -> Result<Outcome, Stop> {
    let name = o.cluster_name.as_str();
    let mc_res = known::managed_clusters();
    let pending = spoke_not_installed(o, m.check_mode);
    // Auto mode checks the spoke's kubeconfig first, so a broken one is named as such.
    let creds = match o.mode.as_str() {
        "auto" if !pending => Some(spoke_credentials(o)?),
        _ => None,
    };
    let spoke = if pending { None } else { Some(spoke(m, o)?) };
    let spoke_id = spoke.as_ref().and_then(|s| s.id.as_deref());
    if let Some(s) = &spoke {
        identity::refuse_self_import(hub, s.client.server(), spoke_id)?;
    }
    let existing = hub.get(&mc_res, None, name)?;
    let replaced = identity::replaced(existing.as_ref(), spoke_id);
    if let Some(r) = &replaced {
        report.changed = true;
        report.note(
            "hub",
            format!("ManagedCluster {name}"),
            format!(
                "re-imported: a different cluster now has this name (cluster ID {} was {})",
                r.now, r.was
            ),
        );
    }
    // Imported means joined and available, as the hub's docs define a successful import;
    // `ManagedClusterImportSucceeded` only says the klusterlet was deployed.
    let already_imported = replaced.is_none()
        && existing
            .as_ref()
            .is_some_and(|mc| unmet(mc, &JOINED).is_empty());

    ensure_namespace(m, hub, name, report)?;
    if let Some(creds) = creds {
        auto_import_secret(
            m,
            o,
            hub,
            creds,
            already_imported,
            replaced.is_some(),
            report,
        )?;
    } else if pending && o.mode == "auto" && !already_imported {
        report.changed = true;
        report.note(
            "hub",
            format!("Secret {name}/{}", resources::AUTO_IMPORT_SECRET),
            "would be created from the cluster's kubeconfig once the install writes it",
        );
    }
    if let Some(set) = o.clusterset() {
        check_clusterset(m, hub, set);
    }
    let mc = resources::managed_cluster(
        name,
        &o.labels,
        o.clusterset(),
        existing.as_ref(),
        &mc_annotations(o, spoke_id, replaced.as_ref()),
    );
    let e = hub.ensure(&mc_res, &mc, Method::Merge, m.check_mode)?;
    report.record(m, "hub", &e);
    let mut mc_now = e.object.clone();
    if o.klusterlet_addon_config {
        let kac = resources::klusterlet_addon_config(name, &o.addons.clone().unwrap_or_default());
        let e = hub
            .ensure(
                &known::klusterlet_addon_configs(),
                &kac,
                Method::Merge,
                m.check_mode,
            )
            .map_err(|source| {
                if source.is_not_found() {
                    ImportError::NoAddonCrd { source }
                } else {
                    ImportError::Kube(source)
                }
            })?;
        report.record(m, "hub", &e);
    }
    let mut spoke_applied = Vec::new();
    // Check mode cannot get further than the hub without the hub's import secret or without the spoke.
    let predicted = m.check_mode && (existing.is_none() || pending);
    if o.mode == "manual" {
        match &spoke {
            _ if already_imported => report.note(
                "spoke",
                "import manifests".into(),
                "skipped (cluster already imported)",
            ),
            Some(s) if !predicted => spoke_applied = manual::import(m, o, hub, &s.client, report)?,
            _ => report.note(
                "spoke",
                "import manifests".into(),
                if pending {
                    "would be applied once the cluster is installed and the hub renders them"
                } else {
                    "would be applied once the hub renders them"
                },
            ),
        }
    }
    if o.wait && !predicted {
        mc_now = Some(wait_joined(o, hub, report)?);
    }
    let (id, unread) = match &spoke {
        Some(s) => (json!(s.id), json!(s.unread)),
        None => (Value::Null, json!(SPOKE_NOT_INSTALLED)),
    };
    Ok(outcome(m, o, report, mc_now.as_ref(), spoke_applied)
        .with("spoke_cluster_id", id)
        .with("spoke_cluster_id_error", unread))
}

/// The annotations the ManagedCluster must carry: the spoke's cluster ID as we saw it, and on a
/// re-import the hub's cue to apply the klusterlet again.
fn mc_annotations(
    o: &Opts,
    spoke_id: Option<&str>,
    replaced: Option<&Replaced>,
) -> Map<String, Value> {
    let mut a = Map::new();
    if let Some(id) = spoke_id {
        a.insert(identity::RECORDED_ID_ANNOTATION.into(), json!(id));
    }
    // Only on a re-import: the hub turns "" into "Completed", and setting it again on every run
    // would re-import every run.
    if replaced.is_some() && o.mode == "auto" {
        a.insert(resources::IMMEDIATE_IMPORT_ANNOTATION.into(), json!(""));
    }
    a
}

fn ensure_namespace(
    m: &mut Module,
    hub: &Client,
    name: &str,
    report: &mut Report,
) -> Result<(), ImportError> {
    let e = hub.ensure(
        &known::namespaces(),
        &resources::namespace(name),
        Method::Merge,
        m.check_mode,
    )?;
    report.record(m, "hub", &e);
    let phase = e
        .object
        .as_ref()
        .and_then(|n| n.pointer("/status/phase"))
        .and_then(Value::as_str);
    if phase == Some("Terminating") {
        return Err(ImportError::NamespaceTerminating(name.to_string()));
    }
    Ok(())
}

/// The auto-import-secret: skipped once imported (the hub ignores it then, and deletes it after
/// use); deleted and written anew when a different cluster took the name, so the import controller
/// sees a new secret for the new cluster.
fn auto_import_secret(
    m: &mut Module,
    o: &Opts,
    hub: &Client,
    creds: SpokeCredentials,
    already_imported: bool,
    replaced: bool,
    report: &mut Report,
) -> Result<(), ImportError> {
    let name = o.cluster_name.as_str();
    let object = format!("Secret {name}/{}", resources::AUTO_IMPORT_SECRET);
    if already_imported {
        report.note("hub", object, "skipped (cluster already imported)");
        return Ok(());
    }
    if let SpokeCredentials::Token { token, .. } = &creds {
        m.add_secret(token.clone());
    }
    let secrets = known::secrets();
    if replaced
        && !m.check_mode
        && hub.delete(&secrets, Some(name), resources::AUTO_IMPORT_SECRET)?
    {
        report.note(
            "hub",
            object,
            "deleted (it held the old cluster's credentials)",
        );
    }
    // The old cluster's secret (deleted above) does not count for the new one.
    let current = if replaced {
        None
    } else {
        hub.get(&secrets, Some(name), resources::AUTO_IMPORT_SECRET)?
    };
    let retry = resources::RetryValue::for_secret(current.as_ref(), o.auto_import_retry as u32);
    let secret = resources::auto_import_secret(name, &creds, o.keep_auto_import_secret, retry);
    let e = hub.ensure(&secrets, &secret, Method::Merge, m.check_mode)?;
    report.record(m, "hub", &e);
    Ok(())
}

fn wait_joined(o: &Opts, hub: &Client, report: &Report) -> Result<Value, Stop> {
    let name = o.cluster_name.as_str();
    let mc_res = known::managed_clusters();
    match hub.wait_for_conditions(&mc_res, None, name, &JOINED, o.timeout(), o.interval()) {
        Ok(obj) => Ok(obj),
        Err(WaitError::Timeout { waited, pending }) => {
            let now = hub.get(&mc_res, None, name).ok().flatten();
            Err(Stop::Failed(
                report
                    .fail(ImportError::Timeout {
                        waited,
                        pending: format!("{name} to join the hub: {pending}"),
                    })
                    .with(
                        "conditions",
                        json!(now.as_ref().map(conditions).unwrap_or_default()),
                    ),
            ))
        }
        Err(WaitError::Failed(e)) => Err(e.into()),
        Err(WaitError::Stopped { waited, reason }) => Err(Stop::Failed(
            report.fail(ImportError::Stopped { waited, reason }),
        )),
    }
}

fn outcome(
    m: &Module,
    o: &Opts,
    report: &Report,
    mc_now: Option<&Value>,
    spoke_applied: Vec<Value>,
) -> Outcome {
    let name = o.cluster_name.as_str();
    let conds = mc_now.map(conditions).unwrap_or_default();
    let is_true = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
    let (joined, available) = (
        is_true("ManagedClusterJoined"),
        is_true("ManagedClusterConditionAvailable"),
    );
    let msg = match (report.changed, m.check_mode) {
        (true, true) => format!("{name} would be imported or updated on the hub"),
        (true, false) => format!("{name} imported or updated on the hub ({} mode)", o.mode),
        (false, _) => format!("{name} is already registered on the hub as desired"),
    };
    Outcome::new(report.changed)
        .msg(msg)
        .with("cluster_name", name)
        .with("mode", o.mode.as_str())
        .with("actions", json!(report.actions))
        .with("spoke_objects", json!(spoke_applied))
        .with(
            "labels",
            mc_now
                .and_then(|v| v.pointer("/metadata/labels"))
                .cloned()
                .unwrap_or(Value::Null),
        )
        .with("conditions", json!(conds))
        .with("joined", joined)
        .with("available", available)
}

fn detached(m: &Module, o: &Opts, report: &Report) -> Outcome {
    let name = o.cluster_name.as_str();
    let kept: Vec<Value> = report
        .actions
        .iter()
        .filter_map(|a| a.get("kept_objects"))
        .flat_map(|k| k.as_array().cloned().unwrap_or_default())
        .collect();
    let mut msg = match (report.changed, m.check_mode) {
        (false, _) => format!("{name} is not registered on the hub"),
        (true, true) => format!("{name} would be detached from the hub"),
        (true, false) => format!("{name} detached from the hub"),
    };
    if !kept.is_empty() {
        msg.push_str(&format!(
            "; namespace {name} kept: it holds objects the import did not create"
        ));
    }
    Outcome::new(report.changed)
        .msg(msg)
        .with("cluster_name", name)
        .with("actions", json!(report.actions))
        .with("kept_objects", json!(kept))
}

/// A clusterset label naming a set that does not exist puts the cluster in no set at all: warn.
/// (Unreadable sets — no RBAC, an old hub — are not worth failing over.)
fn check_clusterset(m: &mut Module, hub: &Client, set: &str) {
    let sets = Resource::new(
        "cluster.open-cluster-management.io/v1beta2",
        "ManagedClusterSet",
        "managedclustersets",
        false,
    );
    if let Ok(None) = hub.get(&sets, None, set) {
        m.warn(format!(
            "ManagedClusterSet {set:?} does not exist on the hub; the cluster joins no set until it is created"
        ));
    }
}

fn spoke_credentials(o: &Opts) -> Result<SpokeCredentials, ImportError> {
    if let Some(k) = &o.spoke_kubeconfig {
        let text = if kube_client::kubeconfig::looks_like_content(k) {
            k.clone()
        } else {
            std::fs::read_to_string(k).map_err(|source| ImportError::ReadSpokeKubeconfig {
                path: k.clone(),
                source,
            })?
        };
        // Catch a broken kubeconfig here rather than as a failed import on the hub later.
        kube_client::Kubeconfig::parse(&text)
            .and_then(|kc| kc.connection(o.spoke_context.as_deref(), None).map(|_| ()))
            .map_err(|e| ImportError::SpokeKubeconfig(e.into()))?;
        return Ok(SpokeCredentials::Kubeconfig(text));
    }
    match (&o.spoke_host, &o.spoke_api_key) {
        (Some(h), Some(t)) => Ok(SpokeCredentials::Token {
            server: h.trim_end_matches('/').to_string(),
            token: t.clone(),
        }),
        _ => Err(ImportError::NoSpokeToken),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(&super::argument_spec(), "openshift", "acm_import");
    }
}
