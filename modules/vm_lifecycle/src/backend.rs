//! The Proxmox calls the engine needs, and how their failures are sorted. Implemented over
//! `pve_client` in [`crate::pve`], by the scripted [`crate::fake`] in unit tests.

use std::time::Duration;

use crate::model::{Inventory, Observed, Op};

/// A failed [`Backend`] call, sorted by what the module does about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    /// The VM's node did not answer (HTTP 595/596 from the proxying node).
    #[error("{0}")]
    Unreachable(String),
    /// A task ended in error; `exitstatus` is its verdict, `log_tail` its last log lines.
    #[error("task failed: {exitstatus}")]
    Task {
        exitstatus: String,
        log_tail: Vec<String>,
    },
    /// A start found the VM running already (someone else started it): a task failure the engine
    /// treats as success for `start`, and reports like any other task failure elsewhere.
    #[error("task failed: {exitstatus}")]
    AlreadyRunning {
        exitstatus: String,
        log_tail: Vec<String>,
    },
    /// The guest agent cannot answer (yet): not running, not configured, VM not running.
    #[error("{0}")]
    Agent(String),
    /// Any other failed Proxmox call, kept whole (boxed: the client's error is large).
    #[error(transparent)]
    Pve(Box<pve_client::Error>),
    /// The engine's own finding, e.g. a VM that vanished while it waited.
    #[error("{0}")]
    Other(String),
}

/// The Proxmox calls the engine needs. Implemented over `pve_client` for real, by fakes in tests.
pub trait Backend: Sync {
    /// Every VM in the cluster (`/cluster/resources?type=vm`).
    fn inventory(&self) -> Result<Vec<Inventory>, BackendError>;
    fn status(&self, node: &str, vmid: u32) -> Result<Observed, BackendError>;
    /// Send one power request and wait (at most `timeout`) for its task to finish successfully.
    fn power(&self, node: &str, vmid: u32, op: &Op, timeout: Duration) -> Result<(), BackendError>;
    /// Wait until the VM's config lock is gone.
    fn wait_unlocked(&self, node: &str, vmid: u32, timeout: Duration) -> Result<(), BackendError>;
    /// Every address the guest agent reports, any family or scope.
    fn guest_ips(&self, node: &str, vmid: u32) -> Result<Vec<String>, BackendError>;
}
