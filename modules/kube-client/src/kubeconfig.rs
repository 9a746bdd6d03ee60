//! kubeconfig files and explicit connection settings, resolved to one [`Connection`]. Pure apart from
//! reading the files a kubeconfig names (certificate paths are relative to the kubeconfig's folder).

use std::path::{Path, PathBuf};

use base64::Engine;
use proxshift_http::Tls;
use serde::Deserialize;

/// Everything needed to talk to one API server.
#[derive(Clone, Default)]
pub struct Connection {
    /// `https://api.example.com:6443`, without a trailing slash.
    pub server: String,
    pub token: Option<String>,
    /// Basic-auth credentials from a kubeconfig user (rare; OpenShift refuses them on the API).
    pub basic: Option<(String, String)>,
    pub tls: Tls,
    /// The kubeconfig user name (for reports; not an identity the server vouches for).
    pub user_name: Option<String>,
    /// The CA file path when the CA came from a file (reported back to the user).
    pub ca_path: Option<PathBuf>,
}

impl std::fmt::Debug for Connection {
    // Never print the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .field("user_name", &self.user_name)
            .field("validate_certs", &self.tls.validate_certs)
            .finish()
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    #[serde(default)]
    pub clusters: Vec<Named<ClusterEntry>>,
    #[serde(default)]
    pub users: Vec<Named<UserEntry>>,
    #[serde(default)]
    pub contexts: Vec<Named<ContextEntry>>,
    #[serde(default)]
    pub current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Named<T> {
    pub name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    pub item: T,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub struct ClusterEntry {
    pub server: String,
    pub certificate_authority: Option<String>,
    pub certificate_authority_data: Option<String>,
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub struct UserEntry {
    pub token: Option<String>,
    pub token_file: Option<String>,
    pub client_certificate: Option<String>,
    pub client_certificate_data: Option<String>,
    pub client_key: Option<String>,
    pub client_key_data: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub exec: Option<serde_json::Value>,
    pub auth_provider: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize, Default)]
pub struct ContextEntry {
    pub cluster: String,
    #[serde(default)]
    pub user: String,
    pub namespace: Option<String>,
}

/// Why a kubeconfig or the connection options do not give a usable connection.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("the kubeconfig is not valid: {0}")]
    Invalid(#[source] serde_yaml_ng::Error),
    #[error("cannot read kubeconfig {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read kubeconfig {what} {}: {source}", path.display())]
    ReadReferenced {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("kubeconfig {what} is not valid base64: {source}")]
    Base64 {
        what: &'static str,
        #[source]
        source: base64::DecodeError,
    },
    #[error("the kubeconfig has no current-context; set `context`")]
    NoCurrentContext,
    #[error("context {name:?} is not in the kubeconfig (it has: {})", known.join(", "))]
    UnknownContext { name: String, known: Vec<String> },
    #[error("context {context:?} names cluster {cluster:?}, which the kubeconfig does not define")]
    UnknownCluster { context: String, cluster: String },
    #[error("context {context:?} names user {user:?}, which the kubeconfig does not define")]
    UnknownUser { context: String, user: String },
    #[error("cluster {0:?} in the kubeconfig has no server")]
    NoServer(String),
    #[error("kubeconfig user {0:?} uses an exec or auth-provider plugin, which is not supported; use a token or client certificate")]
    PluginUser(String),
    #[error("kubeconfig user {0:?} has a client certificate without a key (or a key without a certificate)")]
    HalfIdentity(String),
    #[error("client_cert and client_key go together: {0} is set without the other")]
    HalfClientOption(&'static str),
    #[error("no API server given: set a kubeconfig or the API URL")]
    NoServerGiven,
    #[error("the API URL {0:?} must start with https:// (or http://)")]
    NotHttp(String),
}

/// How a module was asked to connect: the usual Ansible options, any of them absent.
#[derive(Debug, Clone, Default)]
pub struct ConnectionParams {
    /// A kubeconfig file path or the kubeconfig text itself.
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
    pub host: Option<String>,
    pub api_key: Option<String>,
    pub ca_cert: Option<PathBuf>,
    pub validate_certs: bool,
    /// A client certificate and its key (PEM files), kubernetes.core's `client_cert`/`client_key`:
    /// the identity in place of the kubeconfig's user, as with `api_key`.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

fn b64(what: &'static str, data: &str) -> Result<Vec<u8>, KubeconfigError> {
    let clean: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(clean)
        .map_err(|source| KubeconfigError::Base64 { what, source })
}

fn read_rel(
    base: Option<&Path>,
    what: &'static str,
    p: &str,
) -> Result<(PathBuf, Vec<u8>), KubeconfigError> {
    let path = match base {
        Some(b) if Path::new(p).is_relative() => b.join(p),
        _ => PathBuf::from(p),
    };
    match std::fs::read(&path) {
        Ok(data) => Ok((path, data)),
        Err(source) => Err(KubeconfigError::ReadReferenced { what, path, source }),
    }
}

impl Kubeconfig {
    pub fn parse(text: &str) -> Result<Self, KubeconfigError> {
        serde_yaml_ng::from_str(text).map_err(KubeconfigError::Invalid)
    }

    /// Resolve `context` (or the current context) to a connection. `base` is the kubeconfig's folder,
    /// for relative file references.
    pub fn connection(
        &self,
        context: Option<&str>,
        base: Option<&Path>,
    ) -> Result<Connection, KubeconfigError> {
        let ctx_name = match context.or(self.current_context.as_deref()) {
            Some(c) if !c.is_empty() => c.to_string(),
            _ if self.contexts.len() == 1 => self.contexts[0].name.clone(),
            _ => return Err(KubeconfigError::NoCurrentContext),
        };
        let ctx = self
            .contexts
            .iter()
            .find(|c| c.name == ctx_name)
            .ok_or_else(|| KubeconfigError::UnknownContext {
                name: ctx_name.clone(),
                known: self.contexts.iter().map(|c| c.name.clone()).collect(),
            })?;
        let cluster = self
            .clusters
            .iter()
            .find(|c| c.name == ctx.item.cluster)
            .ok_or_else(|| KubeconfigError::UnknownCluster {
                context: ctx_name.clone(),
                cluster: ctx.item.cluster.clone(),
            })?;
        let user = if ctx.item.user.is_empty() {
            None
        } else {
            Some(
                self.users
                    .iter()
                    .find(|u| u.name == ctx.item.user)
                    .ok_or_else(|| KubeconfigError::UnknownUser {
                        context: ctx_name.clone(),
                        user: ctx.item.user.clone(),
                    })?,
            )
        };
        let c = &cluster.item;
        let mut conn = Connection {
            server: c.server.trim_end_matches('/').to_string(),
            tls: Tls {
                validate_certs: !c.insecure_skip_tls_verify,
                ..Default::default()
            },
            user_name: user.map(|u| u.name.clone()),
            ..Default::default()
        };
        if conn.server.is_empty() {
            return Err(KubeconfigError::NoServer(cluster.name.clone()));
        }
        if let Some(d) = &c.certificate_authority_data {
            conn.tls.ca_pem = Some(b64("certificate-authority-data", d)?);
        } else if let Some(p) = &c.certificate_authority {
            let (path, data) = read_rel(base, "certificate-authority", p)?;
            conn.tls.ca_pem = Some(data);
            conn.ca_path = Some(path);
        }
        if let Some(u) = user {
            let u = &u.item;
            if u.exec.is_some() || u.auth_provider.is_some() {
                return Err(KubeconfigError::PluginUser(ctx.item.user.clone()));
            }
            if let Some(t) = &u.token {
                conn.token = Some(t.trim().to_string());
            } else if let Some(p) = &u.token_file {
                let (_, data) = read_rel(base, "token-file", p)?;
                conn.token = Some(String::from_utf8_lossy(&data).trim().to_string());
            }
            let cert = match (&u.client_certificate_data, &u.client_certificate) {
                (Some(d), _) => Some(b64("client-certificate-data", d)?),
                (None, Some(p)) => Some(read_rel(base, "client-certificate", p)?.1),
                _ => None,
            };
            let key = match (&u.client_key_data, &u.client_key) {
                (Some(d), _) => Some(b64("client-key-data", d)?),
                (None, Some(p)) => Some(read_rel(base, "client-key", p)?.1),
                _ => None,
            };
            match (cert, key) {
                (Some(mut c), Some(k)) => {
                    // reqwest wants one PEM with the key and the chain.
                    if !c.ends_with(b"\n") {
                        c.push(b'\n');
                    }
                    c.extend_from_slice(&k);
                    conn.tls.identity_pem = Some(c);
                }
                (None, None) => {}
                _ => return Err(KubeconfigError::HalfIdentity(ctx.item.user.clone())),
            }
            if let (Some(n), Some(p)) = (&u.username, &u.password) {
                conn.basic = Some((n.clone(), p.clone()));
            }
        }
        Ok(conn)
    }
}

/// Is this option value the kubeconfig text rather than a path to it?
pub fn looks_like_content(s: &str) -> bool {
    s.contains('\n') || s.trim_start().starts_with('{') || s.contains("apiVersion:")
}

impl ConnectionParams {
    /// Build the connection: the kubeconfig (file or content) when given, with `host`, `api_key`,
    /// `ca_cert` and `validate_certs=false` overriding it; else `host` + `api_key`.
    /// `client_cert` and `client_key` read into the one PEM reqwest takes (chain, then key).
    fn client_identity(&self) -> Result<Option<Vec<u8>>, KubeconfigError> {
        match (&self.client_cert, &self.client_key) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(KubeconfigError::HalfClientOption("client_cert")),
            (None, Some(_)) => Err(KubeconfigError::HalfClientOption("client_key")),
            (Some(cert), Some(key)) => {
                let read = |what: &'static str, p: &PathBuf| {
                    std::fs::read(p).map_err(|source| KubeconfigError::ReadReferenced {
                        what,
                        path: p.clone(),
                        source,
                    })
                };
                let mut pem = read("client_cert", cert)?;
                if !pem.ends_with(b"\n") {
                    pem.push(b'\n');
                }
                pem.extend_from_slice(&read("client_key", key)?);
                Ok(Some(pem))
            }
        }
    }

    pub fn resolve(&self) -> Result<Connection, KubeconfigError> {
        let mut conn = match &self.kubeconfig {
            Some(k) if !k.trim().is_empty() => {
                let (text, base) = if looks_like_content(k) {
                    (k.clone(), None)
                } else {
                    let p = PathBuf::from(k);
                    let text =
                        std::fs::read_to_string(&p).map_err(|source| KubeconfigError::Read {
                            path: p.clone(),
                            source,
                        })?;
                    (text, p.parent().map(Path::to_path_buf))
                };
                Kubeconfig::parse(&text)?.connection(self.context.as_deref(), base.as_deref())?
            }
            _ => {
                let host = self
                    .host
                    .as_deref()
                    .filter(|h| !h.is_empty())
                    .ok_or(KubeconfigError::NoServerGiven)?;
                Connection {
                    server: host.trim_end_matches('/').to_string(),
                    tls: Tls::verified(),
                    ..Default::default()
                }
            }
        };
        if let Some(h) = self.host.as_deref().filter(|h| !h.is_empty()) {
            conn.server = h.trim_end_matches('/').to_string();
        }
        if !conn.server.starts_with("https://") && !conn.server.starts_with("http://") {
            return Err(KubeconfigError::NotHttp(conn.server.clone()));
        }
        if let Some(t) = self.api_key.as_deref().filter(|t| !t.is_empty()) {
            conn.token = Some(t.to_string());
            conn.tls.identity_pem = None;
            conn.basic = None;
        }
        if let Some(identity) = self.client_identity()? {
            conn.tls.identity_pem = Some(identity);
            conn.token = None;
            conn.basic = None;
        }
        if let Some(ca) = &self.ca_cert {
            conn.tls.ca_pem = None;
            conn.tls.ca_path = Some(ca.clone());
            conn.ca_path = Some(ca.clone());
        }
        if !self.validate_certs {
            conn.tls.validate_certs = false;
        }
        Ok(conn)
    }
}

/// A kubeconfig with one cluster, one token user and one context (what `auto-import-secret` and tests use).
pub fn render_token_kubeconfig(
    server: &str,
    ca_pem: Option<&[u8]>,
    insecure: bool,
    token: &str,
    name: &str,
) -> String {
    let mut cluster = serde_json::json!({"server": server});
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    if insecure {
        cluster["insecure-skip-tls-verify"] = true.into();
    }
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "preferences": {},
    });
    serde_yaml_ng::to_string(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KC: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: sno
  cluster:
    server: https://api.sno.example.com:6443/
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmFiYwotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==
- name: lab
  cluster:
    server: https://lab:6443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
- name: dev
  user:
    token: sha256~abc
contexts:
- name: admin
  context: {cluster: sno, user: admin}
- name: dev
  context: {cluster: lab, user: dev, namespace: x}
current-context: admin
preferences: {}
"#;

    #[test]
    fn current_context_with_client_cert() {
        let c = Kubeconfig::parse(KC)
            .unwrap()
            .connection(None, None)
            .unwrap();
        assert_eq!(c.server, "https://api.sno.example.com:6443");
        assert!(c.tls.validate_certs);
        assert!(String::from_utf8(c.tls.ca_pem.unwrap())
            .unwrap()
            .contains("BEGIN CERTIFICATE"));
        assert_eq!(c.tls.identity_pem.unwrap(), b"cert\nkey");
        assert!(c.token.is_none());
        assert_eq!(c.user_name.as_deref(), Some("admin"));
    }

    #[test]
    fn named_context_with_token_and_insecure() {
        let c = Kubeconfig::parse(KC)
            .unwrap()
            .connection(Some("dev"), None)
            .unwrap();
        assert_eq!(c.server, "https://lab:6443");
        assert!(!c.tls.validate_certs);
        assert_eq!(c.token.as_deref(), Some("sha256~abc"));
        assert!(!format!("{c:?}").contains("abc"));
    }

    #[test]
    fn unknown_context_lists_known_ones() {
        let e = Kubeconfig::parse(KC)
            .unwrap()
            .connection(Some("nope"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"nope\"") && e.contains("admin, dev"), "{e}");
    }

    #[test]
    fn file_references_are_relative_to_the_kubeconfig() {
        let dir = std::env::temp_dir().join(format!("kc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), "CA").unwrap();
        std::fs::write(dir.join("tok"), "t0k\n").unwrap();
        let text = "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: ca.crt}}]\nusers: [{name: u, user: {token-file: tok}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        std::fs::write(dir.join("config"), text).unwrap();
        let p = ConnectionParams {
            kubeconfig: Some(dir.join("config").display().to_string()),
            validate_certs: true,
            ..Default::default()
        };
        let c = p.resolve().unwrap();
        assert_eq!(c.tls.ca_pem.as_deref(), Some(&b"CA"[..]));
        assert_eq!(c.ca_path, Some(dir.join("ca.crt")));
        assert_eq!(c.token.as_deref(), Some("t0k"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// kubernetes.core's `client_cert`/`client_key`: the identity in place of the kubeconfig's user.
    #[test]
    fn client_certificate_options_replace_the_identity() {
        let dir = std::env::temp_dir().join(format!("kc-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("c.pem"), "CERT").unwrap();
        std::fs::write(dir.join("k.pem"), "KEY\n").unwrap();
        let p = ConnectionParams {
            kubeconfig: Some(KC.into()),
            client_cert: Some(dir.join("c.pem")),
            client_key: Some(dir.join("k.pem")),
            validate_certs: true,
            ..Default::default()
        };
        let c = p.resolve().unwrap();
        assert_eq!(c.tls.identity_pem.as_deref(), Some(&b"CERT\nKEY\n"[..]));
        assert!(c.token.is_none() && c.basic.is_none());
        let half = ConnectionParams {
            client_key: None,
            ..p.clone()
        };
        assert!(matches!(
            half.resolve(),
            Err(KubeconfigError::HalfClientOption("client_cert"))
        ));
        let missing = ConnectionParams {
            client_key: Some(dir.join("absent.pem")),
            ..p
        };
        assert!(matches!(
            missing.resolve(),
            Err(KubeconfigError::ReadReferenced {
                what: "client_key",
                ..
            })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn explicit_options_override_the_kubeconfig() {
        let p = ConnectionParams {
            kubeconfig: Some(KC.into()),
            api_key: Some("tok".into()),
            host: Some("https://other:6443".into()),
            ca_cert: Some("/tmp/ca.pem".into()),
            validate_certs: false,
            ..Default::default()
        };
        let c = p.resolve().unwrap();
        assert_eq!(c.server, "https://other:6443");
        assert_eq!(c.token.as_deref(), Some("tok"));
        assert!(c.tls.identity_pem.is_none() && c.tls.ca_pem.is_none());
        assert_eq!(c.tls.ca_path.as_deref(), Some(Path::new("/tmp/ca.pem")));
        assert!(!c.tls.validate_certs);
    }

    #[test]
    fn host_only_and_missing_host() {
        let c = ConnectionParams {
            host: Some("https://h:6443/".into()),
            validate_certs: true,
            ..Default::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(c.server, "https://h:6443");
        assert!(ConnectionParams::default()
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("API URL"));
        let e = ConnectionParams {
            host: Some("h:6443".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(e.contains("https://"), "{e}");
    }

    #[test]
    fn exec_plugins_and_half_identities_are_refused() {
        let k = "clusters: [{name: c, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {exec: {command: x}}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n";
        assert!(Kubeconfig::parse(k)
            .unwrap()
            .connection(None, None)
            .unwrap_err()
            .to_string()
            .contains("exec"));
        let k = "clusters: [{name: c, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {client-certificate-data: Y2VydA==}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n";
        assert!(Kubeconfig::parse(k)
            .unwrap()
            .connection(None, None)
            .unwrap_err()
            .to_string()
            .contains("without a key"));
    }

    #[test]
    fn rendered_kubeconfig_round_trips() {
        let text = render_token_kubeconfig("https://h:6443", Some(b"PEM"), false, "tok", "spoke");
        let c = Kubeconfig::parse(&text)
            .unwrap()
            .connection(None, None)
            .unwrap();
        assert_eq!(c.server, "https://h:6443");
        assert_eq!(c.token.as_deref(), Some("tok"));
        assert_eq!(c.tls.ca_pem.as_deref(), Some(&b"PEM"[..]));
    }
}
