//! `state: absent`: delete the ManagedCluster and wait until it is gone, then the cluster namespace.

use std::time::Instant;

use ansible_module::Module;
use kube_client::objects::known;
use kube_client::{Client, Resource};
use serde_json::json;

use crate::error::ImportError;
use crate::{Opts, Report};

/// Delete (or, for a namespace the hub removes itself, wait for) each hub object in turn.
pub fn detach(
    m: &mut Module,
    o: &Opts,
    hub: &Client,
    report: &mut Report,
) -> Result<(), ImportError> {
    let name = o.cluster_name.as_str();
    let steps: Vec<(Resource, bool)> = vec![
        (known::managed_clusters(), true),
        (known::namespaces(), o.delete_namespace),
    ];
    // One deadline for both waits.
    let start = Instant::now();
    for (res, delete) in steps {
        let Some(obj) = hub.get(&res, None, name)? else {
            continue;
        };
        let terminating = obj.pointer("/metadata/deletionTimestamp").is_some();
        if delete && !terminating {
            m.add_diff(
                json!({"kind": res.kind, "name": name, "state": "present"}),
                json!({"kind": res.kind, "name": name, "state": "absent"}),
                &format!("hub: {}", res.describe(None, name)),
                "",
            );
            report.changed = true;
            report.actions.push(
                json!({"side": "hub", "object": res.describe(None, name), "action": "deleted"}),
            );
            if !m.check_mode {
                hub.delete(&res, None, name)?;
            }
        } else if !delete && !terminating {
            // The hub removes the namespace itself once the cluster is gone; wait only if it is on its way.
            continue;
        }
        if !m.check_mode {
            let left = o.timeout().saturating_sub(start.elapsed());
            hub.wait_deleted(&res, None, name, left, o.interval())
                .map_err(ImportError::from_wait)?;
        }
    }
    Ok(())
}
