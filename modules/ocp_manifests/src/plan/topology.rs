//! Roles, control-plane and compute counts, the topology (SNO, compact, HA) and the platform.

use crate::model::Topology;

use super::context::{Ctx, Findings, Staged};

pub(super) struct Topo {
    /// Each node's role, given or derived from its position.
    pub roles: Vec<String>,
    pub masters: usize,
    pub workers: usize,
    pub topology: Topology,
    /// `baremetal`, `none` or `external`.
    pub platform: &'static str,
}

impl Default for Topo {
    fn default() -> Self {
        Topo {
            roles: Vec::new(),
            masters: 0,
            workers: 0,
            topology: Topology::Sno,
            platform: "none",
        }
    }
}

pub(super) fn check(cx: &Ctx) -> Staged<Topo> {
    let mut f = Findings::default();
    let roles = roles(cx);
    let masters = roles.iter().filter(|r| *r == "master").count();
    let workers = roles.len() - masters;
    let topology = topology(&mut f, cx, masters, workers);
    let platform = match (cx.o.platform.as_str(), topology) {
        ("auto", Topology::Sno) | ("none", _) => "none",
        ("external", _) => "external",
        ("baremetal", Topology::Sno) => {
            f.err(
                "platform",
                "sno-platform-none",
                "only platform none and external support 1 control-plane node and 0 workers",
            );
            "baremetal"
        }
        _ => "baremetal",
    };
    external(&mut f, cx, platform);
    f.with(Topo {
        roles,
        masters,
        workers,
        topology,
        platform,
    })
}

/// Platform `external` (openshift/installer pkg/types/external): `platformName` is free text
/// (informational); the agent's `validatePlatformsByName` (pkg/asset/agent/installconfig.go)
/// requires `cloudControllerManager: External` for platform name `oci`.
fn external(f: &mut Findings, cx: &Ctx, platform: &str) {
    let Some(ext) = &cx.o.external else { return };
    if platform != "external" {
        f.warn(format!("external is ignored with platform {platform}"));
    } else if ext.platform_name == "oci"
        && ext.cloud_controller_manager.as_deref() != Some("External")
    {
        f.err(
            "external.cloud_controller_manager",
            "external-oci-ccm",
            "when using external oci platform, platform.external.cloudControllerManager must be set to External",
        );
    }
}

/// Explicit roles win; the first unroled nodes become masters until there are 1 (fewer than 3
/// nodes) or 3.
fn roles(cx: &Ctx) -> Vec<String> {
    let nodes = &cx.o.nodes;
    let explicit_masters = nodes
        .iter()
        .filter(|n| n.role.as_deref() == Some("master"))
        .count();
    let want_masters = if nodes.len() < 3 {
        nodes.len().min(1)
    } else {
        3
    }
    .max(explicit_masters);
    let mut assigned = explicit_masters;
    nodes
        .iter()
        .map(|n| match n.role.as_deref() {
            Some(r) => r.to_string(),
            None if assigned < want_masters => {
                assigned += 1;
                "master".into()
            }
            None => "worker".into(),
        })
        .collect()
}

fn topology(f: &mut Findings, cx: &Ctx, masters: usize, workers: usize) -> Topology {
    let max_masters = if cx.minor >= 18 { 5 } else { 3 };
    match masters {
        0 => {
            if !cx.o.nodes.is_empty() {
                f.err("nodes", "control-plane-replicas", "no node has role master");
            }
            Topology::Sno
        }
        1 => {
            if workers > 0 {
                f.err("nodes", "sno-no-workers",
                      format!("a single control-plane node cannot be installed with workers ({workers} given); add workers after installation"));
            }
            Topology::Sno
        }
        2 => {
            f.err("nodes", "control-plane-replicas",
                  "2 control-plane nodes need the arbiter or two-node-fencing features, which this module does not render; use 1 or 3");
            Topology::Compact
        }
        m if m > max_masters => {
            let allowed = if cx.minor >= 18 {
                "1, 3, 4 or 5"
            } else {
                "1 or 3 (4 and 5 need OpenShift 4.18+)"
            };
            f.err(
                "nodes",
                "control-plane-replicas",
                format!(
                    "{m} control-plane nodes; OpenShift {} allows {allowed}",
                    cx.o.version
                ),
            );
            Topology::Ha
        }
        _ if workers == 0 => Topology::Compact,
        _ => {
            if workers == 1 {
                f.warn("1 worker: ingress runs 2 router replicas, so use 0 workers (compact) or at least 2 (HA)");
            }
            Topology::Ha
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::model::Topology;
    use crate::plan::fixtures::*;
    use crate::plan::plan;

    #[test]
    fn topologies_are_derived() {
        let p = ok_plan(&sno());
        assert_eq!(
            (
                p.topology,
                p.platform.as_str(),
                p.control_plane_replicas,
                p.compute_replicas
            ),
            (Topology::Sno, "none", 1, 0)
        );
        assert!(p.api_vips.is_empty());
        let p = ok_plan(&compact());
        assert_eq!(
            (
                p.topology,
                p.platform.as_str(),
                p.control_plane_replicas,
                p.compute_replicas
            ),
            (Topology::Compact, "baremetal", 3, 0)
        );
        let p = ok_plan(&ha());
        assert_eq!(
            (p.topology, p.control_plane_replicas, p.compute_replicas),
            (Topology::Ha, 3, 2)
        );
        assert_eq!(p.rendezvous_ip, "192.168.50.10");
        assert_eq!(p.hosts[3].role, "worker");
        assert_eq!(p.hosts[0].mac, "bc:24:11:00:00:01");
        // Explicit roles win over position.
        let v = set(
            set(ha(), "/nodes/0/role", json!("worker")),
            "/nodes/3/role",
            json!("master"),
        );
        let p = ok_plan(&v);
        assert_eq!(
            p.hosts.iter().map(|h| h.role.as_str()).collect::<Vec<_>>(),
            ["worker", "master", "master", "master", "worker"]
        );
        assert_eq!(p.rendezvous_ip, "192.168.50.11");
    }

    #[test]
    fn five_masters_on_418_only() {
        let mut v = ha();
        for i in 0..5 {
            v["nodes"][i]["role"] = json!("master");
        }
        fails(v.clone(), "nodes", "control-plane-replicas");
        let p = ok_plan(&with(v, "version", json!("4.18.3")));
        assert_eq!(
            (p.topology, p.control_plane_replicas),
            (Topology::Compact, 5)
        );
    }

    /// Platform external: SNO and multi-node alike (validateSNOConfiguration allows 1 control-plane
    /// node and 0 workers on none and external), no VIPs, `platformName` and
    /// `cloudControllerManager` rendered as given.
    #[test]
    fn platform_external() {
        let p = ok_plan(&with(sno(), "platform", json!("external")));
        assert_eq!(
            (p.topology, p.platform.as_str()),
            (Topology::Sno, "external")
        );
        assert_eq!(p.external.as_ref().unwrap().platform_name, "Unknown");
        let v = with(
            with(compact(), "platform", json!("external")),
            "external",
            json!({"platform_name": "oci", "cloud_controller_manager": "External"}),
        );
        let planned = plan(&options(&v));
        let p = planned.plan.unwrap();
        assert!(p.api_vips.is_empty() && p.load_balancer.is_none());
        assert!(planned
            .warnings
            .iter()
            .any(|w| w.contains("ignored with platform external")));
        let (ic, _) = crate::render::render(&p, None).unwrap();
        assert!(
            ic.contains("  external:\n    platformName: \"oci\"\n    cloudControllerManager: \"External\"\n"),
            "{ic}"
        );
        // validatePlatformsByName: oci needs its cloud controller manager.
        fails(
            set(v, "/external/cloud_controller_manager", json!("")),
            "external.cloud_controller_manager",
            "external-oci-ccm",
        );
        let on_none = with(sno(), "external", json!({"platform_name": "x"}));
        let planned = plan(&options(&on_none));
        assert!(planned.plan.unwrap().external.is_none());
        assert!(planned
            .warnings
            .iter()
            .any(|w| w == "external is ignored with platform none"));
    }

    #[test]
    fn rule_sno_and_replicas() {
        fails(
            with(sno(), "platform", json!("baremetal")),
            "platform",
            "sno-platform-none",
        );
        let v = set(ha(), "/nodes/0/role", json!("master"));
        let mut one_master = v.clone();
        for i in 1..5 {
            one_master["nodes"][i]["role"] = json!("worker");
        }
        fails(one_master, "nodes", "sno-no-workers");
        let mut two = compact();
        two["nodes"].as_array_mut().unwrap().pop();
        two["nodes"][0]["role"] = json!("master");
        two["nodes"][1]["role"] = json!("master");
        fails(two, "nodes", "control-plane-replicas");
        let mut none = compact();
        for i in 0..3 {
            none["nodes"][i]["role"] = json!("worker");
        }
        fails(none, "nodes", "control-plane-replicas");
    }
}
