//! What can go wrong in an import or a detach, each with its cause kept.

use std::error::Error;
use std::time::Duration;

use kube_client::{ConnectError, KubeError, WaitError};

/// A cause given to us as a boxed error (kubeconfig and YAML parsing report their own types).
pub type Cause = Box<dyn Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A hub or spoke request failed (the message names the method and path).
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("{source} (the hub has no KlusterletAddonConfig CRD: an MCE-only hub? set klusterlet_addon_config: false)")]
    NoAddonCrd { source: KubeError },
    #[error("{source} (set force_conflicts: true to take these fields over)")]
    ApplyConflict { source: KubeError },
    #[error("namespace {0} on the hub is being deleted (a previous detach is still finishing); try again once it is gone")]
    NamespaceTerminating(String),
    #[error("refusing to import the hub into itself: {reason}. Give the kubeconfig (or host and token) of the cluster to import as the spoke, and the hub's as hub_kubeconfig / hub_host")]
    SelfImport { reason: String },
    #[error("timed out after {}s waiting for {pending}", waited.as_secs())]
    Timeout { waited: Duration, pending: String },
    /// The run lost the cluster's lease while waiting (kube_client::STOP_FILE_ENV).
    #[error("stopped after {}s: {reason}", waited.as_secs())]
    Stopped { waited: Duration, reason: String },
    #[error("cannot read spoke_kubeconfig {path}: {source}")]
    ReadSpokeKubeconfig {
        path: String,
        source: std::io::Error,
    },
    #[error("mode=auto needs spoke_kubeconfig, or spoke_host together with spoke_api_key")]
    NoSpokeToken,
    #[error("spoke_kubeconfig: {0}")]
    SpokeKubeconfig(#[source] Cause),
    #[error(transparent)]
    ImportSecret(#[from] crate::resources::ManifestError),
    #[error("{secret} {file}: {source}")]
    ImportManifest {
        secret: String,
        file: &'static str,
        source: Cause,
    },
    #[error("{file}: {kind} {name}: {source}")]
    SpokeKind {
        file: &'static str,
        kind: String,
        name: String,
        source: Box<WaitError<KubeError>>,
    },
    #[error("CRD {crd} on the spoke: {source}")]
    CrdNotEstablished {
        crd: String,
        source: Box<WaitError<KubeError>>,
    },
}

impl ImportError {
    /// A finished wait that failed: a timeout keeps its own wording, a failed probe its error.
    pub fn from_wait(e: WaitError<KubeError>) -> Self {
        match e {
            WaitError::Timeout { waited, pending } => ImportError::Timeout { waited, pending },
            WaitError::Failed(e) => ImportError::Kube(e),
            WaitError::Stopped { waited, reason } => ImportError::Stopped { waited, reason },
        }
    }
}
