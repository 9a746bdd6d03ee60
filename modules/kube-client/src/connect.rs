//! How a module connects to a cluster it was given options for — the ACM hub of `acm_import` and
//! `acm_cluster_info` (one construction for both), or a spoke — and which cluster it reached.
//!
//! The hub options are one serde struct ([`HubOptions`]) that both modules flatten into their own
//! options, so their names, and a `module_defaults` entry, stay the same in both.

use std::path::PathBuf;

use proxshift_http::Backoff;
use serde::Deserialize;
use serde_json::Value;

use crate::client::Client;
use crate::error::KubeError;
use crate::kubeconfig::ConnectionParams;
use crate::objects::known;

/// The hub connection options as the modules name them (`hub_kubeconfig`, `hub_host`, …).
#[derive(Debug, Clone, Deserialize)]
pub struct HubOptions {
    pub hub_kubeconfig: Option<String>,
    pub hub_context: Option<String>,
    pub hub_host: Option<String>,
    pub hub_api_key: Option<String>,
    pub hub_ca_cert: Option<PathBuf>,
    pub hub_validate_certs: bool,
}

impl HubOptions {
    pub fn params(&self) -> ConnectionParams {
        ConnectionParams {
            kubeconfig: self.hub_kubeconfig.clone(),
            context: self.hub_context.clone(),
            host: self.hub_host.clone(),
            api_key: self.hub_api_key.clone(),
            ca_cert: self.hub_ca_cert.clone(),
            validate_certs: self.hub_validate_certs,
            ..Default::default()
        }
    }
}

/// The environment variables each hub option falls back to: the names AWX's "OpenShift or Kubernetes
/// API Bearer Token" credential (and kubernetes.core) inject, so a job template's credential is enough.
pub const HUB_ENV: [(&str, &str); 6] = [
    ("hub_kubeconfig", "K8S_AUTH_KUBECONFIG"),
    ("hub_context", "K8S_AUTH_CONTEXT"),
    ("hub_host", "K8S_AUTH_HOST"),
    ("hub_api_key", "K8S_AUTH_API_KEY"),
    ("hub_ca_cert", "K8S_AUTH_SSL_CA_CERT"),
    ("hub_validate_certs", "K8S_AUTH_VERIFY_SSL"),
];

/// The environment variable the hub option `name` falls back to.
pub fn hub_env(name: &str) -> &'static str {
    HUB_ENV
        .iter()
        .find(|(opt, _)| *opt == name)
        .map(|(_, var)| *var)
        .unwrap_or_else(|| panic!("{name} is not a hub option"))
}

/// The hub options as `acm_import` and `acm_cluster_info` declare them, with their `K8S_AUTH_*`
/// fallbacks: one list, so the two modules cannot drift apart.
#[cfg(feature = "module-options")]
pub fn hub_opts() -> Vec<ansible_module::Opt> {
    use ansible_module::Opt;
    vec![
        // A kubeconfig given as text holds credentials.
        Opt::str("hub_kubeconfig")
            .no_log()
            .env(&[hub_env("hub_kubeconfig")]),
        Opt::str("hub_context").env(&[hub_env("hub_context")]),
        Opt::str("hub_host").env(&[hub_env("hub_host")]),
        Opt::str("hub_api_key")
            .no_log()
            .env(&[hub_env("hub_api_key")]),
        Opt::path("hub_ca_cert").env(&[hub_env("hub_ca_cert")]),
        Opt::bool("hub_validate_certs")
            .default(true)
            .env(&[hub_env("hub_validate_certs")]),
    ]
}

/// A cluster's own connection options as `cluster_auth` names them (`api_url`, `kubeconfig`, …): the
/// modules that act on the cluster itself, not on a hub, flatten this into their options.
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterOptions {
    pub api_url: Option<String>,
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
    pub api_key: Option<String>,
    pub ca_cert: Option<PathBuf>,
    pub validate_certs: bool,
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    #[serde(default)]
    pub client_key: Option<PathBuf>,
}

impl ClusterOptions {
    pub fn params(&self) -> ConnectionParams {
        ConnectionParams {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            host: self.api_url.clone(),
            api_key: self.api_key.clone(),
            ca_cert: self.ca_cert.clone(),
            validate_certs: self.validate_certs,
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
        }
    }
}

/// [`ClusterOptions`] as `cluster_auth` and `cluster_upgrade` declare them, with their `K8S_AUTH_*` fallbacks.
#[cfg(feature = "module-options")]
pub fn cluster_opts() -> Vec<ansible_module::Opt> {
    use ansible_module::Opt;
    vec![
        Opt::str("api_url")
            .aliases(&["host"])
            .env(&["K8S_AUTH_HOST"]),
        // A kubeconfig given as text holds credentials.
        Opt::str("kubeconfig")
            .no_log()
            .env(&["K8S_AUTH_KUBECONFIG"]),
        Opt::str("context").env(&["K8S_AUTH_CONTEXT"]),
        Opt::str("api_key").no_log().env(&["K8S_AUTH_API_KEY"]),
        Opt::path("ca_cert")
            .aliases(&["ssl_ca_cert"])
            .env(&["K8S_AUTH_SSL_CA_CERT"]),
        Opt::bool("validate_certs")
            .aliases(&["verify_ssl"])
            .env(&["K8S_AUTH_VERIFY_SSL"])
            .default(true),
        // kubernetes.core's k8s_auth_options: a client certificate in place of a token.
        Opt::path("client_cert")
            .aliases(&["cert_file"])
            .env(&["K8S_AUTH_CERT_FILE"]),
        Opt::path("client_key")
            .aliases(&["key_file"])
            .env(&["K8S_AUTH_KEY_FILE"]),
    ]
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The options do not make a connection (no server, unreadable or broken kubeconfig, bad URL).
    #[error("{side} connection: {source}")]
    Settings {
        side: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{side} connection: {source}")]
    Client {
        side: &'static str,
        #[source]
        source: KubeError,
    },
}

/// A client plus what the module must do with it before any output: mask the token, warn.
pub struct Connected {
    pub client: Client,
    /// The bearer token in use (from the options or the kubeconfig), to be masked in all output.
    pub token: Option<String>,
    /// Set when certificates are not checked.
    pub warning: Option<String>,
}

impl Connected {
    /// The client, once the module has masked the token in every output and passed the warning on.
    #[cfg(feature = "module-options")]
    pub fn into_client_for(self, m: &mut ansible_module::Module) -> Client {
        if let Some(t) = self.token {
            m.add_secret(t);
        }
        if let Some(w) = self.warning {
            m.warn(w);
        }
        self.client
    }
}

/// Resolve `params` (kubeconfig, host, token, CA) and build the client for `side` ("hub", "spoke").
pub fn connect(side: &'static str, params: &ConnectionParams) -> Result<Connected, ConnectError> {
    let conn = params.resolve().map_err(|e| ConnectError::Settings {
        side,
        source: e.into(),
    })?;
    let warning = (!conn.tls.validate_certs).then(|| {
        format!(
            "{side}: validate_certs is off, the certificate of {} is not checked",
            conn.server
        )
    });
    let client = Client::new(&conn).map_err(|source| ConnectError::Client { side, source })?;
    Ok(Connected {
        token: conn.token.clone(),
        client,
        warning,
    })
}

/// An OpenShift cluster's ID (`ClusterVersion version` `spec.clusterID`), the value ACM reports as
/// the ClusterClaim `id.openshift.io`. `None` when the server is not OpenShift (no ClusterVersion).
pub fn cluster_id(client: &Client) -> Result<Option<String>, KubeError> {
    Ok(client
        .get(&known::cluster_versions(), None, "version")?
        .and_then(|cv| {
            cv.pointer("/spec/clusterID")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .filter(|id| !id.is_empty()))
}

/// [`cluster_id`] asked once, without retries: for a cluster the controller may not reach (the hub
/// reaches a spoke the controller cannot), where an unanswered question must not cost the backoff.
pub fn cluster_id_once(client: &mut Client) -> Result<Option<String>, KubeError> {
    client.set_backoff(Backoff::none());
    let id = cluster_id(client);
    client.set_backoff(Backoff::default());
    id
}

/// Two API URLs name the same server (scheme and host case, a trailing slash and the default
/// port do not matter).
pub fn same_server(a: &str, b: &str) -> bool {
    fn norm(u: &str) -> String {
        let u = u.trim().trim_end_matches('/').to_ascii_lowercase();
        u.strip_suffix(":443")
            .filter(|_| u.starts_with("https://"))
            .map(str::to_string)
            .unwrap_or(u)
    }
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_server_ignores_case_slash_and_default_port() {
        assert!(same_server("https://API.hub:6443/", "https://api.hub:6443"));
        assert!(same_server("https://api.hub:443", "https://api.hub"));
        assert!(!same_server(
            "https://api.hub:6443",
            "https://api.spoke:6443"
        ));
        assert!(!same_server(
            "https://127.0.0.1:6443",
            "https://localhost:6443"
        ));
    }

    #[test]
    fn settings_errors_keep_their_cause() {
        let p = ConnectionParams {
            validate_certs: true,
            ..Default::default()
        };
        let e = connect("hub", &p).err().expect("no server is an error");
        assert!(e.to_string().starts_with("hub connection: "), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(hub_env("hub_host"), "K8S_AUTH_HOST");
    }
}
