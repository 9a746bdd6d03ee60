//! Cluster networks' hostPrefix: inside the CIDR, room for every node, 64 for IPv6, one value for
//! all IPv4 networks.

use std::collections::BTreeSet;

use super::context::{Ctx, Findings, Staged};

pub(super) fn check(cx: &Ctx) -> Staged<()> {
    let mut f = Findings::default();
    let o = cx.o;
    let node_count = o.nodes.len();
    let mut v4_prefixes = BTreeSet::new();
    for (i, (n, cidr)) in o.cluster_networks.iter().zip(&cx.net.cluster).enumerate() {
        let Some(cidr) = cidr else { continue };
        let path = format!("cluster_networks[{i}].host_prefix");
        let hp = n.host_prefix;
        if !cidr.addr.is_ipv4() {
            if hp != 64 {
                f.err(
                    &path,
                    "host-prefix-ipv6",
                    format!("an IPv6 cluster network needs hostPrefix 64, not {hp}"),
                );
            }
            continue;
        }
        v4_prefixes.insert(hp);
        if hp < cidr.prefix as i64 || hp > 32 {
            f.err(
                &path,
                "host-prefix-range",
                format!(
                    "hostPrefix {hp} must be between the CIDR's prefix length ({}) and 32",
                    cidr.prefix
                ),
            );
            continue;
        }
        let subnets = 1u128 << (hp - cidr.prefix as i64).min(100);
        if subnets < node_count as u128 {
            f.err(
                &path,
                "host-prefix-capacity",
                format!(
                    "{cidr} split into /{hp} gives {subnets} node subnets for {node_count} nodes"
                ),
            );
        }
        if hp > 28 {
            f.warn(format!(
                "{path}: hostPrefix {hp} leaves fewer than 16 pod addresses per node"
            ));
        }
    }
    if v4_prefixes.len() > 1 {
        f.err(
            "cluster_networks",
            "host-prefix-uniform",
            "all IPv4 cluster networks must share one host_prefix",
        );
    }
    f.with(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;
    use crate::plan::plan;

    #[test]
    fn rule_host_prefix() {
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "10.128.0.0/14", "host_prefix": 12}]),
            ),
            "cluster_networks[0].host_prefix",
            "host-prefix-range",
        );
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "10.128.0.0/14", "host_prefix": 33}]),
            ),
            "cluster_networks[0].host_prefix",
            "host-prefix-range",
        );
        let tiny = with(
            compact(),
            "cluster_networks",
            json!([{"cidr": "10.128.0.0/14", "host_prefix": 30}]),
        );
        let planned = plan(&options(&tiny));
        assert!(planned.problems.is_empty());
        assert!(planned.warnings.iter().any(|w| w.contains("fewer than 16")));
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "10.128.0.0/23", "host_prefix": 24}]),
            ),
            "cluster_networks[0].host_prefix",
            "host-prefix-capacity",
        );
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "10.128.0.0/16", "host_prefix": 23}, {"cidr": "10.132.0.0/16", "host_prefix": 24}]),
            ),
            "cluster_networks",
            "host-prefix-uniform",
        );
        let v6 = with(
            with(
                with(compact(), "machine_networks", json!(["fd00::/64"])),
                "service_networks",
                json!(["fd02::/112"]),
            ),
            "cluster_networks",
            json!([{"cidr": "fd01::/48", "host_prefix": 56}]),
        );
        fails(v6, "cluster_networks[0].host_prefix", "host-prefix-ipv6");
    }
}
