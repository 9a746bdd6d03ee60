//! Which cluster is behind a ManagedCluster's name, and whether the "spoke" is the hub itself.
//!
//! A name can outlive its cluster: `force_install` (or any rebuild) puts a new cluster, with a new
//! `ClusterVersion` `spec.clusterID`, behind the old name. The hub still holds the old ManagedCluster,
//! Joined, and would ignore a new auto-import-secret; noticing the new ID is what makes the re-import work.

use kube_client::connect::{cluster_id, same_server};
use kube_client::Client;
use serde_json::Value;

use crate::error::ImportError;

/// The ClusterClaim the klusterlet reports with the OpenShift cluster ID.
pub const ID_CLAIM: &str = "id.openshift.io";
/// The cluster ID this module recorded on the ManagedCluster when it imported it (the claim only
/// appears once the klusterlet has joined).
pub const RECORDED_ID_ANNOTATION: &str = "proxshift.io/cluster-id";

/// The cluster ID the hub associates with a ManagedCluster: the klusterlet's claim, else our record.
pub fn known_id(mc: &Value) -> Option<String> {
    let claim = mc
        .pointer("/status/clusterClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(ID_CLAIM))
        .and_then(|c| c.get("value").and_then(Value::as_str));
    let recorded = mc
        .pointer(&format!(
            "/metadata/annotations/{}",
            RECORDED_ID_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str);
    claim
        .or(recorded)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// The hub's ManagedCluster stands for another cluster than the spoke we were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replaced {
    pub was: String,
    pub now: String,
}

pub fn replaced(existing: Option<&Value>, spoke_id: Option<&str>) -> Option<Replaced> {
    let was = known_id(existing?)?;
    let now = spoke_id?;
    (was != now).then(|| Replaced {
        was,
        now: now.to_string(),
    })
}

/// Refuse to import the hub into itself: the same API URL, or the same cluster ID. The hub's own ID
/// is read only when the spoke's is known (a non-OpenShift hub or a user without access to
/// ClusterVersion simply has none).
pub fn refuse_self_import(
    hub: &Client,
    spoke_server: &str,
    spoke_id: Option<&str>,
) -> Result<(), ImportError> {
    if same_server(hub.server(), spoke_server) {
        return Err(ImportError::SelfImport {
            reason: format!("the spoke's API URL {spoke_server} is the hub's"),
        });
    }
    let Some(spoke_id) = spoke_id else {
        return Ok(());
    };
    if let Ok(Some(hub_id)) = cluster_id(hub) {
        if hub_id == spoke_id {
            return Err(ImportError::SelfImport {
                reason: format!(
                    "the spoke at {spoke_server} has the hub's cluster ID {hub_id} (another URL of the same cluster)"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_claim_wins_over_the_record() {
        let mc = json!({"metadata": {"annotations": {RECORDED_ID_ANNOTATION: "rec"}},
            "status": {"clusterClaims": [{"name": "id.k8s.io", "value": "x"}, {"name": ID_CLAIM, "value": "claim"}]}});
        assert_eq!(known_id(&mc).as_deref(), Some("claim"));
        let mc = json!({"metadata": {"annotations": {RECORDED_ID_ANNOTATION: "rec"}}});
        assert_eq!(known_id(&mc).as_deref(), Some("rec"));
        assert_eq!(known_id(&json!({"metadata": {}})), None);
    }

    #[test]
    fn replaced_needs_both_ids_and_a_difference() {
        let mc = json!({"metadata": {"annotations": {RECORDED_ID_ANNOTATION: "old"}}});
        assert_eq!(
            replaced(Some(&mc), Some("new")),
            Some(Replaced {
                was: "old".into(),
                now: "new".into()
            })
        );
        assert_eq!(replaced(Some(&mc), Some("old")), None);
        assert_eq!(replaced(Some(&mc), None), None);
        assert_eq!(replaced(None, Some("new")), None);
        assert_eq!(replaced(Some(&json!({})), Some("new")), None);
    }
}
