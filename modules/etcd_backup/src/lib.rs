//! `proxshift.openshift.etcd_backup`: an etcd backup taken the way OpenShift documents it, stored off
//! the cluster.
//!
//! - `present`: on a Ready control-plane node ([`plan::pick_node`]), a Pod shaped as `oc debug
//!   node/<node>`'s runs `/usr/local/bin/cluster-backup.sh` in the host's root (the etcd snapshot and the
//!   static pod resources), then uploads both files to an S3-compatible store through presigned URLs
//!   that live only as long as the Pod may run (the store's keys never enter the cluster); the module
//!   then reads each object back and checks its size and SHA-256 against what the node computed. The
//!   `keep` newest of the recorded `backups` stay, older ones are deleted from the store.
//! - `absent`: the named recorded backup's objects deleted from the store.
//!
//! Pure rules in [`plan`]; the reads and writes in [`run`]; the store's client is `s3-client`.

pub mod plan;
pub mod run;

use std::time::Duration;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use kube_client::connect::cluster_opts;
use kube_client::ClusterOptions;
use s3_client::{Credentials, S3Error, Store, StoreOptions};
use serde::Deserialize;
use serde_json::{json, Value};

/// The module's options; the documentation stub `plugins/modules/etcd_backup.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("state")
            .default("present")
            .choices(&["present", "absent"]),
        Opt::str("name").required(),
        Opt::str("node"),
        Opt::str("namespace").default("openshift-etcd"),
        Opt::str("image"),
        Opt::str("backup_dir").default("/var/lib/proxshift/etcd-backup"),
        Opt::bool("keep_on_node").default(false),
        Opt::int("timeout").default(900),
        Opt::int("poll_interval").default(5),
        Opt::bool("verify").default(true),
        Opt::int("keep").default(0),
        Opt::list("backups", Type::Dict).default(json!([])),
        // The object store, named as amazon.aws's S3 modules and the AWS SDKs name it.
        Opt::str("bucket").required(),
        Opt::str("object_prefix").default("proxshift/etcd"),
        Opt::str("endpoint_url")
            .aliases(&["s3_url"])
            .env(&["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"])
            .required(),
        Opt::str("region")
            .env(&["AWS_REGION", "AWS_DEFAULT_REGION"])
            .default("us-east-1"),
        Opt::str("access_key")
            .aliases(&["aws_access_key_id", "aws_access_key"])
            .env(&["AWS_ACCESS_KEY_ID"])
            .no_log()
            .required(),
        Opt::str("secret_key")
            .aliases(&["aws_secret_access_key", "aws_secret_key"])
            .env(&["AWS_SECRET_ACCESS_KEY"])
            .no_log()
            .required(),
        Opt::str("session_token")
            .aliases(&["aws_session_token"])
            .env(&["AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"])
            .no_log(),
        Opt::path("endpoint_ca_path")
            .aliases(&["aws_ca_bundle"])
            .env(&["AWS_CA_BUNDLE"]),
        Opt::bool("endpoint_validate_certs").default(true),
    ])
    .with(cluster_opts())
    // `absent` talks to the store only: a deprovisioned cluster's backups can still be removed.
    .required_if_any("state", "present", &["kubeconfig", "api_url"])
}

#[derive(Deserialize)]
pub struct Options {
    pub state: String,
    pub name: String,
    pub node: Option<String>,
    pub namespace: String,
    pub image: Option<String>,
    pub backup_dir: String,
    pub keep_on_node: bool,
    pub timeout: i64,
    pub poll_interval: i64,
    pub verify: bool,
    pub keep: i64,
    pub backups: Vec<Value>,
    pub bucket: String,
    pub object_prefix: String,
    pub endpoint_url: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
    pub session_token: Option<String>,
    pub endpoint_ca_path: Option<std::path::PathBuf>,
    pub endpoint_validate_certs: bool,
    #[serde(flatten)]
    pub cluster: ClusterOptions,
}

fn seconds(name: &str, v: i64, min: i64) -> Result<Duration, Failure> {
    if v < min {
        return Err(Failure::new(format!(
            "{name} must be at least {min} (seconds)"
        )));
    }
    Ok(Duration::from_secs(v as u64))
}

/// The store's failure as a user can act on it: a refused certificate names the TLS options, a refused
/// signature the keys.
pub fn store_failure(e: &S3Error) -> Failure {
    let hint = if e.is_certificate() {
        " (a TLS error: give the store's CA as endpoint_ca_path, or set endpoint_validate_certs=false in a lab)"
    } else {
        match e {
            S3Error::Status { status: 403, .. } => {
                " (check access_key and secret_key, and that they may use the bucket)"
            }
            S3Error::Status { code, .. } if code == "NoSuchBucket" => {
                " (create the bucket first: this module does not)"
            }
            _ => "",
        }
    };
    Failure::new(format!("object store: {e}{hint}"))
}

fn store(o: &Options, timeout: Duration) -> Result<Store, Failure> {
    if o.bucket.trim().is_empty() {
        return Err(Failure::new("bucket must not be empty"));
    }
    Store::new(&StoreOptions {
        endpoint: o.endpoint_url.clone(),
        bucket: o.bucket.clone(),
        region: o.region.clone(),
        credentials: Credentials {
            access_key: o.access_key.clone(),
            secret_key: o.secret_key.clone(),
            session_token: o.session_token.clone().filter(|t| !t.is_empty()),
        },
        tls: proxshift_http::Tls {
            validate_certs: o.endpoint_validate_certs,
            ca_path: o.endpoint_ca_path.clone(),
            ..proxshift_http::Tls::verified()
        },
        timeout,
    })
    .map_err(|e| store_failure(&e))
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    plan::check_name(&o.name).map_err(|e| Failure::new(e.to_string()))?;
    let prefix = plan::check_prefix(&o.object_prefix).map_err(|e| Failure::new(e.to_string()))?;
    let recorded = plan::recorded(&o.backups).map_err(Failure::new)?;
    let keep =
        usize::try_from(o.keep).map_err(|_| Failure::new("keep must be 0 (keep all) or more"))?;
    let timeout = seconds("timeout", o.timeout, 60)?;
    let interval = seconds("poll_interval", o.poll_interval, 1)?;
    if !o.endpoint_validate_certs {
        m.warn("endpoint_validate_certs=false: the object store's certificate is not checked");
    }
    let st = store(&o, Duration::from_secs(300))?;
    let ctx = run::Context {
        store: &st,
        prefix: &prefix,
        check_mode: m.check_mode,
        diff_mode: m.diff_mode,
    };
    if o.state == "absent" {
        return run::remove(&ctx, &recorded, &o.name);
    }
    let kube = kube_client::connect("cluster", &o.cluster.params())
        .map_err(|e| Failure::new(e.to_string()))?
        .into_client_for(m);
    let take = run::Take {
        opts: &o,
        kube: &kube,
        timeout,
        interval,
        recorded: &recorded,
        keep,
    };
    run::take(&ctx, &take, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(&argument_spec(), "openshift", "etcd_backup");
    }

    #[test]
    fn a_store_refusal_says_what_to_check() {
        let status = |status, code: &str| S3Error::Status {
            method: "HEAD".into(),
            target: "s3://b/k".into(),
            status,
            code: code.into(),
            message: String::new(),
        };
        let msg = store_failure(&status(403, "SignatureDoesNotMatch")).msg;
        assert!(
            msg.starts_with("object store: HEAD s3://b/k: HTTP 403 SignatureDoesNotMatch"),
            "{msg}"
        );
        assert!(msg.contains("access_key and secret_key"), "{msg}");
        assert!(store_failure(&status(404, "NoSuchBucket"))
            .msg
            .contains("create the bucket first"));
        assert!(!store_failure(&status(500, "")).msg.contains('('));
    }
}
