//! Roles, control-plane, arbiter and compute counts, the topology (SNO, compact, HA, two nodes with
//! an arbiter) and the platform.

use crate::model::Topology;

use super::context::{Ctx, Findings, Staged};

pub(super) struct Topo {
    /// Each node's role, given or derived from its position.
    pub roles: Vec<String>,
    pub masters: usize,
    /// Nodes with role `arbiter` (install-config `arbiter.replicas`).
    pub arbiters: usize,
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
            arbiters: 0,
            workers: 0,
            topology: Topology::Sno,
            platform: "none",
        }
    }
}

pub(super) fn check(cx: &Ctx) -> Staged<Topo> {
    let mut f = Findings::default();
    let roles = roles(cx);
    let count = |role: &str| roles.iter().filter(|r| *r == role).count();
    let (masters, arbiters) = (count("master"), count("arbiter"));
    let workers = roles.len() - masters - arbiters;
    let topology = if arbiters > 0 {
        arbiter(&mut f, cx, masters)
    } else {
        topology(&mut f, cx, masters, workers)
    };
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
    if topology == Topology::Arbiter && platform != "baremetal" {
        // validateArbiter: `arbiter.platform: Unsupported value: "none": supported values: "baremetal"`.
        f.err("platform", "arbiter-platform",
              format!("an arbiter cluster needs platform baremetal (with API and ingress VIPs), not {platform}"));
    }
    external(&mut f, cx, platform);
    f.with(Topo {
        roles,
        masters,
        arbiters,
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
/// nodes), 2 (a node has role arbiter: two nodes with an arbiter) or 3. An arbiter is only ever
/// given, never derived.
fn roles(cx: &Ctx) -> Vec<String> {
    let nodes = &cx.o.nodes;
    let explicit = |role: &str| {
        nodes
            .iter()
            .filter(|n| n.role.as_deref() == Some(role))
            .count()
    };
    let explicit_masters = explicit("master");
    let want_masters = if explicit("arbiter") > 0 {
        2
    } else if nodes.len() < 3 {
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
                  "2 control-plane nodes need a third node with role arbiter (OpenShift 4.20+) or two-node fencing, which this module does not render; use 1 or 3, or add an arbiter");
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

/// Two nodes with an arbiter, as the installer's `validateArbiter` (pkg/types/validation/installconfig.go)
/// and its feature gate (`HighlyAvailableArbiter`: the `arbiter` pool is new in 4.19, where only
/// `featureSet: TechPreviewNoUpgrade` — or CustomNoUpgrade naming the gate — enables it; enabled by
/// default from 4.20) rule it. Through the agent installer 4.19 cannot have it at all: its
/// `OptionalInstallConfig.validateInstallConfig` refuses every non-Default featureSet (`features`'
/// `agent-feature-set`), so the gate cannot be turned on, and an agent-based arbiter cluster needs
/// 4.20. The agent installer's `validateHostsCount` then needs one host per arbiter replica, which
/// the roles here give by construction.
fn arbiter(f: &mut Findings, cx: &Ctx, masters: usize) -> Topology {
    if cx.minor < 19 {
        f.err("nodes", "arbiter-version",
              format!("role arbiter needs OpenShift 4.20 or later (the install-config has no arbiter pool before 4.19); {} has none", cx.o.version));
    } else if cx.minor == 19 {
        f.err("nodes", "arbiter-version",
              format!("role arbiter needs OpenShift 4.20 or later for an agent-based install: on {} the arbiter pool is behind the HighlyAvailableArbiter feature gate (featureSet TechPreviewNoUpgrade), and the 4.19 agent installer refuses every featureSet but Default", cx.o.version));
    }
    if masters < 2 {
        f.err("nodes", "arbiter-control-plane",
              format!("number of controlPlane replicas must be at least 2 for arbiter deployments ({masters} node(s) with role master)"));
    }
    Topology::Arbiter
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

    /// Two nodes with an arbiter: the installer's validateArbiter rules, 4.19's gate the agent cannot turn on,
    /// the rendered arbiter pool and agent-config role.
    #[test]
    fn two_nodes_with_an_arbiter() {
        let tna = with(
            set(compact(), "/nodes/2/role", json!("arbiter")),
            "version",
            json!("4.20.2"),
        );
        let p = ok_plan(&tna);
        assert_eq!(
            (
                p.topology,
                p.platform.as_str(),
                p.control_plane_replicas,
                p.arbiter_replicas,
                p.compute_replicas
            ),
            (Topology::Arbiter, "baremetal", 2, 1, 0)
        );
        let roles: Vec<_> = p.hosts.iter().map(|h| h.role.as_str()).collect();
        assert_eq!(roles, ["master", "master", "arbiter"]);
        let (ic, ac) = crate::render::render(&p, None).unwrap();
        assert!(
            ic.contains("arbiter:\n  name: arbiter\n  architecture: amd64\n  hyperthreading: Enabled\n  platform: {}\n  replicas: 1\n"),
            "{ic}"
        );
        assert!(ac.contains("  role: \"arbiter\"\n"), "{ac}");
        // Workers may join a two-node cluster with an arbiter; an unroled node beyond 2 masters is one.
        let mut with_worker = tna.clone();
        with_worker["nodes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "worker-0", "mac": "BC:24:11:00:00:04", "ip": "192.168.50.13"}));
        let p = ok_plan(&with_worker);
        assert_eq!(
            (
                p.control_plane_replicas,
                p.arbiter_replicas,
                p.compute_replicas
            ),
            (2, 1, 1)
        );
        // 4.19: the pool is behind HighlyAvailableArbiter (TechPreviewNoUpgrade or a custom gate),
        // and the 4.19 agent installer refuses every featureSet but Default: no agent-based arbiter.
        let on_419 = with(tna.clone(), "version", json!("4.19.3"));
        fails(on_419.clone(), "nodes", "arbiter-version");
        let tech_preview = with(on_419.clone(), "feature_set", json!("TechPreviewNoUpgrade"));
        fails(tech_preview.clone(), "nodes", "arbiter-version");
        fails(tech_preview, "feature_set", "agent-feature-set");
        fails(
            with(
                with(on_419, "feature_set", json!("CustomNoUpgrade")),
                "feature_gates",
                json!(["HighlyAvailableArbiter=true"]),
            ),
            "feature_set",
            "agent-feature-set",
        );
        // Before 4.19 the install-config has no arbiter pool.
        fails(
            with(tna.clone(), "version", json!("4.18.9")),
            "nodes",
            "arbiter-version",
        );
        // validateArbiter: baremetal only, and at least 2 control-plane replicas.
        fails(
            with(tna.clone(), "platform", json!("none")),
            "platform",
            "arbiter-platform",
        );
        fails(
            set(tna.clone(), "/nodes/1/role", json!("worker")),
            "nodes",
            "arbiter-control-plane",
        );
        // Two masters and no arbiter stay refused, naming the way out.
        let p = problems(&with(
            set(compact(), "/nodes/2/role", json!("worker")),
            "version",
            json!("4.20.2"),
        ));
        let two = p
            .iter()
            .find(|x| x.rule == "control-plane-replicas")
            .expect("refused");
        assert!(two.msg.contains("role arbiter"), "{}", two.msg);
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
