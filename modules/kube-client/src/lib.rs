//! ProxShift's small Kubernetes/OpenShift client.
//!
//! Pure parts — [`kubeconfig`] (kubeconfig model and connection settings), [`objects`] (paths,
//! conditions, "already there" checks, merge patches), the parsing half of [`oauth`] — are free of
//! I/O and unit-tested. [`client`] and the login half of [`oauth`] do the requests, through the shared
//! `proxshift_http` layer (TLS options, retry with backoff, waiting).

pub mod client;
pub mod connect;
pub mod ensure;
pub mod error;
pub mod kubeconfig;
pub mod oauth;
pub mod objects;
pub mod pending;
#[cfg(feature = "testenv")]
pub mod testenv;

pub use client::{Client, PatchType};
pub use connect::{connect, ClusterOptions, ConnectError, Connected, HubOptions};
pub use ensure::{Action, Ensured, Method};
pub use error::{KubeError, LoginError};
pub use kubeconfig::{Connection, ConnectionParams, Kubeconfig, KubeconfigError};
pub use oauth::OAuthRedirectError;
pub use objects::{known, Condition, DocumentError, Resource};
pub use pending::{NotYet, Resolved};
pub use proxshift_http::{Backoff, Poll, Tls, WaitError};

/// The environment variable naming a file whose appearance ends every wait on a cluster
/// ([`WaitError::Stopped`]): the playbooks' lease keeper (`playbooks/tasks/lease.yml`) writes it when
/// the run lost the cluster's lease, so a module following an upgrade, a node's join or a rollout stops
/// rather than acting on for a run that no longer holds the cluster. Empty or unset: nothing stops.
pub const STOP_FILE_ENV: &str = "PROXSHIFT_STOP_FILE";

fn stop_file() -> Option<&'static std::path::Path> {
    static FILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| {
        std::env::var_os(STOP_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    })
    .as_deref()
}

/// [`proxshift_http::wait_for`] that ends early once the [`STOP_FILE_ENV`] file exists.
pub fn wait_for<T, E>(
    timeout: std::time::Duration,
    interval: std::time::Duration,
    probe: impl FnMut() -> Result<Poll<T>, E>,
) -> Result<T, WaitError<E>> {
    proxshift_http::wait_for_or_stop(stop_file(), timeout, interval, probe)
}
