//! Errors with messages a user can act on: the API's own `Status.message` plus what the code means.

use crate::oauth::OAuthRedirectError;
use proxshift_http::{describe, reqwest, BuildError};

/// Why a call to the API server did not give the answer asked for. Callers decide by variant or by
/// [`KubeError::status`], never by the text.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The server answered with an error status.
    #[error("{}", api_text(*.status, .message, .method, .path))]
    Api {
        status: u16,
        /// `Status.reason` (`NotFound`, `AlreadyExists`, `Conflict`, `Forbidden`, …) when given.
        reason: Option<String>,
        /// `Status.message`, or the start of the body when it is not a Status.
        message: String,
        method: String,
        path: String,
    },
    /// No answer: connection, TLS or timeout problems. reqwest's own text hides the reason, so the
    /// message carries the whole chain.
    #[error("{request}: {}", describe(.source))]
    Transport {
        /// `METHOD URL`, or what was being done.
        request: String,
        #[source]
        source: reqwest::Error,
    },
    /// The HTTP client could not be set up from the connection's TLS settings.
    #[error(transparent)]
    Setup(#[from] BuildError),
    /// A caller asked for an HTTP method that does not exist.
    #[error("bad HTTP method {0}")]
    BadMethod(String),
    /// A 2xx answer that is not the JSON asked for.
    #[error("{request}: the answer is not JSON: {source}")]
    NotJson {
        request: String,
        #[source]
        source: serde_json::Error,
    },
    /// API discovery does not list this kind (its CRD is not installed, or not yet served).
    #[error("{}", not_served_text(.api_version, .kind, *.group_version_served))]
    NotServed {
        api_version: String,
        kind: String,
        /// The group/version is served, only the kind is missing from it.
        group_version_served: bool,
    },
    /// An object handed to the client lacks its `metadata.name`.
    #[error("a {kind} without metadata.name")]
    Unnamed { kind: String },
    /// Logging in through the OpenShift OAuth server failed.
    #[error(transparent)]
    Login(#[from] LoginError),
    /// What was being done when the cause happened (the object, the step).
    #[error("{what}: {source}")]
    Context {
        what: String,
        #[source]
        source: Box<KubeError>,
    },
}

/// Why a password login through the OpenShift OAuth server failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// 404 (or 403 for anonymous on plain Kubernetes) on the discovery document.
    #[error("{source} (the server offers no OpenShift OAuth login; use api_key or kubeconfig)")]
    NoOAuth {
        #[source]
        source: Box<KubeError>,
    },
    #[error("the OAuth discovery document is not JSON: {0}")]
    DiscoveryNotJson(#[source] serde_json::Error),
    /// The authorize endpoint (on the `*.apps` ingress, not the API) gave no answer; a TLS failure
    /// here usually means the ingress CA is not trusted.
    #[error("cannot reach the OAuth server at {authorize}: {} (it runs on the *.apps ingress with the ingress certificate: trust its CA with ingress_ca, or a CA bundle that holds it)", describe(.source))]
    OAuthServer {
        authorize: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the OAuth discovery document has no authorization_endpoint")]
    NoAuthorizeEndpoint,
    #[error("the OAuth server at {authorize} answered HTTP {status} without a Basic challenge; password login is not possible there (is an identity provider with challenge login configured?)")]
    NoBasicChallenge { authorize: String, status: u16 },
    #[error(
        "login as {username:?} failed: wrong username or password (HTTP 401 from the OAuth server)"
    )]
    WrongPassword { username: String },
    #[error("the OAuth server redirected without a Location")]
    NoLocation,
    #[error(transparent)]
    Redirect(#[from] OAuthRedirectError),
}

fn api_text(status: u16, message: &str, method: &str, path: &str) -> String {
    let mut s = format!("{method} {path}: HTTP {status} {}", meaning(status));
    if !message.is_empty() {
        s.push_str(": ");
        s.push_str(message);
    }
    s
}

fn not_served_text(api_version: &str, kind: &str, group_version_served: bool) -> String {
    if group_version_served {
        format!("the API server serves {api_version} but has no kind {kind}")
    } else {
        format!("the API server does not serve {api_version} (kind {kind}); is its CRD installed?")
    }
}

impl KubeError {
    /// The HTTP status of the server's answer, looking through any [`KubeError::Context`].
    pub fn status(&self) -> Option<u16> {
        match self.innermost() {
            KubeError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
    /// The cause under any [`KubeError::Context`] wrapping.
    pub fn innermost(&self) -> &KubeError {
        match self {
            KubeError::Context { source, .. } => source.innermost(),
            e => e,
        }
    }
    /// No answer came (connection refused, TLS, timeout): waiting or retrying may cure it.
    pub fn is_transport(&self) -> bool {
        matches!(self.innermost(), KubeError::Transport { .. })
    }
    /// Discovery does not (yet) list the kind.
    pub fn is_not_served(&self) -> bool {
        matches!(self.innermost(), KubeError::NotServed { .. })
    }
    /// Wrap with what was being done; an API answer already names its method and path.
    pub fn context(self, what: impl Into<String>) -> KubeError {
        match self {
            api @ KubeError::Api { .. } => api,
            e => KubeError::Context {
                what: what.into(),
                source: Box::new(e),
            },
        }
    }
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// Build from an error response body (a `Status` object, or anything else).
    pub fn from_response(method: &str, path: &str, status: u16, body: &[u8]) -> Self {
        let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        let (reason, message) = match parsed
            .as_ref()
            .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"))
        {
            Some(s) => (
                s.get("reason").and_then(|r| r.as_str()).map(str::to_string),
                s.get("message")
                    .and_then(|m| m.as_str())
                    .unwrap_or_default()
                    .to_string(),
            ),
            None => {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                (None, text.chars().take(300).collect())
            }
        };
        KubeError::Api {
            status,
            reason,
            message,
            method: method.into(),
            path: path.into(),
        }
    }
}

/// What a status code means for the person running the playbook.
fn meaning(status: u16) -> &'static str {
    match status {
        400 => "bad request",
        401 => "unauthorized: the credentials were rejected (wrong or expired token, or no credentials)",
        403 => "forbidden: the user lacks the RBAC permission for this",
        404 => "not found",
        405 => "method not allowed",
        409 => "conflict",
        410 => "gone (the list or watch expired)",
        415 => "unsupported media type (the server may be too old for this kind of patch)",
        422 => "invalid: the server rejected the object",
        429 => "too many requests",
        500..=599 => "server error",
        _ => "unexpected answer",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_message_is_kept_and_explained() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"secrets is forbidden: User \"viewer\" cannot list resource \"secrets\"","reason":"Forbidden","code":403}"#;
        let e = KubeError::from_response("GET", "/api/v1/secrets", 403, body);
        let s = e.to_string();
        assert!(
            s.starts_with("GET /api/v1/secrets: HTTP 403 forbidden"),
            "{s}"
        );
        assert!(s.contains("User \"viewer\" cannot list"), "{s}");
        assert!(matches!(e, KubeError::Api { reason: Some(ref r), .. } if r == "Forbidden"));
    }

    #[test]
    fn non_status_bodies_are_shortened() {
        let body = "x".repeat(1000);
        let e = KubeError::from_response("GET", "/", 502, body.as_bytes());
        assert!(e.to_string().len() < 400);
        assert!(KubeError::from_response("GET", "/", 401, b"")
            .to_string()
            .contains("credentials were rejected"));
        assert!(KubeError::from_response("PUT", "/", 409, b"").is_conflict());
        assert!(KubeError::from_response("GET", "/", 422, b"")
            .to_string()
            .contains("invalid"));
    }
}
