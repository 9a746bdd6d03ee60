//! Roles, control-plane and compute counts, the topology (SNO, compact, HA) and the platform.

use crate::model::Topology;

use super::context::{Ctx, Findings, Staged};

pub(super) struct Topo {
    /// Each node's role, given or derived from its position.
    pub roles: Vec<String>,
    pub masters: usize,
    pub workers: usize,
    pub topology: Topology,
    /// `baremetal` or `none`.
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
        ("baremetal", Topology::Sno) => {
            f.err(
                "platform",
                "sno-platform-none",
                "only platform none supports 1 control-plane node and 0 workers",
            );
            "baremetal"
        }
        _ => "baremetal",
    };
    f.with(Topo {
        roles,
        masters,
        workers,
        topology,
        platform,
    })
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
