//! Why one VM could not be brought to its desired state. The texts are the module's `msg`; the
//! Proxmox errors stay attached as causes, so callers decide with `pve_client::Error`'s predicates.

use std::path::PathBuf;

use pve_client::Error as PveError;
use pve_types::PlacementError;

#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// The options, or a VM's state, break a rule of this module; nothing was changed for it.
    #[error("{0}")]
    Refused(String),
    /// The VM options do not deserialise.
    #[error("invalid VM options: {0}")]
    Options(#[source] serde_json::Error),
    /// A disk or NIC of the spec cannot be turned into create parameters.
    #[error(transparent)]
    Spec(#[from] pve_types::SpecError),
    /// No node can take the VM.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// A Proxmox call failed and its own error says all there is.
    #[error(transparent)]
    Pve(Box<PveError>),
    /// A Proxmox call failed while `doing` something; `note` says what that left behind.
    #[error("{doing}: {source}{note}")]
    Step {
        doing: String,
        #[source]
        source: Box<PveError>,
        note: String,
    },
    #[error("waiting for {vm} to stop: {source}")]
    StopWait {
        vm: String,
        #[source]
        source: Box<proxshift_http::WaitError<PveError>>,
    },
    #[error("agent_iso.src {}: {source}", path.display())]
    IsoSource {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A new clone could not be configured; `cleanup` says whether it was removed.
    #[error("configuring the clone {vmid}: {source}{cleanup}")]
    CloneConfig {
        vmid: u32,
        #[source]
        source: Box<VmError>,
        cleanup: String,
    },
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl VmError {
    /// A failed Proxmox call with what it was doing and no note.
    pub fn step(doing: impl Into<String>, source: PveError) -> Self {
        VmError::Step {
            doing: doing.into(),
            source: Box::new(source),
            note: String::new(),
        }
    }

    pub fn refused(msg: impl Into<String>) -> Self {
        VmError::Refused(msg.into())
    }

    /// Changes Proxmox takes only from a root@pam password session (`ConfigDiff::root_only`),
    /// refused before anything is written.
    pub fn root_only(vm: &str, changes: &[String]) -> Self {
        VmError::Refused(format!(
            "{vm}: {}: Proxmox lets only root@pam logged in with its password make this change \
             (API tokens are refused, root's own too): connect with api_user root@pam and \
             api_password, or use a resource mapping (mapping=NAME) for the device",
            changes.join("; ")
        ))
    }
}

// Boxed: a Proxmox error is large, and every function here returns `Result<_, VmError>`.
impl From<PveError> for VmError {
    fn from(e: PveError) -> Self {
        VmError::Pve(Box::new(e))
    }
}

/// A run-wide lock was poisoned by a panicking worker.
pub(crate) const POISONED: VmError = VmError::Internal("lock poisoned");
