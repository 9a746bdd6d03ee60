//! `proxshift.openshift.cluster_auth`: Log in to an OpenShift cluster and wait for it to be ready.
//!
//! Credentials come from a kubeconfig, `api_key`, or kubeadmin-style username + password through
//! OpenShift's OAuth server (challenging client, token in the redirect fragment; the OAuth route is
//! checked with the API's CA plus `ingress_ca`). `wait_for` polls `/readyz`, the ClusterVersion, the
//! ClusterOperators, the MachineConfigPools and the Nodes until all are ready — with the operators
//! stable for `stable_polls` looks in a row, as `oc adm wait-for-stable-cluster` wants — or the
//! timeout passes, and then says what was still pending. `state: absent` revokes an OAuth token.

pub mod readiness;
pub mod source;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use kube_client::oauth;
use kube_client::objects::known;
use kube_client::{Client, ConnectionParams, KubeError, Poll, WaitError};
use readiness::TargetState;
use serde::Deserialize;
use serde_json::{json, Map, Value};

const TARGETS: [&str; 5] = [
    "api",
    "clusterversion",
    "operators",
    "machineconfigpools",
    "nodes",
];

/// `oc adm wait-for-stable-cluster` waits for the operators to stay stable for 5 minutes
/// (`MinimumStablePeriod`), looking every 10 s (openshift/oc `pkg/cli/admin/waitforstable/command.go`,
/// `NewWaitForStableOptions`): at the default `poll_interval` of 10 s that is the first stable look
/// and 30 more.
const DEFAULT_STABLE_POLLS: i64 = 31;

/// The module's options; the documentation stub `plugins/modules/cluster_auth.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    // The cluster connection (api_url, kubeconfig, context, api_key, ca_cert, validate_certs): the one
    // declaration cluster_upgrade shares.
    let mut opts = kube_client::connect::cluster_opts();
    opts.extend([
        Opt::str("state")
            .choices(&["present", "absent"])
            .default("present"),
        Opt::str("username").env(&["K8S_AUTH_USERNAME"]),
        Opt::str("password").no_log().env(&["K8S_AUTH_PASSWORD"]),
        Opt::str("ingress_ca"),
        Opt::list("wait_for", Type::Str)
            .choices(&TARGETS)
            .default(json!([])),
        Opt::int("timeout").default(1800),
        Opt::int("poll_interval").default(10),
        Opt::int("expected_nodes"),
        Opt::str("version"),
        Opt::int("stable_polls").default(DEFAULT_STABLE_POLLS),
    ]);
    ArgSpec::new(opts)
        .mutually_exclusive(&["api_key", "password"])
        .required_if_any("state", "absent", &["api_key", "kubeconfig"])
}

#[derive(Debug, Deserialize)]
struct Opts {
    state: String,
    api_url: Option<String>,
    kubeconfig: Option<String>,
    context: Option<String>,
    username: Option<String>,
    password: Option<String>,
    api_key: Option<String>,
    ca_cert: Option<PathBuf>,
    ingress_ca: Option<String>,
    validate_certs: bool,
    #[serde(default)]
    client_cert: Option<PathBuf>,
    #[serde(default)]
    client_key: Option<PathBuf>,
    wait_for: Vec<String>,
    timeout: i64,
    poll_interval: i64,
    expected_nodes: Option<i64>,
    version: Option<String>,
    stable_polls: i64,
}

impl Opts {
    fn waits_for(&self, target: &str) -> bool {
        self.wait_for.iter().any(|t| t == target)
    }
}

/// The API URL to connect to: `K8S_AUTH_HOST` only for a login whose credentials come from the
/// same environment (see [`source`]).
fn api_url(m: &mut Module, o: &Opts) -> Result<Option<String>, Failure> {
    let given: Vec<&'static str> = [
        ("kubeconfig", o.kubeconfig.is_some()),
        ("api_key", o.api_key.is_some()),
        ("username", o.username.is_some()),
        ("password", o.password.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    let env_host = o.api_url.as_deref().unwrap_or_default();
    match source::api_url_source(&m.from_env, &given) {
        source::ApiUrl::AsGiven => Ok(o.api_url.clone()),
        source::ApiUrl::DropEnvHost => {
            m.warn(format!(
                "api_url: K8S_AUTH_HOST ({env_host}) is not used: the task's kubeconfig names the cluster's server"
            ));
            Ok(None)
        }
        source::ApiUrl::Refuse(own) => Err(Failure::new(format!(
            "api_url is required: the task gives its own {} but no api_url, and K8S_AUTH_HOST ({env_host}) is the \
             address of the credential that set the environment (under AWX the job's Kubernetes credential, \
             usually the hub), not of this cluster. Give api_url: https://api.<cluster>.<base_domain>:6443",
            own.join(" and ")
        ))),
    }
}

fn kube_fail(what: &str, e: KubeError) -> Failure {
    Failure::new(format!("{what}: {e}"))
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Opts = m.options()?;
    if o.timeout < 0 || o.poll_interval < 1 {
        return Err(Failure::new(
            "timeout must be >= 0 and poll_interval >= 1 (seconds)",
        ));
    }
    if let Some(n) = o.expected_nodes {
        if n < 1 {
            return Err(Failure::new("expected_nodes must be at least 1"));
        }
        if !o.waits_for("nodes") {
            m.warn("expected_nodes has no effect unless wait_for contains 'nodes'");
        }
    }
    check_stability_options(m, &o)?;
    if o.ingress_ca.is_some() && o.password.is_none() {
        m.warn("ingress_ca has no effect without password (it is the OAuth server's CA)");
    }
    let host = api_url(m, &o)?;
    let params = ConnectionParams {
        kubeconfig: o.kubeconfig.clone(),
        context: o.context.clone(),
        host,
        api_key: o.api_key.clone(),
        ca_cert: o.ca_cert.clone(),
        validate_certs: o.validate_certs,
        client_cert: o.client_cert.clone(),
        client_key: o.client_key.clone(),
    };
    let conn = params.resolve().map_err(|e| Failure::new(e.to_string()))?;
    // Tokens learnt at run time (kubeconfig, OAuth) are returned as `api_key` on success — that is
    // the module's purpose, and masking them would hand later tasks a useless placeholder (use
    // `no_log: true` on the task). Every failure masks them (see `present`).
    if !conn.tls.validate_certs {
        m.warn(format!(
            "validate_certs is off: the certificate of {} is not checked",
            conn.server
        ));
    }
    if o.state == "absent" {
        if let Some(t) = &conn.token {
            m.add_secret(t.clone());
        }
        return revoke(m, &conn);
    }
    let mut learnt = conn.token.clone();
    let r = present(&o, conn, &mut learnt);
    if r.is_err() {
        if let Some(t) = learnt {
            m.add_secret(t);
        }
    }
    r
}

/// `stable_polls` and `version` against the rest: like `oc adm wait-for-stable-cluster` ("--timeout must
/// be greater than the --minimum-stable-period"), a timeout the window cannot fit in is refused.
fn check_stability_options(m: &mut Module, o: &Opts) -> Result<(), Failure> {
    if o.stable_polls < 1 {
        return Err(Failure::new(
            "stable_polls must be at least 1 (1: no stability window)",
        ));
    }
    let window = (o.stable_polls - 1).saturating_mul(o.poll_interval);
    if o.waits_for("operators") && window > 0 && o.timeout <= window {
        return Err(Failure::new(format!(
            "timeout ({}s) must be longer than the stability window of stable_polls={} looks \
             poll_interval={}s apart ({window}s); raise timeout or lower stable_polls",
            o.timeout, o.stable_polls, o.poll_interval
        )));
    }
    if o.stable_polls != DEFAULT_STABLE_POLLS && !o.waits_for("operators") {
        m.warn("stable_polls has no effect unless wait_for contains 'operators'");
    }
    if let Some(v) = &o.version {
        if v.trim().is_empty() {
            return Err(Failure::new(
                "version must be a version such as 4.19.3, or left out",
            ));
        }
        if !o.waits_for("clusterversion") {
            m.warn("version has no effect unless wait_for contains 'clusterversion'");
        }
    }
    Ok(())
}

/// The trust for the OAuth server: the API's CAs (a kubeconfig's `certificate-authority-data` bundle
/// or `ca_cert`, every certificate in them) plus `ingress_ca` (a PEM file or the PEM text).
fn oauth_trust(o: &Opts, conn: &kube_client::Connection) -> Result<kube_client::Tls, Failure> {
    let pem = match o.ingress_ca.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(t) if t.starts_with("-----BEGIN") => Some(t.as_bytes().to_vec()),
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            Failure::new(format!(
                "ingress_ca: cannot read {path}: {e} (give a PEM file or the PEM text)"
            ))
        })?),
    };
    if let Some(p) = &pem {
        if !p.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err(Failure::new(
                "ingress_ca holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        }
    }
    Ok(oauth::oauth_tls(&conn.tls, pem.as_deref()))
}

/// `state: present`; `learnt` receives any token obtained, so that failures can mask it.
fn present(
    o: &Opts,
    mut conn: kube_client::Connection,
    learnt: &mut Option<String>,
) -> Result<Outcome, Failure> {
    let mut method = if o.password.is_some() {
        "password"
    } else if o.api_key.is_some() {
        "api_key"
    } else if o.kubeconfig.is_some() {
        "kubeconfig"
    } else {
        "none"
    };
    let mut targets: Vec<&str> = TARGETS
        .iter()
        .copied()
        .filter(|t| o.wait_for.iter().any(|w| w == t))
        .collect();
    targets.dedup();
    let look = Look {
        expected: o.expected_nodes.map(|n| n as u64),
        version: o.version.clone(),
        stable_polls: u32::try_from(o.stable_polls).unwrap_or(u32::MAX),
    };
    let total = Duration::from_secs(o.timeout as u64);
    let interval = Duration::from_secs(o.poll_interval as u64);
    let started = Instant::now();
    let mut last: Map<String, Value> = Map::new();
    // The API may still be coming up: wait for it first, anonymously (`/readyz` is public, and a
    // token the server cannot check yet would only turn into a 401), then log in.
    if targets.contains(&"api") {
        let mut anon = conn.clone();
        anon.token = None;
        anon.basic = None;
        anon.tls.identity_pem = None;
        let c = Client::new(&anon).map_err(|e| kube_fail("setting up the client", e))?;
        if let Err(e) = proxshift_wait(&c, &["api"], &look, &mut last, total, interval) {
            let data = Map::from_iter([
                ("host".to_string(), json!(conn.server)),
                ("readiness".to_string(), Value::Object(last)),
            ]);
            return Err(wait_failure(e, &conn.server, data));
        }
    }
    let mut expiry: (Option<u64>, Option<String>) = (None, None);
    if let Some(pw) = &o.password {
        // With a password, a kubeconfig gives the server and its CA bundle only: its user's
        // credentials are not used.
        conn.token = None;
        conn.basic = None;
        conn.tls.identity_pem = None;
        let user = o.username.clone().unwrap_or_else(|| "kubeadmin".into());
        let tls = oauth_trust(o, &conn)?;
        let tok = oauth::login(&conn, &tls, &user, pw)
            .map_err(|e| kube_fail(&format!("OAuth login to {}", conn.server), e))?;
        *learnt = Some(tok.access_token.clone());
        if let Some(secs) = tok.expires_in {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            expiry = (Some(secs), Some(oauth::rfc3339(now + secs)));
        }
        conn.token = Some(tok.access_token);
        conn.user_name = Some(user);
    }
    if conn.token.is_none() && conn.tls.identity_pem.is_none() && conn.basic.is_none() {
        method = "none";
    }
    let client = Client::new(&conn).map_err(|e| kube_fail("setting up the client", e))?;

    // Check the credentials now: a bad token should fail here, not as a timeout later.
    let username = if method == "none" {
        None
    } else {
        whoami(&client)?
    }
    .or_else(|| conn.user_name.clone());

    let mut out = Outcome::new(false);
    let ca = conn.ca_path.as_ref().map(|p| p.display().to_string());
    out = out
        .with("host", conn.server.clone())
        .with("api_key", conn.token.clone().map(Value::String).unwrap_or(Value::Null))
        .with("ca_cert", ca.clone().map(Value::String).unwrap_or(Value::Null))
        .with("validate_certs", conn.tls.validate_certs)
        .with("username", username.clone().map(Value::String).unwrap_or(Value::Null))
        .with("auth_method", method)
        .with("token_expires_in", expiry.0.map(Value::from).unwrap_or(Value::Null))
        .with("token_expiry", expiry.1.clone().map(Value::String).unwrap_or(Value::Null))
        .with(
            "k8s_auth",
            json!({"host": conn.server, "api_key": conn.token, "ca_cert": ca, "validate_certs": conn.tls.validate_certs, "username": username}),
        );

    if targets.is_empty() {
        return Ok(out.msg(format!("authenticated to {} ({method})", conn.server)));
    }
    let rest: Vec<&str> = targets.iter().copied().filter(|t| *t != "api").collect();
    let waited = if rest.is_empty() {
        Ok(())
    } else {
        let left = total.saturating_sub(started.elapsed());
        proxshift_wait(&client, &rest, &look, &mut last, left, interval)
    };
    let fact = |key: &str| {
        last.get("clusterversion")
            .and_then(|c| c.get(key))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let (version, cluster_id) = (fact("version"), fact("cluster_id"));
    out = out
        .with("readiness", Value::Object(last))
        .with("version", version)
        .with("cluster_id", cluster_id);
    match waited {
        Ok(()) => Ok(out.msg(format!("{} is ready ({})", conn.server, targets.join(", ")))),
        Err(e) => Err(wait_failure(e, &conn.server, out.data)),
    }
}

/// A failed wait as the module's failure: on a timeout, what was still pending (also as a list).
fn wait_failure(e: WaitError<KubeError>, server: &str, data: Map<String, Value>) -> Failure {
    match e {
        WaitError::Timeout { waited, pending } => {
            let list: Vec<String> = pending.split(" | ").map(str::to_string).collect();
            let mut f = Failure::new(format!(
                "timed out after {}s waiting for {server}: still pending: {pending}",
                waited.as_secs()
            ));
            for (k, v) in data {
                f = f.with(&k, v);
            }
            f.with("pending", json!(list))
        }
        WaitError::Failed(e) => kube_fail("checking readiness", e),
        stopped @ WaitError::Stopped { .. } => {
            let mut f = Failure::new(format!("waiting for {server}: {stopped}"));
            for (k, v) in data {
                f = f.with(&k, v);
            }
            f
        }
    }
}

/// Who the server says we are: OpenShift's `users/~`, else only proof that the credentials work.
fn whoami(client: &Client) -> Result<Option<String>, Failure> {
    match client.get_path("/apis/user.openshift.io/v1/users/~") {
        Ok(u) => Ok(u
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string)),
        Err(e) if matches!(e.status(), Some(404) | Some(403)) => {
            // Plain Kubernetes: discovery is open to every authenticated user, so 401 = bad credentials.
            client
                .get_path("/api")
                .map_err(|e| kube_fail("checking the credentials", e))?;
            Ok(None)
        }
        Err(e) => Err(kube_fail("checking the credentials", e)),
    }
}

/// Errors that waiting may cure (the API coming up, a gateway hiccup) count as pending.
fn waitable(e: &KubeError) -> bool {
    if e.is_transport() {
        return true;
    }
    matches!(e.status(), Some(s) if s == 404 || s >= 500)
}

/// What the targets are checked against.
struct Look {
    expected: Option<u64>,
    version: Option<String>,
    /// Consecutive looks with everything ready that `operators` needs (1: the first one will do).
    stable_polls: u32,
}

fn look(client: &Client, target: &str, want: &Look) -> Result<TargetState, KubeError> {
    let res = match target {
        "api" => {
            return Ok(match client.get_text("/readyz") {
                Ok(t) => readiness::api(Ok(&t)),
                Err(e) if waitable(&e) => readiness::api(Err(&e.to_string())),
                Err(e) => return Err(e),
            })
        }
        "clusterversion" => client
            .get(&known::cluster_versions(), None, "version")
            .map(|v| {
                v.map(|cv| readiness::clusterversion(&cv, want.version.as_deref()))
                    .unwrap_or_else(|| {
                        TargetState::pending(
                            "clusterversion: ClusterVersion 'version' does not exist yet",
                        )
                    })
            }),
        "operators" => client
            .list(&known::cluster_operators(), None, None)
            .map(|l| readiness::operators(&l)),
        "machineconfigpools" => client
            .list(&known::machine_config_pools(), None, None)
            .map(|l| readiness::machine_config_pools(&l)),
        _ => client
            .list(&known::nodes(), None, None)
            .map(|l| readiness::nodes(&l, want.expected)),
    };
    match res {
        Ok(s) => Ok(s),
        Err(e) if waitable(&e) => Ok(TargetState::pending(format!("{target}: {e}"))),
        Err(e) => Err(e),
    }
}

/// Look at `targets` every `interval` until all are ready — with `operators` among them, in
/// `want.stable_polls` looks in a row: as in `oc adm wait-for-stable-cluster` (openshift/oc
/// `pkg/cli/admin/waitforstable/command.go`, `Run`), one unstable look (or a failed list) starts the
/// window again. `last` receives each target's last state and, for `operators`, the run of stable
/// looks (`stable_polls`) and the number of looks (`polls`).
fn proxshift_wait(
    client: &Client,
    targets: &[&str],
    want: &Look,
    last: &mut Map<String, Value>,
    timeout: Duration,
    interval: Duration,
) -> Result<(), WaitError<KubeError>> {
    let window = if targets.contains(&"operators") {
        want.stable_polls.max(1)
    } else {
        1
    };
    let mut stable = 0u32;
    let mut polls = 0u32;
    kube_client::wait_for(timeout, interval, || {
        polls += 1;
        let mut pending = Vec::new();
        for t in targets {
            let s = look(client, t, want)?;
            pending.extend(s.pending.iter().cloned());
            last.insert(t.to_string(), s.to_json());
        }
        stable = if pending.is_empty() { stable + 1 } else { 0 };
        if let Some(ops) = last.get_mut("operators").and_then(Value::as_object_mut) {
            ops.insert("stable_polls".into(), json!(stable));
            ops.insert("polls".into(), json!(polls));
        }
        if pending.is_empty() && stable < window {
            pending.push(format!(
                "operators: stable for {stable} of {window} looks in a row (stable_polls)"
            ));
        }
        Ok(if pending.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending(pending.join(" | "))
        })
    })
}

/// `state: absent`: revoke the OAuth token in use (the token authorises its own deletion).
fn revoke(m: &mut Module, conn: &kube_client::Connection) -> Result<Outcome, Failure> {
    let token = conn
        .token
        .clone()
        .ok_or("state=absent revokes an OAuth token: give it as api_key (or a kubeconfig whose user has a token)")?;
    let name = oauth::token_object_name(&token);
    let client = Client::new(conn).map_err(|e| kube_fail("setting up the client", e))?;
    let paths = [
        format!("/apis/oauth.openshift.io/v1/useroauthaccesstokens/{name}"),
        format!("/apis/oauth.openshift.io/v1/oauthaccesstokens/{name}"),
    ];
    let gone = |why: &str| {
        Ok(Outcome::new(false)
            .msg(format!(
                "the token is not valid any more ({why}); nothing to revoke"
            ))
            .with("revoked", false)
            .with("host", conn.server.clone()))
    };
    for (i, path) in paths.iter().enumerate() {
        let r = if m.check_mode {
            client.get_path(path).map(|_| ())
        } else {
            client.send("DELETE", path, None).map(|_| ())
        };
        match r {
            Ok(()) => {
                let msg = if m.check_mode {
                    "the token would be revoked"
                } else {
                    "the token was revoked"
                };
                return Ok(Outcome::new(true)
                    .msg(msg)
                    .with("revoked", !m.check_mode)
                    .with("host", conn.server.clone()));
            }
            // A revoked token cannot authenticate any more.
            Err(e) if e.status() == Some(401) => return gone("the server rejects it"),
            // Older clusters lack useroauthaccesstokens; try the cluster-wide kind next.
            Err(e) if i == 0 && matches!(e.status(), Some(404) | Some(403)) => continue,
            Err(e) if e.status() == Some(404) => return gone("no such OAuth access token"),
            Err(e) => return Err(kube_fail("revoking the token", e)),
        }
    }
    gone("no such OAuth access token")
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(
            &super::argument_spec(),
            "openshift",
            "cluster_auth",
        );
    }

    /// Under AWX's bearer-token credential K8S_AUTH_HOST is the hub: a spoke's password login
    /// without api_url is refused before any connection, naming the fix (the only test of this
    /// binary that sets the variable).
    #[test]
    fn a_spoke_login_never_takes_the_hub_address_from_the_environment() {
        std::env::set_var("K8S_AUTH_HOST", "https://api.hub.example.com:6443");
        let args = serde_json::json!({"username": "kubeadmin", "password": "secret-pass"});
        let (r, rc) = ansible_module::execute(
            &args.to_string(),
            "cluster_auth",
            &super::argument_spec(),
            super::run,
        );
        std::env::remove_var("K8S_AUTH_HOST");
        assert_eq!(rc, 1, "{r}");
        let msg = r["msg"].as_str().unwrap();
        assert!(msg.starts_with("api_url is required"), "{msg}");
        assert!(msg.contains("https://api.hub.example.com:6443"), "{msg}");
    }
}
