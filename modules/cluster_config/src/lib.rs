//! `proxshift.openshift.cluster_config`: apply Kubernetes objects with server-side apply, delete
//! them, read them, and wait until they show conditions or values.
//!
//! Pure parts: [`plan`] (the objects, what counts as a change — see its module comment —, masking)
//! and [`wait`] (the checks and what is pending). [`apply`] does the calls through `kube-client`;
//! the connection options are `kube_client::connect::cluster_opts` (`cluster_auth`'s names, the
//! `K8S_AUTH_*` fallbacks).
//!
//! Certificate keeping (`state` backup, restore, report over `certificates`): [`certs`] (pure: the
//! list's rules, the backup copy of a Secret, the wiring objects) with `cert_check`'s checks, and
//! [`keep`] (reads the Secrets; a restore applies them and their wiring through [`apply`]).

pub mod apply;
pub mod certs;
pub mod error;
pub mod keep;
pub mod plan;
pub mod wait;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use kube_client::connect::cluster_opts;
use kube_client::ClusterOptions;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::error::ConfigError;
use crate::wait::WaitCondition;

/// The module's options; the documentation stub `plugins/modules/cluster_config.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::list("objects", Type::Dict).default(json!([])),
        // kubernetes.core's k8s: YAML text, a mapping or a list of mappings; or a file (`src`).
        Opt::raw("definition").aliases(&["resource_definition"]),
        Opt::path("src"),
        // kubernetes.core's client-side `apply`: every write here is a server-side apply already.
        Opt::bool("apply"),
        Opt::str("state")
            .choices(&["present", "absent", "read", "backup", "restore", "report"])
            .default("present"),
        Opt::str("namespace"),
        Opt::str("field_manager").default(kube_client::client::FIELD_MANAGER),
        Opt::bool("force_conflicts").default(false),
        Opt::str("installed_by"),
        // A list of checks (each: type/status or path/value, narrowed by kind/name), or kubernetes.core's
        // boolean with `wait_condition`; checked in `wait::from_options`.
        Opt::raw("wait").default(json!([])),
        Opt::dict("wait_condition").options(ArgSpec::new(vec![
            Opt::str("type").required(),
            Opt::str("status")
                .choices(&["True", "False", "Unknown"])
                .default("True"),
            Opt::str("reason"),
        ])),
        Opt::int("wait_timeout").default(120),
        Opt::int("wait_interval")
            .aliases(&["wait_sleep"])
            .default(2),
        Opt::list("certificates", Type::Dict)
            .default(json!([]))
            .options(ArgSpec::new(vec![
                Opt::str("namespace").required(),
                Opt::str("name").required(),
                Opt::str("type")
                    .choices(&["ingress", "api", "other"])
                    .default("other"),
                Opt::str("hostname"),
            ])),
        // The Secrets' values are no_log in every exit path (option checking and connecting included);
        // not the whole option, which would mask every name and namespace it holds in the report. The
        // decoded forms are masked as well once read (keep::run).
        Opt::dict("certificates_backup")
            .default(json!({}))
            .no_log_keys(&["data", "stringData"]),
        Opt::int("certificate_warning_days").default(30),
    ])
    .with(cluster_opts())
    .required_one_of(&["objects", "definition", "src", "certificates"])
    .mutually_exclusive(&["definition", "src"])
}

#[derive(Debug, Deserialize)]
pub struct Options {
    pub objects: Vec<Value>,
    pub definition: Option<Value>,
    pub src: Option<std::path::PathBuf>,
    pub apply: Option<bool>,
    pub state: String,
    pub namespace: Option<String>,
    pub field_manager: String,
    pub force_conflicts: bool,
    pub installed_by: Option<String>,
    pub wait: Value,
    pub wait_condition: Option<WaitCondition>,
    pub wait_timeout: i64,
    pub wait_interval: i64,
    pub certificates: Vec<certs::KeepOpt>,
    pub certificates_backup: Map<String, Value>,
    pub certificate_warning_days: i64,
    #[serde(flatten)]
    pub cluster: ClusterOptions,
}

fn fail(e: ConfigError) -> Failure {
    Failure::new(e.to_string())
}

/// The client for the task's cluster; its token masked, its warning passed on.
fn connect(m: &mut Module, o: &Options) -> Result<kube_client::Client, Failure> {
    Ok(kube_client::connect("cluster", &o.cluster.params())
        .map_err(|e| fail(ConfigError::Connect(Box::new(e))))?
        .into_client_for(m))
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    if matches!(o.state.as_str(), "backup" | "restore" | "report") {
        keep::learn_backup(m, &o);
        keep::check_options(&o)?;
        let client = connect(m, &o)?;
        return keep::run(m, &o, &client);
    }
    let read = o.state == "read";
    let definition = match &o.src {
        Some(path) => Some(Value::String(std::fs::read_to_string(path).map_err(
            |source| {
                fail(ConfigError::Src {
                    path: path.clone(),
                    source,
                })
            },
        )?)),
        None => o.definition.clone(),
    };
    let mut targets = plan::targets(&o.objects, definition.as_ref(), read).map_err(fail)?;
    // Every Secret value of the task is masked everywhere, an API error quoting one included.
    for t in &targets {
        for s in plan::secret_values(&t.body) {
            m.add_secret(s);
        }
    }
    let checks = wait::from_options(&o.wait, o.wait_condition.as_ref(), &targets).map_err(fail)?;
    if !checks.is_empty() && o.state != "present" {
        return Err(fail(ConfigError::WaitWithState(o.state.clone())));
    }
    if o.wait_condition.is_some() && o.wait != Value::Bool(true) {
        m.warn("wait_condition has no effect without wait: true (as in kubernetes.core)");
    }
    if o.wait_timeout < 0 || o.wait_interval < 1 {
        return Err(fail(ConfigError::BadNumber {
            what: "wait_timeout and wait_interval",
            rule: ">= 0 and >= 1 (seconds)",
        }));
    }
    if o.field_manager.trim().is_empty() {
        return Err(Failure::new("field_manager must not be empty"));
    }
    let client = connect(m, &o)?;
    let run = apply::Run {
        client: &client,
        opts: &o,
        check_mode: m.check_mode,
    };
    let outcome = run.all(&mut targets, &checks);
    finish(m, outcome, Map::new())
}

/// The module's result from a run: its diffs, `changed`, `results` and the summary (or the error), with
/// `more` keys added either way.
pub(crate) fn finish(
    m: &mut Module,
    outcome: apply::RunOutcome,
    more: Map<String, Value>,
) -> Result<Outcome, Failure> {
    for d in &outcome.diffs {
        m.add_diff(d.before.clone(), d.after.clone(), &d.header, &d.header);
    }
    let changed = outcome.changed();
    let results = Value::Array(
        outcome
            .results
            .iter()
            .map(apply::ObjResult::to_json)
            .collect(),
    );
    match outcome.error {
        None => {
            let mut out = Outcome::new(changed)
                .msg(outcome.summary(m.check_mode))
                .with("results", results);
            for (k, v) in more {
                out = out.with(&k, v);
            }
            Ok(out)
        }
        Some(e) => {
            let mut out = Failure::new(e.to_string())
                .changed(changed)
                .with("conflict", json!(e.is_conflict()))
                .with("results", results);
            for (k, v) in more {
                out = out.with(&k, v);
            }
            Err(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use module_testkit::TestModule;
    use serde_json::{json, Value};

    // A leak-scan canary, not a key; the PEM markers are split so no tracked file holds a key's header.
    const KEY_PEM: &str = concat!(
        "-----BEGIN PRIVATE ",
        "KEY-----\nkept-key-canary-3e3e\n-----END PRIVATE ",
        "KEY-----\n"
    );

    fn backup() -> Value {
        let b64 = base64::engine::general_purpose::STANDARD;
        json!({"openshift-ingress/apps-cert": {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "apps-cert", "namespace": "openshift-ingress"},
            "data": {"tls.key": b64.encode(KEY_PEM), "tls.crt": b64.encode("crt-canary-4f4f")},
        }})
    }

    /// The kept keys never show, whichever check fails first: an option the spec rejects, the
    /// certificate rules, the connection.
    #[test]
    fn kept_keys_are_masked_in_every_early_failure() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let module = TestModule::new("cluster_config", super::argument_spec(), super::run)
            .hiding(b64.encode(KEY_PEM))
            .hiding("kept-key-canary-3e3e")
            .hiding(b64.encode("crt-canary-4f4f"));
        let base = json!({"state": "restore", "certificates_backup": backup(),
                          "kubeconfig": "/nonexistent/kubeconfig",
                          "certificates": [{"namespace": "openshift-ingress", "name": "apps-cert", "type": "ingress"}]});
        let mut bad_type = base.clone();
        bad_type["certificate_warning_days"] = json!("soon");
        let mut negative = base.clone();
        negative["certificate_warning_days"] = json!(-1);
        let mut unknown = base.clone();
        unknown["bogus"] = json!(1);
        for args in [bad_type, negative, unknown, base] {
            let r = module.failed(&args);
            let shown = &r["invocation"]["module_args"]["certificates_backup"];
            assert_eq!(
                shown["openshift-ingress/apps-cert"]["data"],
                json!(ansible_module::mask::MASK_WHOLE),
                "{r}"
            );
            assert_eq!(
                shown["openshift-ingress/apps-cert"]["metadata"]["name"],
                json!("apps-cert")
            );
        }
    }

    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "openshift",
            "cluster_config",
        );
    }
}
