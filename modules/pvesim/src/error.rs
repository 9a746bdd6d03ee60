//! `ErrorReply`: the HTTP error response a handler answers with (status, PVE's `die` text,
//! per-parameter errors) — not a Rust error of the simulator itself; those are the
//! `thiserror` enums next to the code that fails (`SeedError`, `FaultError`, …).

use std::collections::BTreeMap;
use std::time::Instant;

/// An error answer as pve-http-server renders it.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorReply {
    pub status: u16,
    /// The `die` text; its first line becomes the HTTP reason phrase.
    pub message: String,
    /// Per-field parameter errors (HTTP 400).
    pub errors: Option<BTreeMap<String, String>>,
    /// Set when the request waits for a config file lock: retry until then.
    pub busy_until: Option<Instant>,
}

impl ErrorReply {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ErrorReply {
            status,
            message: message.into(),
            errors: None,
            busy_until: None,
        }
    }
    /// A handler `die` (HTTP 500).
    pub fn die(message: impl Into<String>) -> Self {
        Self::new(500, message)
    }
    pub fn params(errors: BTreeMap<String, String>) -> Self {
        ErrorReply {
            status: 400,
            message: "Parameter verification failed.".into(),
            errors: Some(errors),
            busy_until: None,
        }
    }
    pub fn param(key: &str, msg: impl Into<String>) -> Self {
        let mut m = BTreeMap::new();
        m.insert(key.to_string(), msg.into());
        Self::params(m)
    }
    pub fn perm(what: impl Into<String>) -> Self {
        Self::new(403, format!("Permission check failed ({})", what.into()))
    }
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(501, message)
    }
}

pub type ReplyResult<T> = Result<T, ErrorReply>;

/// Exact texts shared by several handlers.
pub fn no_such_vm(node: &str, vmid: u32) -> ErrorReply {
    ErrorReply::die(format!(
        "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
    ))
}

pub fn locked(lock: &str) -> String {
    format!("VM is locked ({lock})")
}

pub fn flock_timeout(vmid: u32) -> String {
    format!("can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
}
