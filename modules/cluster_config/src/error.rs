//! What can go wrong, each naming the option or object it is about. Decisions are made on the
//! variants and on `KubeError`'s predicates, never on the text.

use kube_client::{DocumentError, KubeError};

/// What is wrong with one entry of `objects` / `definition`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectProblem {
    #[error("is not a mapping")]
    NotAnObject,
    #[error("has no {0}")]
    Missing(&'static str),
    #[error("{0} must be a non-empty string")]
    NotAString(&'static str),
}

/// What is wrong with one entry of `wait`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitProblem {
    #[error("needs either type (a condition) or path (a value), not both and not neither")]
    TypeOrPath,
    #[error("value needs path")]
    ValueWithoutPath,
    #[error("status needs type")]
    StatusWithoutType,
    #[error("names kind {0} (and name), which no object of this task has")]
    NoSuchObject(String),
    #[error("is not a mapping of type/status/path/value/kind/name: {0}")]
    NotAnEntry(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin} {problem}")]
    BadObject {
        /// `objects[2]` or `definition document 1`.
        origin: String,
        problem: ObjectProblem,
    },
    #[error("definition: {0}")]
    Definition(#[from] DocumentError),
    #[error("objects and definition are both empty: nothing to do (give objects or definition)")]
    Nothing,
    #[error("definition must be a YAML text, a mapping or a list of mappings, not {0}")]
    DefinitionType(&'static str),
    #[error("cannot read src {}: {source}", path.display())]
    Src {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("wait must be a boolean (kubernetes.core's wait, with wait_condition) or a list of checks, not {0}")]
    WaitType(&'static str),
    #[error("wait[{index}] {problem}")]
    BadWait { index: usize, problem: WaitProblem },
    #[error("wait applies to state=present and state=read is not allowed with it (state={0})")]
    WaitWithState(String),
    #[error("{what} must be {rule}")]
    BadNumber {
        what: &'static str,
        rule: &'static str,
    },
    /// The API server refused or failed a call about one object.
    #[error("{object}: {source}{}", hint(source))]
    Kube {
        /// `objects[0] (v1 Secret ns/name)`.
        object: String,
        #[source]
        source: Box<KubeError>,
    },
    #[error("timed out after {waited}s waiting for {pending}")]
    WaitTimeout { waited: u64, pending: String },
    /// The run lost the cluster's lease while waiting (kube_client::STOP_FILE_ENV).
    #[error("stopped after {waited}s: {reason}")]
    WaitStopped { waited: u64, reason: String },
    #[error("{0}")]
    Connect(#[source] Box<kube_client::ConnectError>),
}

impl ConfigError {
    /// The API server answered 409 Conflict: the object changed since it was read (a stale
    /// `metadata.resourceVersion`), or other field managers own the fields.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ConfigError::Kube { source, .. } if source.is_conflict())
    }
}

/// What the user can do about an API answer, when we know.
fn hint(e: &KubeError) -> &'static str {
    if e.is_conflict() {
        " (other field managers own these fields: set force_conflicts: true to take them over)"
    } else if e.is_not_served() {
        " (check apiVersion and kind)"
    } else {
        ""
    }
}
