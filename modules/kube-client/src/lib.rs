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
pub use proxshift_http::{wait_for, Backoff, Poll, Tls, WaitError};
