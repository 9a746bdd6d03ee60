//! Check mode on a cluster that does not have yet what an earlier step or an operator brings.
//!
//! A real run installs an operator (whose CRDs then serve new kinds) or applies the manifest that
//! creates a namespace, and only then applies the objects of those kinds or in that namespace. Check
//! mode stores nothing, so the kind is not served and the namespace does not exist when those objects
//! come: the server cannot dry-run them. Instead of failing, check mode predicts them as creations and
//! says why they were not validated — but only when the caller names what brings the kind or namespace
//! (`installed_by`), so that a mistyped kind still fails check mode as it fails a real run.
//!
//! One place for this rule: `cluster_config` (objects of a kind an operator installs) and `acm_import`
//! (the hub's `import.yaml`, whose kinds `crds.yaml` installs) both decide through [`Client::resolve_pending`].

use crate::client::Client;
use crate::error::KubeError;
use crate::objects::{known, Resource};

/// Why an object is predicted in check mode instead of dry-run by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotYet {
    /// Discovery does not list the kind: `installed_by` brings its CRD.
    Kind { installed_by: String },
    /// The namespace does not exist: `created_by` makes it.
    Namespace {
        namespace: String,
        created_by: String,
    },
}

impl NotYet {
    /// Why the object was not validated, for a result's note: `kind not served yet: installed by X`.
    pub fn reason(&self) -> String {
        match self {
            NotYet::Kind { installed_by } => {
                format!("kind not served yet: installed by {installed_by}")
            }
            NotYet::Namespace {
                namespace,
                created_by,
            } => format!("namespace {namespace} not there yet: created by {created_by}"),
        }
    }

    /// What a real run would do: `would create (kind not served yet: installed by X)`.
    pub fn prediction(&self) -> String {
        format!("would create ({})", self.reason())
    }
}

/// A kind as check mode may use it: served, or not yet (with why).
#[derive(Debug, Clone)]
pub enum Resolved {
    Served(Resource),
    NotYet(NotYet),
}

impl Client {
    /// [`Client::resolve`], except that in check mode a kind discovery does not list is
    /// [`Resolved::NotYet`] when `installed_by` names what installs it. Outside check mode, or
    /// without `installed_by`, a kind that is not served stays an error.
    pub fn resolve_pending(
        &self,
        api_version: &str,
        kind: &str,
        check_mode: bool,
        installed_by: Option<&str>,
    ) -> Result<Resolved, KubeError> {
        match self.resolve(api_version, kind) {
            Ok(r) => Ok(Resolved::Served(r)),
            Err(e) if e.is_not_served() => match pending_by(check_mode, installed_by) {
                Some(by) => Ok(Resolved::NotYet(NotYet::Kind {
                    installed_by: by.to_string(),
                })),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// In check mode with `created_by` given: [`NotYet::Namespace`] when `namespace` does not exist.
    /// `None` otherwise (it exists, or nothing is said to make it).
    pub fn namespace_pending(
        &self,
        namespace: Option<&str>,
        check_mode: bool,
        created_by: Option<&str>,
    ) -> Result<Option<NotYet>, KubeError> {
        let (Some(ns), Some(by)) = (namespace, pending_by(check_mode, created_by)) else {
            return Ok(None);
        };
        Ok(self
            .get(&known::namespaces(), None, ns)?
            .is_none()
            .then(|| NotYet::Namespace {
                namespace: ns.to_string(),
                created_by: by.to_string(),
            }))
    }
}

/// What brings the missing kind or namespace, when the rule applies (check mode, and named).
fn pending_by(check_mode: bool, by: Option<&str>) -> Option<&str> {
    by.map(str::trim).filter(|b| check_mode && !b.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_name_what_brings_it() {
        let k = NotYet::Kind {
            installed_by: "the OpenShift GitOps operator".into(),
        };
        assert_eq!(
            k.prediction(),
            "would create (kind not served yet: installed by the OpenShift GitOps operator)"
        );
        let n = NotYet::Namespace {
            namespace: "openshift-gitops".into(),
            created_by: "the OpenShift GitOps operator".into(),
        };
        assert_eq!(
            n.prediction(),
            "would create (namespace openshift-gitops not there yet: created by the OpenShift GitOps operator)"
        );
    }

    #[test]
    fn only_check_mode_with_a_name_predicts() {
        assert_eq!(pending_by(true, Some("ESO")), Some("ESO"));
        assert_eq!(pending_by(false, Some("ESO")), None);
        assert_eq!(pending_by(true, None), None);
        assert_eq!(pending_by(true, Some("  ")), None);
    }
}
