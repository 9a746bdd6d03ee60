//! Certificate keeping, the calls (`state` backup, restore, report): read the kept Secrets, judge them
//! with `cert_check`, and for a restore apply the Secrets and their wiring through [`apply::Run`] — the
//! same dry-run comparison, check mode and masked diff as every other object of this module. Nothing is
//! written unless every kept certificate exists and passes (key match, hostname coverage).

use std::time::{SystemTime, UNIX_EPOCH};

use ansible_module::{Failure, Module, Outcome};
use cert_check::{assess, Contents, Kept};
use kube_client::Client;
use serde_json::{json, Map, Value};

use crate::apply;
use crate::certs::{apiserver_wiring, backup_copy, check_list, data_text, ingress_wiring, KeepOpt};
use crate::error::ConfigError;
use crate::plan::{secret_values, Target};
use crate::Options;

fn kube(what: String) -> impl FnOnce(kube_client::KubeError) -> Failure {
    move |source| {
        Failure::new(
            ConfigError::Kube {
                object: what,
                source: Box::new(source),
            }
            .to_string(),
        )
    }
}

/// The body of `state` backup, restore and report.
pub fn run(m: &mut Module, o: &Options, client: &Client) -> Result<Outcome, Failure> {
    let backup = &o.certificates_backup;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let secrets = client
        .resolve("v1", "Secret")
        .map_err(kube("v1 Secret".into()))?;
    let mut report = Vec::new();
    let mut copies = Vec::new();
    let mut saved = Map::new();
    for k in &o.certificates {
        let live = client
            .get(&secrets, Some(&k.namespace), &k.name)
            .map_err(kube(format!("v1 Secret {}", k.key())))?;
        // A backup returns the values (to be stored under no_log), so only the other states mask them.
        if let (Some(s), false) = (&live, o.state == "backup") {
            learn(m, s);
        }
        let recorded = backup.get(&k.key()).filter(|v| v.is_object());
        // A restore puts the recorded copy back; a backup or report looks at the cluster first.
        let (source, copy) = match (o.state.as_str(), recorded, live) {
            ("restore", Some(r), _) => ("backup", Some(r.clone())),
            (_, _, Some(l)) => ("cluster", Some(l)),
            (_, Some(r), None) => ("backup", Some(r.clone())),
            (_, None, None) => ("missing", None),
        };
        let kept = judge(k, source, copy.as_ref(), now, o.certificate_warning_days);
        if let (Some(c), "cluster") = (&copy, source) {
            saved.insert(k.key(), backup_copy(c));
        }
        copies.push(copy);
        report.push(kept);
    }
    let certificates = serde_json::to_value(&report).unwrap_or_default();
    // A backup names the Secrets the cluster lacks in its message and `missing` (after a rebuild, all).
    let warned = report
        .iter()
        .filter(|k| !(o.state == "backup" && k.source == "missing"));
    for w in warned.flat_map(|k| {
        let key = format!("{}/{}", k.namespace, k.name);
        k.warnings().into_iter().map(move |w| format!("{key}: {w}"))
    }) {
        m.warn(w);
    }
    match o.state.as_str() {
        "restore" => restore(m, o, client, &report, copies, certificates),
        "backup" => {
            let missing: Vec<String> = report
                .iter()
                .filter(|k| k.source != "cluster")
                .map(|k| format!("{}/{}", k.namespace, k.name))
                .collect();
            let msg = format!(
                "{} of {} kept certificate Secrets read for the backup{}",
                saved.len(),
                report.len(),
                if missing.is_empty() {
                    String::new()
                } else {
                    format!("; not in the cluster: {}", missing.join(", "))
                }
            );
            Ok(Outcome::new(false)
                .msg(msg)
                .with("certificates", certificates)
                .with("missing", json!(missing))
                .with("backup", Value::Object(saved)))
        }
        _ => Ok(Outcome::new(false)
            .msg(summary(&report))
            .with("certificates", certificates)),
    }
}

/// The decoded forms of `certificates_backup`'s values, masked from the first check on (the encoded
/// ones are `no_log` in the spec, so every exit path masks them).
pub fn learn_backup(m: &mut Module, o: &Options) {
    for recorded in o.certificates_backup.values() {
        learn(m, recorded);
    }
}

/// Every Secret value read is masked in the output (the backup return value is the one exception the
/// sidecar documents: it is what the record stores, registered under `no_log`).
fn learn(m: &mut Module, secret: &Value) {
    // Certificates are public: their PEM text stays readable (a result names their trust anchor); their
    // base64 form is masked with the rest of the data.
    let mut private = secret.clone();
    if let Some(data) = private.get_mut("data").and_then(Value::as_object_mut) {
        for key in PUBLIC_KEYS {
            if let Some(encoded) = data.remove(key).as_ref().and_then(Value::as_str) {
                m.add_secret(encoded.to_string());
            }
        }
    }
    // Both forms of every other value: base64 as stored, decoded (the key's PEM text).
    for v in secret_values(&private) {
        m.add_secret(v);
    }
}

/// The keys of a TLS Secret that hold certificates, public by nature.
const PUBLIC_KEYS: [&str; 2] = ["tls.crt", "ca.crt"];

fn judge(k: &KeepOpt, source: &str, copy: Option<&Value>, now: i64, warn_days: i64) -> Kept {
    let kept = k.kept(source);
    let Some(c) = copy else {
        let mut kept = kept;
        kept.problems.push("does not exist".to_string());
        return kept;
    };
    let crt = data_text(c, "tls.crt");
    let key = data_text(c, "tls.key");
    let contents = Contents {
        crt: crt.as_deref(),
        key: key.as_deref(),
    };
    assess(kept, contents, now, warn_days)
}

fn summary(report: &[Kept]) -> String {
    let warned = report.iter().filter(|k| !k.warnings().is_empty()).count();
    format!(
        "{} kept certificate(s), {warned} with warnings",
        report.len()
    )
}

/// Refuse when any kept certificate is missing or fails a check; else apply the recorded Secrets, then
/// the wiring.
fn restore(
    m: &mut Module,
    o: &Options,
    client: &Client,
    report: &[Kept],
    copies: Vec<Option<Value>>,
    certificates: Value,
) -> Result<Outcome, Failure> {
    let refused: Vec<String> = report
        .iter()
        .filter(|k| !k.problems.is_empty())
        .map(|k| match k.source.as_str() {
            "missing" => format!(
                "Secret {}/{} does not exist in the cluster and certificates_backup has no copy of it",
                k.namespace, k.name
            ),
            source => format!(
                "Secret {}/{} ({source} copy): {}",
                k.namespace,
                k.name,
                k.problems.join(", ")
            ),
        })
        .collect();
    if !refused.is_empty() {
        return Err(Failure::new(format!(
            "restore refused before anything was written: {}",
            refused.join("; ")
        ))
        .with("certificates", certificates));
    }
    let mut targets = Vec::new();
    for (i, copy) in copies.into_iter().enumerate() {
        if let (Some(body), "backup") = (copy, report[i].source.as_str()) {
            targets.push(target(format!("certificates[{i}] Secret"), body));
        }
    }
    if let Some((i, k)) = o
        .certificates
        .iter()
        .enumerate()
        .find(|(_, k)| k.kind == "ingress")
    {
        targets.push(target(
            format!("certificates[{i}] wiring"),
            ingress_wiring(&k.name),
        ));
    }
    let api: Vec<(String, String)> = o
        .certificates
        .iter()
        .filter(|k| k.kind == "api")
        .map(|k| (k.hostname.clone().unwrap_or_default(), k.name.clone()))
        .collect();
    if !api.is_empty() {
        let r = client
            .resolve("config.openshift.io/v1", "APIServer")
            .map_err(kube("config.openshift.io/v1 APIServer".into()))?;
        let current = client
            .get(&r, None, "cluster")
            .map_err(kube("config.openshift.io/v1 APIServer cluster".into()))?;
        targets.push(target(
            "api certificates wiring".to_string(),
            apiserver_wiring(current.as_ref(), &api),
        ));
    }
    let run = apply::Run {
        client,
        opts: o,
        check_mode: m.check_mode,
    };
    let outcome = run.all(&mut targets, &[]);
    let mut more = Map::new();
    more.insert("certificates".into(), certificates);
    crate::finish(m, outcome, more)
}

fn target(origin: String, body: Value) -> Target {
    let meta = |k: &str| {
        body.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Target {
        origin,
        api_version: body["apiVersion"].as_str().unwrap_or_default().to_string(),
        kind: body["kind"].as_str().unwrap_or_default().to_string(),
        name: meta("name"),
        namespace: meta("namespace"),
        body: kube_client::objects::clean_manifest(&body),
    }
}

/// The option checks of the certificate states, every problem at once.
pub fn check_options(o: &Options) -> Result<(), Failure> {
    let mut problems: Vec<String> = check_list(&o.certificates)
        .iter()
        .map(|p| p.to_string())
        .collect();
    if o.certificates.is_empty() {
        problems.push(format!("state={} needs certificates", o.state));
    }
    let definition_given = match &o.definition {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::String(d)) => !d.trim().is_empty(),
        Some(_) => true,
    };
    if !o.objects.is_empty() || definition_given || o.src.is_some() {
        problems.push(format!(
            "objects, definition and src are not used with state={}",
            o.state
        ));
    }
    if o.certificate_warning_days < 0 {
        problems.push("certificate_warning_days must be >= 0".to_string());
    }
    if o.state == "backup" && !o.certificates_backup.is_empty() {
        // Its values would mask the backup this state returns.
        problems.push(
            "certificates_backup is for state=restore and state=report, not state=backup"
                .to_string(),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(problems.join("; ")))
    }
}
