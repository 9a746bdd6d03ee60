//! A small blocking client for HashiCorp Vault and OpenBao: the auth methods a platform team uses,
//! KV v1 and v2 (engine version detected per mount), check-and-set writes, soft delete and destroy.
//!
//! HTTP, TLS and retry/backoff come from `proxshift-http`; this crate only knows Vault's API: paths,
//! the `{"errors": [...]}` envelope, which statuses are transient (412, 429, 5xx, sealed) and how a
//! sealed server answers. Nothing here prints or logs a token or a secret value.
//!
//! Why not `vaultrs` (measured, release profile): a bare vaultrs 0.8 program doing KV v1/v2 reads and
//! writes plus AppRole and userpass logins on a current-thread tokio runtime is already 2.90 MB, and it
//! brings reqwest 0.13 with aws-lc-sys (a C build) next to the workspace's reqwest 0.12; the whole
//! `hashicorp_vault` module on this crate is 2.24 MB. vaultrs' `kv2::read` also drops the version that
//! check-and-set needs, and it does not read `VAULT_NAMESPACE`.

mod admin;
mod auth;
mod kv;
#[cfg(feature = "module-options")]
pub mod module_options;
pub mod read;
#[cfg(feature = "test-support")]
pub mod testserver;

use std::fmt;
use std::time::Duration;

use proxshift_http::reqwest::blocking::Client;
use proxshift_http::reqwest::{Method, StatusCode, Url};
use proxshift_http::ClientOptions;
pub use proxshift_http::{Backoff, Tls};
use serde_json::Value;

pub use auth::{read_token_file, token_file_location, Auth, Login, DEFAULT_TOKEN_FILE};
pub use kv::{KvVersion, Mount, Secret};

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// `https://vault.example.com:8200` (no `/v1`).
    pub url: String,
    /// Vault Enterprise / OpenBao namespace, sent as `X-Vault-Namespace` on every request.
    pub namespace: Option<String>,
    pub tls: Tls,
    pub timeout: Duration,
    /// Retries of transient failures (412, 429, 5xx, sealed, connection refused, timeouts).
    pub backoff: Backoff,
}

impl Config {
    pub fn new(url: impl Into<String>) -> Self {
        Config {
            url: url.into(),
            namespace: None,
            tls: Tls::verified(),
            timeout: Duration::from_secs(30),
            backoff: Backoff::default(),
        }
    }
}

/// Everything that can go wrong talking to Vault. `op` is `"GET secret/data/app"`-style: method and
/// API path, never a value.
#[derive(Debug, Clone)]
pub enum Error {
    /// A setting is unusable (bad URL, unreadable CA file or token file).
    Config(String),
    /// The request did not get an HTTP answer.
    Transport {
        op: String,
        detail: String,
        transient: bool,
    },
    /// Vault answered with an error status.
    Api {
        op: String,
        status: u16,
        errors: Vec<String>,
    },
    /// Vault answered 503 "Vault is sealed".
    Sealed { op: String },
    /// The answer was not the JSON Vault documents.
    Decode { op: String, detail: String },
    /// The API path has a segment no Vault path may have; nothing was sent.
    Path(PathError),
}

/// Why an API path is refused before any request: a `.` or `..` segment would be resolved by the
/// URL (`openshift/clusters/../../sys/policies/acl/root` is `sys/policies/acl/root`), an empty one
/// names another path than the one meant (`clusters//x`, a template whose value was empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("Vault path {path:?} has an empty segment (two '/' in a row, or an empty name)")]
    EmptySegment { path: String },
    #[error("Vault path {path:?} has a {segment:?} segment, which would address another path")]
    DotSegment { path: String, segment: String },
    /// A URL reads `\` as `/` and drops tabs and line breaks (WHATWG URL parsing), so `a\..\b` or
    /// `.<TAB>.` would become a dot segment after the check.
    #[error(
        "Vault path {path:?} has the character {character:?} (a backslash or a control character), which a \
         URL would turn into another path"
    )]
    BadCharacter { path: String, character: char },
    /// The request URL's path is not the path asked for (the last check, whatever the URL parser did).
    #[error(
        "Vault path {path:?} would be requested as {url_path:?}, another path; nothing was sent"
    )]
    Rewritten { path: String, url_path: String },
}

impl From<PathError> for Error {
    fn from(e: PathError) -> Self {
        Error::Path(e)
    }
}

/// Every segment of an API path must name something: not empty, not `.` or `..`. Pure; run on
/// every request path, whatever built it.
pub fn check_path(path: &str) -> Result<(), PathError> {
    if let Some(character) = path.chars().find(|c| *c == '\\' || c.is_control()) {
        return Err(PathError::BadCharacter {
            path: path.to_string(),
            character,
        });
    }
    for segment in path.split('/') {
        match segment {
            "" => {
                return Err(PathError::EmptySegment {
                    path: path.to_string(),
                })
            }
            "." | ".." => {
                return Err(PathError::DotSegment {
                    path: path.to_string(),
                    segment: segment.to_string(),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

impl Error {
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            Error::Sealed { .. } => Some(503),
            _ => None,
        }
    }

    pub fn is_permission_denied(&self) -> bool {
        self.status() == Some(403)
    }

    /// KV v2 rejected the write because `options.cas` did not match the current version.
    pub fn is_cas_mismatch(&self) -> bool {
        matches!(self, Error::Api { status: 400, errors, .. } if errors.iter().any(|e| e.contains("check-and-set")))
    }

    /// Worth another try after a pause: Enterprise eventual consistency (412), rate limits and
    /// standby nodes (429), server errors and a sealed server (5xx), and requests that never arrived.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport { transient, .. } => *transient,
            Error::Sealed { .. } => true,
            Error::Api { status, errors, .. } => {
                *status == 412
                    || *status == 429
                    || *status >= 500
                    || (*status == 400 && is_kv_upgrading(errors))
            }
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) => write!(f, "{m}"),
            Error::Transport { op, detail, .. } => write!(f, "{op}: cannot reach Vault: {detail}"),
            Error::Sealed { op } => {
                write!(f, "{op}: Vault is sealed (HTTP 503); unseal it (`vault operator unseal` / `bao operator unseal`) and retry")
            }
            Error::Api { op, status, errors } => {
                let detail = errors
                    .iter()
                    .map(|e| e.trim().replace("\n\t", " "))
                    .collect::<Vec<_>>()
                    .join("; ");
                let hint = match *status {
                    403 => {
                        " (the token is invalid or expired, or its policies do not allow this path)"
                    }
                    404 if detail.is_empty() => " (no secret at this path)",
                    429 => " (rate limited, or the node is a standby)",
                    503 => " (the server is in standby or maintenance)",
                    _ => "",
                };
                if detail.is_empty() {
                    write!(f, "{op}: Vault answered HTTP {status}{hint}")
                } else {
                    write!(f, "{op}: Vault answered HTTP {status}: {detail}{hint}")
                }
            }
            Error::Decode { op, detail } => {
                write!(f, "{op}: unexpected answer from Vault: {detail}")
            }
            Error::Path(e) => write!(f, "{e}; nothing was sent"),
        }
    }
}

impl std::error::Error for Error {}

/// A connection to one Vault server, optionally logged in.
pub struct Vault {
    http: Client,
    /// `<url>/v1/`
    base: Url,
    namespace: Option<String>,
    token: Option<String>,
    backoff: Backoff,
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token.
        f.debug_struct("Vault")
            .field("base", &self.base.as_str())
            .field("namespace", &self.namespace)
            .finish()
    }
}

/// Whether `url` sends tokens and secrets in clear text over a network: `http://` to a host other than
/// the loopback (`localhost`, 127.0.0.0/8, `::1`). Pure; an unparsable URL is left to [`Vault::new`].
pub fn cleartext_to_remote(url: &str) -> bool {
    let Ok(u) = Url::parse(url.trim()) else {
        return false;
    };
    if u.scheme() != "http" {
        return false;
    }
    let host = u.host_str().unwrap_or_default();
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

/// Escape the characters that would end a URL path early; `/` stays a separator.
pub(crate) fn escape_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3F"),
            '#' => out.push_str("%23"),
            ' ' => out.push_str("%20"),
            c => out.push(c),
        }
    }
    out
}

/// `/a/b/` → `a/b`: the slashes around a path are a way of writing it, not part of it. Inside, the
/// path is kept as given, so [`check_path`] refuses an empty, `.` or `..` segment when it is used.
pub fn clean_path(p: &str) -> String {
    p.trim_matches('/').to_string()
}

/// The request URL of `path` (written `escaped` in the URL) under `base`: refused unless the URL's path is
/// exactly `base`'s followed by `escaped` — whatever the URL parser resolved or dropped.
fn request_url(base: &Url, path: &str, escaped: &str) -> Result<Url, Error> {
    let url = base
        .join(escaped)
        .map_err(|e| Error::Config(format!("{path:?}: cannot build the request URL: {e}")))?;
    if url.path() != format!("{}{escaped}", base.path()) {
        return Err(PathError::Rewritten {
            path: path.to_string(),
            url_path: url.path().to_string(),
        }
        .into());
    }
    Ok(url)
}

impl Vault {
    pub fn new(cfg: &Config) -> Result<Self, Error> {
        let url = cfg.url.trim();
        let mut base = Url::parse(url)
            .map_err(|e| Error::Config(format!("url {url:?} is not a valid URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(Error::Config(format!(
                "url {url:?} must be http(s)://HOST[:PORT]"
            )));
        }
        let prefix = base.path().trim_end_matches('/').to_string();
        base.set_path(&format!("{prefix}/v1/"));
        let opts = ClientOptions {
            tls: cfg.tls.clone(),
            timeout: cfg.timeout,
            ..Default::default()
        };
        let http = proxshift_http::client(&opts).map_err(|e| Error::Config(e.to_string()))?;
        let namespace = cfg
            .namespace
            .as_deref()
            .map(clean_path)
            .filter(|n| !n.is_empty());
        Ok(Vault {
            http,
            base,
            namespace,
            token: None,
            backoff: cfg.backoff.clone(),
        })
    }

    pub fn set_token(&mut self, token: impl Into<String>) {
        self.token = Some(token.into());
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// One API call with retries of transient failures. Returns the status and the JSON body (`Null`
    /// for an empty body) for every answer that is not transient — including 4xx, which the callers
    /// interpret (a 404 read is "missing", not a failure).
    pub(crate) fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), Error> {
        self.call_query(method, path, &[], body)
    }

    /// [`Vault::call`] with query parameters (kept apart so a `?` in a secret path stays part of it).
    pub(crate) fn call_query(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<(u16, Value), Error> {
        let op = format!("{method} {path}");
        check_path(path)?;
        let mut url = request_url(&self.base, path, &escape_path(path))?;
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        self.backoff.retry(
            |_| self.once(&op, method.clone(), url.clone(), body),
            Error::is_transient,
        )
    }

    fn once(
        &self,
        op: &str,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(u16, Value), Error> {
        let mut req = self.http.request(method, url);
        if let Some(t) = &self.token {
            req = req.header("X-Vault-Token", t);
        }
        if let Some(ns) = &self.namespace {
            req = req.header("X-Vault-Namespace", ns);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .map_err(|e| transport_error(op.to_string(), &e))?;
        let status = resp.status();
        let text = resp.text().map_err(|e| Error::Transport {
            op: op.to_string(),
            detail: proxshift_http::describe(&e),
            transient: true,
        })?;
        let json = if text.trim().is_empty() {
            Value::Null
        } else {
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => v,
                // A proxy's HTML error page: report the status, not the page.
                Err(_) if !status.is_success() => Value::Null,
                Err(e) => {
                    return Err(Error::Decode {
                        op: op.to_string(),
                        detail: format!("body is not JSON: {e}"),
                    })
                }
            }
        };
        let errors = strings(&json["errors"]);
        if status == StatusCode::SERVICE_UNAVAILABLE && errors.iter().any(|e| e.contains("sealed"))
        {
            return Err(Error::Sealed { op: op.to_string() });
        }
        let code = status.as_u16();
        let err = Error::Api {
            op: op.to_string(),
            status: code,
            errors,
        };
        if err.is_transient() {
            return Err(err);
        }
        Ok((code, json))
    }

    /// Like [`Vault::call`], but every status ≥ 400 is an error.
    pub(crate) fn call_ok(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        let (status, json) = self.call(method.clone(), path, body)?;
        if status >= 400 {
            return Err(api_error(&method, path, status, &json));
        }
        Ok(json)
    }

    /// Any API path, for what has no helper here (mounts, policies, auth roles): the JSON answer
    /// (`Null` for 204). Every status >= 400 is an error.
    pub fn read(&self, path: &str) -> Result<Value, Error> {
        self.call_ok(Method::GET, path, None)
    }

    /// `POST` `body` to any API path.
    pub fn write(&self, path: &str, body: &Value) -> Result<Value, Error> {
        self.call_ok(Method::POST, path, Some(body))
    }

    /// `DELETE` any API path.
    pub fn delete(&self, path: &str) -> Result<Value, Error> {
        self.call_ok(Method::DELETE, path, None)
    }

    /// `GET auth/token/lookup-self`: proves the token works; returns its `data` (policies, ttl, …).
    pub fn lookup_self(&self) -> Result<Value, Error> {
        let v = self.call_ok(Method::GET, "auth/token/lookup-self", None)?;
        Ok(v["data"].clone())
    }

    /// `GET sys/health` without retries turning "sealed" into a failure: the raw status code
    /// (200 active, 429 standby, 501 not initialised, 503 sealed) and body.
    pub fn health(&self) -> Result<(u16, Value), Error> {
        let url = self
            .base
            .join("sys/health")
            .map_err(|e| Error::Config(e.to_string()))?;
        let op = "GET sys/health";
        let resp = self
            .http
            .get(url)
            .send()
            .map_err(|e| transport_error(op.into(), &e))?;
        let code = resp.status().as_u16();
        let body = resp.json::<Value>().unwrap_or(Value::Null);
        Ok((code, body))
    }
}

/// A KV v2 mount upgrading its storage (just mounted, or converted from v1) answers 400 for a
/// moment: "Upgrading from non-versioned to versioned data. This backend will be unavailable for a
/// brief period and will resume service shortly."
fn is_kv_upgrading(errors: &[String]) -> bool {
    errors
        .iter()
        .any(|e| e.contains("Upgrading from non-versioned to versioned data"))
}

/// The strings of a JSON list (`errors`, `policies`); anything else is empty.
pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn api_error(method: &Method, path: &str, status: u16, json: &Value) -> Error {
    let errors = strings(&json["errors"]);
    Error::Api {
        op: format!("{method} {path}"),
        status,
        errors,
    }
}

/// A request that got no HTTP answer. A certificate the client refused is never worth a retry, and its
/// message names the options that fix it, as community.hashi_vault's do.
fn transport_error(op: String, e: &proxshift_http::reqwest::Error) -> Error {
    let mut detail = proxshift_http::describe(e);
    let certificate = proxshift_http::is_certificate_error(e);
    if certificate {
        detail.push_str(
            "; Vault's TLS certificate is not trusted: give its CA with ca_cert (ANSIBLE_HASHI_VAULT_CA_CERT, \
             VAULT_CACERT), or set validate_certs: false for a server you trust",
        );
    }
    Error::Transport {
        op,
        detail,
        transient: !certificate && proxshift_http::is_transient_transport(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        let v = Vault::new(&Config::new("https://vault.example.com:8200/")).unwrap();
        assert_eq!(v.base.as_str(), "https://vault.example.com:8200/v1/");
        let v = Vault::new(&Config::new("https://example.com/vault")).unwrap();
        assert_eq!(
            v.base.join("secret/data/a").unwrap().as_str(),
            "https://example.com/vault/v1/secret/data/a"
        );
        assert!(Vault::new(&Config::new("vault.example.com"))
            .unwrap_err()
            .to_string()
            .contains("not a valid URL"));
        assert!(Vault::new(&Config::new("ftp://x"))
            .unwrap_err()
            .to_string()
            .contains("http(s)"));
        assert_eq!(clean_path("/a/b/"), "a/b");
        assert_eq!(clean_path("/a//b/"), "a//b");
        assert_eq!(escape_path("a b/c?d#e%"), "a%20b/c%3Fd%23e%25");
    }

    #[test]
    fn dot_and_empty_segments_are_refused() {
        assert_eq!(check_path("secret/data/openshift/clusters/lab-sno"), Ok(()));
        assert_eq!(check_path("secret/data/a.b/..c/c.."), Ok(()));
        for (path, segment) in [
            (
                "secret/data/openshift/clusters/../../../../sys/policies/acl/root",
                "..",
            ),
            ("secret/data/./x", "."),
            ("..", ".."),
        ] {
            assert_eq!(
                check_path(path),
                Err(PathError::DotSegment {
                    path: path.into(),
                    segment: segment.into()
                })
            );
        }
        for path in ["secret/data/a//b", "", "secret/data/"] {
            assert_eq!(
                check_path(path),
                Err(PathError::EmptySegment { path: path.into() })
            );
        }
    }

    /// A backslash or a control character would be normalised into a separator, a dot segment or nothing.
    #[test]
    fn backslashes_and_control_characters_are_refused() {
        for (path, character) in [
            ("secret/data/clusters\\..\\..\\sys/policies/acl/root", '\\'),
            ("secret/data/clusters/.\t./.\t./sys/policies/acl/root", '\t'),
            ("secret/data/a\r\n/b", '\r'),
            ("secret/data/a\u{7f}", '\u{7f}'),
        ] {
            assert_eq!(
                check_path(path),
                Err(PathError::BadCharacter {
                    path: path.into(),
                    character
                }),
                "{path:?}"
            );
        }
        // Nothing is sent: the error is the path's, not a transport error.
        let v = Vault::new(&Config::new("http://127.0.0.1:9")).unwrap();
        for path in [
            "secret/data/x/.\t./.\t./sys/policies/acl/root",
            "secret/data/x\\..\\..\\sys",
        ] {
            let e = v.read(path).unwrap_err();
            assert!(
                matches!(e, Error::Path(PathError::BadCharacter { .. })),
                "{e}"
            );
        }
        // Unicode and percent signs are names, sent escaped: the URL path is the one asked for.
        assert_eq!(check_path("secret/data/Zürich/50%25/%2e%2e"), Ok(()));
    }

    #[test]
    fn the_url_path_must_be_the_path_asked_for() {
        let v = Vault::new(&Config::new("http://127.0.0.1:9/vault")).unwrap();
        // `%2e%2e` is a name, sent escaped (the URL parser would read it as `..` otherwise).
        let path = "secret/data/%2e%2e/x";
        let url = request_url(&v.base, path, &escape_path(path)).unwrap();
        assert_eq!(url.path(), "/vault/v1/secret/data/%252e%252e/x");
        // Whatever the parser resolves or drops is refused, whatever let it through.
        for unescaped in [
            "secret/data/%2e%2e/x",
            "secret/data/a\\..\\b",
            "secret/data/.\t./x",
        ] {
            let e = request_url(&v.base, unescaped, unescaped).unwrap_err();
            assert!(
                matches!(e, Error::Path(PathError::Rewritten { .. }))
                    && e.to_string().contains("another path"),
                "{unescaped:?}: {e}"
            );
        }
    }

    /// The refusal comes before any request: no server listens at this address, and the error is
    /// the path's, not a transport error.
    #[test]
    fn a_dot_segment_is_never_sent() {
        let v = Vault::new(&Config::new("http://127.0.0.1:9")).unwrap();
        let e = v
            .read("secret/data/openshift/clusters/../../sys/policies/acl/root")
            .unwrap_err();
        assert!(
            matches!(e, Error::Path(PathError::DotSegment { .. })),
            "{e}"
        );
        let e = v.kv_read(KvVersion::V2, "secret", "openshift/clusters//x", None);
        assert!(matches!(
            e,
            Err(Error::Path(PathError::EmptySegment { .. }))
        ));
    }

    #[test]
    fn cleartext_only_matters_off_the_loopback() {
        for remote in [
            "http://vault.example.com:8200",
            "http://10.0.0.5",
            "http://[fd00::1]:8200",
        ] {
            assert!(cleartext_to_remote(remote), "{remote}");
        }
        for fine in [
            "https://vault.example.com",
            "http://127.0.0.1:8200",
            "http://127.0.0.53",
            "http://localhost:8200",
            "http://[::1]:8200",
            "not a url",
        ] {
            assert!(!cleartext_to_remote(fine), "{fine}");
        }
    }

    #[test]
    fn debug_never_shows_the_token() {
        let mut v = Vault::new(&Config::new("http://127.0.0.1:8200")).unwrap();
        v.set_token("hvs.canary-token");
        assert!(!format!("{v:?}").contains("canary"));
    }

    #[test]
    fn error_classes_and_messages() {
        let cas = Error::Api {
            op: "POST secret/data/a".into(),
            status: 400,
            errors: vec!["check-and-set parameter did not match the current version".into()],
        };
        assert!(cas.is_cas_mismatch() && !cas.is_transient());
        let denied = Error::Api {
            op: "GET secret/data/a".into(),
            status: 403,
            errors: vec!["1 error occurred:\n\t* permission denied\n\n".into()],
        };
        assert!(denied.is_permission_denied() && !denied.is_transient());
        let msg = denied.to_string();
        assert!(
            msg.starts_with(
                "GET secret/data/a: Vault answered HTTP 403: 1 error occurred: * permission denied"
            ),
            "{msg}"
        );
        for s in [412, 429, 500, 502] {
            assert!(
                Error::Api {
                    op: String::new(),
                    status: s,
                    errors: vec![]
                }
                .is_transient(),
                "{s}"
            );
        }
        let upgrading = Error::Api {
            op: String::new(),
            status: 400,
            errors: vec!["Upgrading from non-versioned to versioned data. This backend will be unavailable for a brief period and will resume service shortly.".into()],
        };
        assert!(upgrading.is_transient());
        let sealed = Error::Sealed {
            op: "GET secret/data/a".into(),
        };
        assert!(sealed.is_transient() && sealed.to_string().contains("Vault is sealed"));
        let missing = Error::Api {
            op: "GET kv/a".into(),
            status: 404,
            errors: vec![],
        };
        assert_eq!(
            missing.to_string(),
            "GET kv/a: Vault answered HTTP 404 (no secret at this path)"
        );
    }
}
