//! `proxshift.openshift.acm_import`: Import an OpenShift cluster into Red Hat ACM / open-cluster-management.
//!
//! `mode: auto` writes the hub objects (namespace, auto-import-secret, ManagedCluster,
//! KlusterletAddonConfig) and lets the hub's import controller reach the spoke. `mode: manual` writes
//! the same hub objects minus the secret, waits for the hub's `<cluster>-import` secret and applies its
//! `crds.yaml` then `import.yaml` to the spoke. Objects are updated in place (labels merged), never
//! deleted and recreated. `state: absent` detaches the cluster.

pub mod resources;

use std::path::PathBuf;
use std::time::Duration;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};
use kube_client::objects::{
    clean_manifest, conditions, known, name_of, parse_documents, unmet, Resource,
};
use kube_client::{Client, ConnectionParams, Ensured, KubeError, Method, Poll, WaitError};
use resources::{Addons, SpokeCredentials};
use serde::Deserialize;
use serde_json::{json, Map, Value};

const JOINED: [(&str, &str); 2] = [
    ("ManagedClusterJoined", "True"),
    ("ManagedClusterConditionAvailable", "True"),
];

fn connection_opts(prefix: &'static str) -> Vec<Opt> {
    // The option names are static strings; pick them per side.
    let n = |hub: &'static str, spoke: &'static str| if prefix == "hub" { hub } else { spoke };
    vec![
        // A kubeconfig given as text holds credentials.
        Opt::str(n("hub_kubeconfig", "spoke_kubeconfig")).no_log(),
        Opt::str(n("hub_context", "spoke_context")),
        Opt::str(n("hub_host", "spoke_host")),
        Opt::str(n("hub_api_key", "spoke_api_key")).no_log(),
        Opt::path(n("hub_ca_cert", "spoke_ca_cert")),
        Opt::bool(n("hub_validate_certs", "spoke_validate_certs")).default(true),
    ]
}

/// The module's options; the sidecar `plugins/modules/acm_import.yml` documents exactly these.
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
        Opt::bool("force_conflicts").default(false),
        Opt::bool("delete_namespace").default(true),
        Opt::bool("wait").default(false),
        Opt::int("wait_timeout").default(600),
        Opt::int("poll_interval").default(10),
    ])
    .with(connection_opts("hub"))
    .with(connection_opts("spoke"))
    .required_one_of(&["hub_kubeconfig", "hub_host"])
    .mutually_exclusive(&["spoke_kubeconfig", "spoke_api_key"])
}

#[derive(Debug, Deserialize)]
struct Opts {
    state: String,
    cluster_name: String,
    mode: String,
    labels: Map<String, Value>,
    clusterset: Option<String>,
    klusterlet_addon_config: bool,
    addons: Option<Addons>,
    keep_auto_import_secret: bool,
    force_conflicts: bool,
    delete_namespace: bool,
    wait: bool,
    wait_timeout: i64,
    poll_interval: i64,
    hub_kubeconfig: Option<String>,
    hub_context: Option<String>,
    hub_host: Option<String>,
    hub_api_key: Option<String>,
    hub_ca_cert: Option<PathBuf>,
    hub_validate_certs: bool,
    spoke_kubeconfig: Option<String>,
    spoke_context: Option<String>,
    spoke_host: Option<String>,
    spoke_api_key: Option<String>,
    spoke_ca_cert: Option<PathBuf>,
    spoke_validate_certs: bool,
}

impl Opts {
    fn hub(&self) -> ConnectionParams {
        ConnectionParams {
            kubeconfig: self.hub_kubeconfig.clone(),
            context: self.hub_context.clone(),
            host: self.hub_host.clone(),
            api_key: self.hub_api_key.clone(),
            ca_cert: self.hub_ca_cert.clone(),
            validate_certs: self.hub_validate_certs,
        }
    }
    fn spoke(&self) -> ConnectionParams {
        ConnectionParams {
            kubeconfig: self.spoke_kubeconfig.clone(),
            context: self.spoke_context.clone(),
            host: self.spoke_host.clone(),
            api_key: self.spoke_api_key.clone(),
            ca_cert: self.spoke_ca_cert.clone(),
            validate_certs: self.spoke_validate_certs,
        }
    }
    fn has_spoke(&self) -> bool {
        self.spoke_kubeconfig.is_some() || self.spoke_host.is_some()
    }
}

/// Collects what the run did, for `changed`, the result and the diff.
struct Report {
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
    fn fail(&self, msg: impl Into<String>) -> Failure {
        Failure::new(msg)
            .changed(self.changed)
            .with("actions", json!(self.actions))
    }
}

fn client(what: &str, p: &ConnectionParams, m: &mut Module) -> Result<Client, Failure> {
    let conn = p
        .resolve()
        .map_err(|e| Failure::new(format!("{what} connection: {e}")))?;
    if let Some(t) = &conn.token {
        m.add_secret(t.clone());
    }
    if !conn.tls.validate_certs {
        m.warn(format!(
            "{what}: validate_certs is off, the certificate of {} is not checked",
            conn.server
        ));
    }
    Client::new(&conn).map_err(|e| Failure::new(format!("{what} connection: {e}")))
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Opts = m.options()?;
    if o.wait_timeout < 0 || o.poll_interval < 1 {
        return Err(Failure::new(
            "wait_timeout must be >= 0 and poll_interval >= 1 (seconds)",
        ));
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
    let hub = client("hub", &o.hub(), m)?;
    let mut report = Report {
        actions: Vec::new(),
        changed: false,
    };
    let timeout = Duration::from_secs(o.wait_timeout as u64);
    let interval = Duration::from_secs(o.poll_interval as u64);
    if o.state == "absent" {
        return detach(m, &o, &hub, &mut report, timeout, interval);
    }
    if o.mode == "auto" && !o.has_spoke() {
        return Err(Failure::new(
            "mode=auto needs the spoke's credentials for the auto-import-secret: spoke_kubeconfig, or spoke_host with spoke_api_key",
        ));
    }
    if o.mode == "manual" && !o.has_spoke() {
        return Err(Failure::new("mode=manual applies the import manifests to the spoke: give spoke_kubeconfig or spoke_host (with spoke_api_key)"));
    }
    let mc_res = known::managed_clusters();
    let existing = hub
        .get(&mc_res, None, name)
        .map_err(|e| report_fail(&report, e))?;
    let already_imported = existing.as_ref().is_some_and(|mc| {
        unmet(mc, &[("ManagedClusterImportSucceeded", "True")]).is_empty()
            || unmet(mc, &[("ManagedClusterJoined", "True")]).is_empty()
    });

    // 1. Namespace.
    let e = hub
        .ensure(
            &known::namespaces(),
            &resources::namespace(name),
            Method::Merge,
            m.check_mode,
        )
        .map_err(|e| report_fail(&report, e))?;
    report.record(m, "hub", &e);
    if let Some(phase) = e
        .object
        .as_ref()
        .and_then(|n| n.pointer("/status/phase"))
        .and_then(Value::as_str)
    {
        if phase == "Terminating" {
            return Err(report.fail(format!(
                "namespace {name} on the hub is being deleted (a previous detach is still finishing); try again once it is gone"
            )));
        }
    }
    // 2. auto-import-secret (skipped once imported: the hub ignores it then, and deletes it after use).
    if o.mode == "auto" {
        if already_imported {
            report.actions.push(json!({"side": "hub", "object": format!("Secret {name}/{}", resources::AUTO_IMPORT_SECRET), "action": "skipped (cluster already imported)"}));
        } else {
            let creds = spoke_credentials(&o)?;
            if let SpokeCredentials::Token { token, .. } = &creds {
                m.add_secret(token.clone());
            }
            let secret = resources::auto_import_secret(name, &creds, o.keep_auto_import_secret);
            let e = hub
                .ensure(&known::secrets(), &secret, Method::Merge, m.check_mode)
                .map_err(|e| report_fail(&report, e))?;
            report.record(m, "hub", &e);
        }
    }
    // 3. ManagedCluster, labels merged into whatever the hub already has.
    if let Some(set) = o.clusterset.as_deref().filter(|s| !s.is_empty()) {
        check_clusterset(m, &hub, set);
    }
    let mc = resources::managed_cluster(
        name,
        &o.labels,
        o.clusterset.as_deref().filter(|s| !s.is_empty()),
        existing.as_ref(),
    );
    let e = hub
        .ensure(&mc_res, &mc, Method::Merge, m.check_mode)
        .map_err(|e| report_fail(&report, e))?;
    report.record(m, "hub", &e);
    let mut mc_now = e.object.clone();
    // 4. KlusterletAddonConfig (ACM only; MCE hubs lack the CRD).
    if o.klusterlet_addon_config {
        let kac = resources::klusterlet_addon_config(name, &o.addons.clone().unwrap_or_default());
        let e = hub.ensure(&known::klusterlet_addon_configs(), &kac, Method::Merge, m.check_mode).map_err(|e| {
            let mut f = report_fail(&report, e);
            if f.msg.contains("HTTP 404") {
                f.msg.push_str(" (the hub has no KlusterletAddonConfig CRD: an MCE-only hub? set klusterlet_addon_config: false)");
            }
            f
        })?;
        report.record(m, "hub", &e);
    }
    // 5. Manual import: the hub's manifests onto the spoke.
    let mut spoke_applied = Vec::new();
    if o.mode == "manual" {
        if already_imported {
            report.actions.push(json!({"side": "spoke", "object": "import manifests", "action": "skipped (cluster already imported)"}));
        } else if m.check_mode && existing.is_none() {
            report.actions.push(json!({"side": "spoke", "object": "import manifests", "action": "would be applied once the hub renders them"}));
        } else {
            let spoke = client("spoke", &o.spoke(), m)?;
            spoke_applied = manual_import(m, &o, &hub, &spoke, &mut report, timeout, interval)?;
        }
    }
    // 6. Wait for the klusterlet to join.
    if o.wait && !(m.check_mode && existing.is_none()) {
        match hub.wait_for_conditions(&mc_res, None, name, &JOINED, timeout, interval) {
            Ok(obj) => mc_now = Some(obj),
            Err(WaitError::Timeout { waited, pending }) => {
                let now = hub.get(&mc_res, None, name).ok().flatten();
                return Err(report
                    .fail(format!(
                        "timed out after {}s waiting for {name} to join the hub: {pending}",
                        waited.as_secs()
                    ))
                    .with(
                        "conditions",
                        json!(now.as_ref().map(conditions).unwrap_or_default()),
                    ));
            }
            Err(WaitError::Failed(e)) => return Err(report_fail(&report, e)),
        }
    }
    let conds = mc_now.as_ref().map(conditions).unwrap_or_default();
    let is_true = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
    let joined = is_true("ManagedClusterJoined");
    let available = is_true("ManagedClusterConditionAvailable");
    let msg = match (report.changed, m.check_mode) {
        (true, true) => format!("{name} would be imported or updated on the hub"),
        (true, false) => format!("{name} imported or updated on the hub ({} mode)", o.mode),
        (false, _) => format!("{name} is already registered on the hub as desired"),
    };
    Ok(Outcome::new(report.changed)
        .msg(msg)
        .with("cluster_name", name)
        .with("mode", o.mode.as_str())
        .with("actions", json!(report.actions))
        .with("spoke_objects", json!(spoke_applied))
        .with(
            "labels",
            mc_now
                .as_ref()
                .and_then(|v| v.pointer("/metadata/labels"))
                .cloned()
                .unwrap_or(Value::Null),
        )
        .with("conditions", json!(conds))
        .with("joined", joined)
        .with("available", available))
}

fn report_fail(r: &Report, e: KubeError) -> Failure {
    r.fail(format!("{e}"))
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

fn spoke_credentials(o: &Opts) -> Result<SpokeCredentials, Failure> {
    if let Some(k) = &o.spoke_kubeconfig {
        let text = if kube_client::kubeconfig::looks_like_content(k) {
            k.clone()
        } else {
            std::fs::read_to_string(k)
                .map_err(|e| Failure::new(format!("cannot read spoke_kubeconfig {k}: {e}")))?
        };
        // Catch a broken kubeconfig here rather than as a failed import on the hub later.
        kube_client::Kubeconfig::parse(&text)
            .and_then(|kc| kc.connection(o.spoke_context.as_deref(), None).map(|_| ()))
            .map_err(|e| Failure::new(format!("spoke_kubeconfig: {e}")))?;
        return Ok(SpokeCredentials::Kubeconfig(text));
    }
    match (&o.spoke_host, &o.spoke_api_key) {
        (Some(h), Some(t)) => Ok(SpokeCredentials::Token {
            server: h.trim_end_matches('/').to_string(),
            token: t.clone(),
        }),
        _ => Err(Failure::new(
            "mode=auto needs spoke_kubeconfig, or spoke_host together with spoke_api_key",
        )),
    }
}

/// Wait for `<cluster>-import`, then apply `crds.yaml` and `import.yaml` to the spoke.
fn manual_import(
    m: &mut Module,
    o: &Opts,
    hub: &Client,
    spoke: &Client,
    report: &mut Report,
    timeout: Duration,
    interval: Duration,
) -> Result<Vec<Value>, Failure> {
    let name = &o.cluster_name;
    let secret_name = format!("{name}-import");
    let secrets = known::secrets();
    // Check mode looks once instead of waiting.
    let secret_wait = if m.check_mode {
        Duration::ZERO
    } else {
        timeout
    };
    let waited = kube_client::wait_for(secret_wait, interval, || {
        Ok(match hub.get(&secrets, Some(name), &secret_name)? {
            None => Poll::Pending(format!(
                "Secret {name}/{secret_name} to be rendered by the hub's import controller"
            )),
            Some(s) => match resources::import_manifests(&s).map_err(KubeError::Other)? {
                Some(x) => Poll::Ready(x),
                None => Poll::Pending(format!(
                    "Secret {name}/{secret_name} to hold both crds.yaml and import.yaml"
                )),
            },
        })
    });
    let (crds, import) = match waited {
        Ok(x) => x,
        Err(WaitError::Timeout { .. }) if m.check_mode => {
            report.changed = true;
            report.actions.push(json!({"side": "spoke", "object": "import manifests",
                "action": format!("would be applied once the hub renders Secret {name}/{secret_name}")}));
            return Ok(Vec::new());
        }
        Err(WaitError::Timeout { waited, pending }) => {
            return Err(report.fail(format!(
                "timed out after {}s waiting for {pending}",
                waited.as_secs()
            )))
        }
        Err(WaitError::Failed(e)) => return Err(report_fail(report, e)),
    };
    let mut applied = Vec::new();
    for (file, text) in [("crds.yaml", &crds), ("import.yaml", &import)] {
        let docs =
            parse_documents(text).map_err(|e| report.fail(format!("{secret_name} {file}: {e}")))?;
        for doc in docs.iter().map(clean_manifest) {
            let api_version = doc
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let kind = doc
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let obj_name = name_of(&doc).0.unwrap_or_default();
            // In check mode the CRDs of crds.yaml are not there: their kinds would be created.
            if m.check_mode {
                if let Err(KubeError::Other(_)) = spoke.resolve(&api_version, &kind) {
                    report.changed = true;
                    let what = format!("{kind} {obj_name}");
                    report
                        .actions
                        .push(json!({"side": "spoke", "object": what, "action": "created"}));
                    applied.push(json!({"object": what, "action": "created", "from": file}));
                    continue;
                }
            }
            // Kinds from crds.yaml appear in discovery a moment after their CRD is Established.
            let res = kube_client::wait_for(
                Duration::from_secs(60).min(timeout.max(Duration::from_secs(5))),
                Duration::from_millis(500),
                || match spoke.resolve(&api_version, &kind) {
                    Ok(r) => Ok(Poll::Ready(r)),
                    Err(KubeError::Other(msg)) => {
                        spoke.forget_discovery();
                        Ok(Poll::Pending(msg))
                    }
                    Err(e) => Err(e),
                },
            )
            .map_err(|e| report.fail(format!("{file}: {kind} {obj_name}: {e}")))?;
            let e = spoke
                .ensure(
                    &res,
                    &doc,
                    Method::Apply {
                        force: o.force_conflicts,
                    },
                    m.check_mode,
                )
                .map_err(|e| {
                    let mut f = report_fail(report, e);
                    if f.msg.contains("HTTP 409") && !o.force_conflicts {
                        f.msg
                            .push_str(" (set force_conflicts: true to take these fields over)");
                    }
                    f
                })?;
            report.record(m, "spoke", &e);
            applied
                .push(json!({"object": e.description, "action": e.action.as_str(), "from": file}));
            if res.kind == "CustomResourceDefinition" && !m.check_mode {
                let crd_name = name_of(&doc).0.unwrap_or_default();
                spoke
                    .wait_for_conditions(
                        &res,
                        None,
                        &crd_name,
                        &[("Established", "True")],
                        timeout,
                        interval.min(Duration::from_secs(1)),
                    )
                    .map_err(|e| report.fail(format!("CRD {crd_name} on the spoke: {e}")))?;
            }
        }
    }
    Ok(applied)
}

/// `state: absent`: delete the ManagedCluster, wait for it, then for the cluster namespace.
fn detach(
    m: &mut Module,
    o: &Opts,
    hub: &Client,
    report: &mut Report,
    timeout: Duration,
    interval: Duration,
) -> Result<Outcome, Failure> {
    let name = o.cluster_name.as_str();
    let steps: Vec<(Resource, bool)> = vec![
        (known::managed_clusters(), true),
        (known::namespaces(), o.delete_namespace),
    ];
    let start = std::time::Instant::now();
    for (res, delete) in steps {
        let current = hub
            .get(&res, None, name)
            .map_err(|e| report_fail(report, e))?;
        let Some(obj) = current else { continue };
        let terminating = obj.pointer("/metadata/deletionTimestamp").is_some();
        if delete && !terminating {
            m.add_diff(
                json!({"kind": res.kind, "name": name, "state": "present"}),
                json!({"kind": res.kind, "name": name, "state": "absent"}),
                &format!("hub: {}", res.describe(None, name)),
                "",
            );
            report.changed = true;
            report.actions.push(
                json!({"side": "hub", "object": res.describe(None, name), "action": "deleted"}),
            );
            if !m.check_mode {
                hub.delete(&res, None, name)
                    .map_err(|e| report_fail(report, e))?;
            }
        } else if !delete {
            // The hub removes the namespace itself once the cluster is gone; wait only if it is on its way.
            if !terminating {
                continue;
            }
        }
        if !m.check_mode {
            let left = timeout.saturating_sub(start.elapsed());
            match hub.wait_deleted(&res, None, name, left, interval) {
                Ok(()) => {}
                Err(WaitError::Timeout { waited, pending }) => {
                    return Err(report.fail(format!(
                        "timed out after {}s waiting for {pending}",
                        waited.as_secs()
                    )));
                }
                Err(WaitError::Failed(e)) => return Err(report_fail(report, e)),
            }
        }
    }
    let msg = match (report.changed, m.check_mode) {
        (false, _) => format!("{name} is not registered on the hub"),
        (true, true) => format!("{name} would be detached from the hub"),
        (true, false) => format!("{name} detached from the hub"),
    };
    Ok(Outcome::new(report.changed)
        .msg(msg)
        .with("cluster_name", name)
        .with("actions", json!(report.actions)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!(
            "../../../ansible_collections/proxshift/openshift/plugins/modules/acm_import.yml"
        );
        let problems = ansible_module::sidecar::check(&super::argument_spec(), yaml, "acm_import");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
