//! Errors of the Proxmox API, mapped from both error-body generations into one type.
//!
//! PVE reports most failures as HTTP 500 with the `die` text in the reason phrase (all versions) and in
//! `message` (libpve-http-server-perl ≥ 5.2.0); parameter errors come as 400 with a per-field `errors`
//! map. "Not found" is a 500 too, so callers ask [`Error::is_not_found`] instead of looking at statuses.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// An error answer from the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorResponse {
    pub method: String,
    /// API path without `/api2/json`, e.g. `/nodes/pve1/qemu/101/config`.
    pub path: String,
    pub status: u16,
    /// The server's text: `message` from the body, else the reason phrase. Perl's ` at FILE line N.`
    /// suffix is removed.
    pub message: String,
    /// Per-parameter errors of a 400 (`{"errors": {"net0": "invalid format - ..."}}`).
    pub errors: BTreeMap<String, String>,
}

/// A task that ended with anything but `OK` / `WARNINGS: n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    pub upid: String,
    pub node: String,
    /// Task type (`qmcreate`, `qmclone`, …).
    pub kind: String,
    /// The task's `exitstatus`, e.g. `unable to create VM 101 - unsupported format 'qcow2'`.
    pub exitstatus: String,
    /// The last lines of the task log.
    pub log_tail: Vec<String>,
}

impl TaskError {
    /// A `qmstart` that found the VM running: PVE's `vm_start` dies with `VM <vmid> already
    /// running` inside the task (the API call itself returns a UPID), so only the task says so.
    pub fn is_already_running(&self) -> bool {
        is_already_running_text(&self.exitstatus)
    }
}

/// `VM 101 already running` (PVE::QemuServer::vm_start), nothing else.
fn is_already_running_text(text: &str) -> bool {
    let Some(rest) = text.trim().strip_prefix("VM ") else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && rest[digits..] == *" already running"
}

/// Everything that can go wrong talking to Proxmox.
#[derive(Debug, Clone)]
pub enum Error {
    Api(ErrorResponse),
    /// HTTP 595/596: the node that should handle the request could not be reached by the proxy node.
    NodeUnreachable {
        node: String,
        status: u16,
        detail: String,
    },
    /// The request did not get an HTTP answer (DNS, refused, TLS, timeout).
    Transport {
        method: String,
        path: String,
        detail: String,
        /// Safe to retry: the request cannot have reached the server (or was a GET).
        transient: bool,
        /// The server's TLS certificate was refused: the message names `ca_path` and `validate_certs`.
        certificate: bool,
    },
    Task(TaskError),
    /// A wait ran out of time.
    Timeout {
        what: String,
        waited: Duration,
        pending: String,
        log_tail: Vec<String>,
    },
    /// Bad settings or an answer we could not understand.
    Invalid(String),
}

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api(a) => Some(a.status),
            Error::NodeUnreachable { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's text (API message, or the task's exit status).
    pub fn server_text(&self) -> &str {
        match self {
            Error::Api(a) => &a.message,
            Error::Task(t) => &t.exitstatus,
            _ => "",
        }
    }

    /// A worker task that ran and failed (the API call itself was accepted).
    pub fn is_task_failure(&self) -> bool {
        matches!(self, Error::Task(_))
    }

    /// A missing VM, storage, volume or file (PVE says so with a 500 and one of these texts).
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Api(a) => {
                a.status == 404
                    || (a.status == 500
                        && [
                            "does not exist",
                            "no such resource",
                            "No such file or directory",
                        ]
                        .iter()
                        .any(|t| a.message.contains(t)))
            }
            _ => false,
        }
    }

    /// A start request for a VM that is already running (see [`TaskError::is_already_running`]);
    /// older or proxied setups may report it as the API call's own 500.
    pub fn is_already_running(&self) -> bool {
        match self {
            Error::Task(t) => t.is_already_running(),
            Error::Api(a) => a.status == 500 && is_already_running_text(&a.message),
            _ => false,
        }
    }

    pub fn is_already_exists(&self) -> bool {
        self.server_text().contains("already exists")
            || matches!(self, Error::Api(a) if a.errors.values().any(|v| v.contains("already exists")))
    }

    /// File or storage lock contention (`can't lock file '…' - got timeout`): nothing happened, retry.
    pub fn is_lock_timeout(&self) -> bool {
        let t = self.server_text();
        t.contains("can't lock file") || t.contains("got timeout") && t.contains("lock")
    }

    /// The VM carries a config lock (`VM is locked (clone)`); returns the lock name.
    pub fn locked(&self) -> Option<&str> {
        let t = self.server_text();
        let rest = &t[t.find("VM is locked (")? + "VM is locked (".len()..];
        rest.split(')').next()
    }

    /// The config changed under us (`digest` check failed): re-read and try again. The one
    /// place that knows PVE's wordings: qemu-server's config update and resize say "checksum
    /// mismatch (file change by other user?)" — "checksum missmatch" before qemu-server 8.2.5
    /// (PVE 8.2.7 and older) — and `PVE::Tools::assert_if_modified` (move disk, …) says
    /// "detected modified configuration - file changed by other user? Try again.".
    pub fn is_digest_mismatch(&self) -> bool {
        let t = self.server_text();
        (t.contains("checksum mismatch") || t.contains("checksum missmatch"))
            && t.contains("file change")
            || t.contains("detected modified configuration")
    }

    /// 502, 503 or 504: what a reverse proxy in front of PVE (or pveproxy for a node it could
    /// not reach in time) answers when it has no answer from upstream. Whether the request took
    /// effect is unknown: a GET may simply be sent again; a create or clone may not (see
    /// [`Client::post_once`](crate::Client::post_once)).
    pub fn is_gateway_error(&self) -> bool {
        matches!(self, Error::Api(a) if matches!(a.status, 502..=504))
    }

    pub fn is_unauthorized(&self) -> bool {
        matches!(self, Error::Api(a) if a.status == 401)
    }

    /// Worth another try with backoff: lock contention, the server said "not now", or the request
    /// never reached the server.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Api(a) => {
                proxshift_http::is_transient_status(a.status)
                    || (a.status == 500 && self.is_lock_timeout())
            }
            Error::Transport { transient, .. } => *transient,
            _ => false,
        }
    }
}

/// Perl appends ` at /usr/share/perl5/PVE/….pm line 102.` to texts without a trailing newline.
pub(crate) fn clean_message(text: &str) -> String {
    let t = text.trim();
    let t = match t.find(" at /usr/share/perl5/") {
        Some(i) => &t[..i],
        None => t,
    };
    t.trim().to_string()
}

/// Build an [`Error`] from an error response: status, reason phrase and the body, whichever
/// generation it is. `node` is the node named in the path, for 595. Public for the fuzz target
/// (`fuzz/fuzz_targets/parsers.rs`): whatever a server or a proxy in between sends is read here.
pub fn from_response(method: &str, path: &str, status: u16, reason: &str, body: &str) -> Error {
    let json: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let body_msg = json.get("message").and_then(Value::as_str).unwrap_or("");
    let mut message = clean_message(if body_msg.trim().is_empty() {
        reason
    } else {
        body_msg
    });
    if message.is_empty() {
        // Neither generation gave text (a proxy in between?); keep a little of the raw body.
        message = body
            .chars()
            .take(200)
            .collect::<String>()
            .trim()
            .to_string();
    }
    if status == 595 || status == 596 {
        return Error::NodeUnreachable {
            node: node_in_path(path).unwrap_or("?").to_string(),
            status,
            detail: message,
        };
    }
    let errors = json
        .get("errors")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = v
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string());
                    (k.clone(), clean_message(&text))
                })
                .collect()
        })
        .unwrap_or_default();
    Error::Api(ErrorResponse {
        method: method.to_string(),
        path: path.to_string(),
        status,
        message,
        errors,
    })
}

/// `/nodes/{node}/…` → `node`.
pub(crate) fn node_in_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/nodes/")?;
    rest.split('/').next().filter(|s| !s.is_empty())
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(a) => {
                write!(
                    f,
                    "{} {}: HTTP {} {}",
                    a.method, a.path, a.status, a.message
                )?;
                if !a.errors.is_empty() {
                    let fields: Vec<String> =
                        a.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    write!(f, " ({})", fields.join("; "))?;
                }
                Ok(())
            }
            Error::NodeUnreachable {
                node,
                status,
                detail,
            } => write!(
                f,
                "Proxmox node '{node}' is offline or unreachable (HTTP {status} {detail})"
            ),
            Error::Transport {
                method,
                path,
                detail,
                certificate,
                ..
            } => {
                write!(
                    f,
                    "{method} {path}: no answer from the Proxmox API: {detail}"
                )?;
                if *certificate {
                    write!(f, "; the API's TLS certificate is not trusted: give its CA with ca_path (PROXMOX_CA_PATH), \
                        or set validate_certs: false (PROXMOX_VALIDATE_CERTS=false) for a host you trust")?;
                }
                Ok(())
            }
            Error::Task(t) => {
                write!(
                    f,
                    "task {} ({} on node {}) failed: {}",
                    t.upid, t.kind, t.node, t.exitstatus
                )?;
                if !t.log_tail.is_empty() {
                    write!(f, "; task log tail: {}", t.log_tail.join(" | "))?;
                }
                Ok(())
            }
            Error::Timeout {
                what,
                waited,
                pending,
                log_tail,
            } => {
                write!(
                    f,
                    "timed out after {}s waiting for {what}; still waiting for: {pending}",
                    waited.as_secs()
                )?;
                if !log_tail.is_empty() {
                    write!(f, "; last task log lines: {}", log_tail.join(" | "))?;
                }
                Ok(())
            }
            Error::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn already_running_is_pves_start_verdict_only() {
        let task = |exitstatus: &str| TaskError {
            upid: "UPID:pve1:1:2:3:qmstart:101:root@pam:".into(),
            node: "pve1".into(),
            kind: "qmstart".into(),
            exitstatus: exitstatus.into(),
            log_tail: vec![],
        };
        assert!(task("VM 101 already running").is_already_running());
        assert!(Error::Task(task("VM 7 already running\n")).is_already_running());
        assert!(!task("start failed: QEMU exited with code 1").is_already_running());
        assert!(!task("VM 101 not running").is_already_running());
        assert!(!task("already running").is_already_running());
        let api = |status, message: &str| {
            Error::Api(ErrorResponse {
                method: "POST".into(),
                path: "/nodes/pve1/qemu/101/status/start".into(),
                status,
                message: message.into(),
                errors: BTreeMap::new(),
            })
        };
        assert!(api(500, "VM 101 already running").is_already_running());
        assert!(!api(400, "VM 101 already running").is_already_running());
    }

    #[test]
    fn new_generation_body_wins_and_perl_suffix_goes() {
        let e = from_response(
            "POST",
            "/nodes/pve1/qemu",
            500,
            "Internal Server Error",
            r#"{"data":null,"message":"unsupported format 'qcow2' at /usr/share/perl5/PVE/Storage/LvmThinPlugin.pm line 102.\n"}"#,
        );
        assert_eq!(e.server_text(), "unsupported format 'qcow2'");
        assert_eq!(e.status(), Some(500));
    }

    #[test]
    fn old_generation_uses_reason_phrase() {
        let e = from_response(
            "GET",
            "/nodes/node1/qemu/123/config",
            500,
            "Configuration file 'nodes/node1/qemu-server/123.conf' does not exist",
            r#"{"data":null}"#,
        );
        assert!(e.is_not_found());
        assert!(e.to_string().contains("123.conf' does not exist"), "{e}");
        let other = from_response("GET", "/x", 500, "VM 101 not running", "{}");
        assert!(!other.is_not_found());
    }

    #[test]
    fn parameter_errors_list_every_field() {
        let e = from_response(
            "POST",
            "/nodes/pve1/qemu",
            400,
            "Parameter verification failed.",
            r#"{"data":null,"errors":{"net0":"invalid format - value does not look like a valid unicast MAC address\n","memory":"type check ('integer') failed - got 'x'"}}"#,
        );
        let text = e.to_string();
        assert!(
            text.contains("HTTP 400 Parameter verification failed."),
            "{text}"
        );
        assert!(
            text.contains("memory: type check ('integer') failed - got 'x'"),
            "{text}"
        );
        assert!(
            text.contains(
                "net0: invalid format - value does not look like a valid unicast MAC address"
            ),
            "{text}"
        );
    }

    #[test]
    fn unreachable_node_is_named_not_missing_vm() {
        let e = from_response(
            "GET",
            "/nodes/pve3/qemu/101/status/current",
            595,
            "Errors during connection establishment, proxy handshake: No route to host",
            "",
        );
        assert!(!e.is_not_found());
        let t = e.to_string();
        assert!(t.contains("node 'pve3' is offline or unreachable"), "{t}");
        assert!(t.contains("No route to host"), "{t}");
    }

    #[test]
    fn classification() {
        let lock = from_response(
            "POST",
            "/nodes/pve1/qemu/101/config",
            500,
            "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout",
            "{}",
        );
        assert!(lock.is_lock_timeout() && lock.is_transient());
        let locked = from_response("POST", "/x", 500, "VM is locked (clone)", "{}");
        assert_eq!(locked.locked(), Some("clone"));
        assert!(!locked.is_transient());
        let digest = from_response(
            "PUT",
            "/x",
            500,
            "checksum mismatch (file change by other user?)",
            "{}",
        );
        assert!(digest.is_digest_mismatch());
        // qemu-server before 8.2.5 (PVE 8.2.7 and older) spelled it with two s.
        let old_digest = from_response(
            "PUT",
            "/x",
            500,
            "checksum missmatch (file change by other user?)",
            "{}",
        );
        assert!(old_digest.is_digest_mismatch());
        let modified = from_response(
            "POST",
            "/x",
            500,
            "detected modified configuration - file changed by other user? Try again.",
            "{}",
        );
        assert!(modified.is_digest_mismatch());
        // An upload's checksum failure is no config race.
        let upload = from_response(
            "POST",
            "/x",
            500,
            "checksum mismatch: got 'ab' != expect 'cd'",
            "{}",
        );
        assert!(!upload.is_digest_mismatch());
        let busy = from_response("GET", "/x", 503, "Service Unavailable", "");
        assert!(busy.is_transient() && busy.is_gateway_error());
        let page = "<html><head><title>504 Gateway Time-out</title></head></html>";
        let lost = from_response("POST", "/nodes/pve1/qemu", 504, "Gateway Time-out", page);
        assert!(lost.is_gateway_error() && lost.to_string().contains("Gateway Time-out"));
        assert!(!from_response("GET", "/x", 500, "boom", "").is_gateway_error());
        let exists = from_response(
            "GET",
            "/cluster/nextid",
            400,
            "Parameter verification failed.",
            r#"{"errors":{"vmid":"VM 101 already exists"}}"#,
        );
        assert!(exists.is_already_exists());
        let denied = from_response(
            "GET",
            "/x",
            403,
            "Permission check failed (/vms/101, VM.Config.Disk)",
            "",
        );
        assert!(!denied.is_transient() && !denied.is_not_found());
    }
}
