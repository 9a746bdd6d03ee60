//! Errors with messages a user can act on: the API's own `Status.message` plus what the code means.

use std::fmt;

#[derive(Debug, Clone)]
pub enum KubeError {
    /// The server answered with an error status.
    Api {
        status: u16,
        /// `Status.reason` (`NotFound`, `AlreadyExists`, `Conflict`, `Forbidden`, …) when given.
        reason: Option<String>,
        /// `Status.message`, or the start of the body when it is not a Status.
        message: String,
        method: String,
        path: String,
    },
    /// No answer: connection, TLS or timeout problems.
    Transport(String),
    /// The answer could not be understood, or the settings are wrong.
    Other(String),
}

impl KubeError {
    pub fn status(&self) -> Option<u16> {
        match self {
            KubeError::Api { status, .. } => Some(*status),
            _ => None,
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

impl fmt::Display for KubeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeError::Api {
                status,
                message,
                method,
                path,
                ..
            } => {
                write!(f, "{method} {path}: HTTP {status} {}", meaning(*status))?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            KubeError::Transport(m) | KubeError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for KubeError {}

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
