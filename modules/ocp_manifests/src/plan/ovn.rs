//! OVN-Kubernetes' own subnets (join, transit, masquerade) must not overlap any network; docker's
//! default bridge only earns a warning. A join subnet of the user's must be OVN-Kubernetes' and
//! hold an address for every node the cluster networks and their hostPrefix allow.

use crate::net::Cidr;

use super::context::{Ctx, Findings, Staged};

/// OVN-Kubernetes' internal IPv4/IPv6 subnets (join, transit, masquerade), per the installer.
fn ovn_internal(join: Option<Cidr>) -> Vec<(&'static str, Cidr)> {
    let c = |s: &str| Cidr::parse(s).expect("constant CIDR");
    vec![
        (
            "OVN join subnet",
            join.unwrap_or_else(|| c("100.64.0.0/16")),
        ),
        ("OVN transit subnet", c("100.88.0.0/16")),
        ("OVN masquerade subnet", c("169.254.0.0/17")),
        ("OVN IPv6 join subnet", c("fd98::/64")),
        ("OVN IPv6 transit subnet", c("fd97::/64")),
        ("OVN IPv6 masquerade subnet", c("fd69::/112")),
    ]
}

pub(super) fn check(cx: &Ctx) -> Staged<()> {
    let mut f = Findings::default();
    let join =
        cx.o.ovn_internal_join_subnet
            .as_deref()
            .and_then(|s| join_subnet(&mut f, s));
    if let Some(join) = join {
        join_capacity(&mut f, cx, join);
    }
    if cx.net.network_type == "OVNKubernetes" {
        let docker = Cidr::parse("172.17.0.0/16").expect("constant");
        for (path, x) in &cx.net.all {
            for (what, y) in ovn_internal(join) {
                if x.overlaps(&y) {
                    f.err(
                        path.clone(),
                        "ovn-internal-overlap",
                        format!("{x} overlaps the {what} {y}, which OVNKubernetes reserves"),
                    );
                }
            }
            if x.overlaps(&docker) {
                f.warn(format!(
                    "{path} ({x}) overlaps docker's default bridge 172.17.0.0/16"
                ));
            }
        }
    }
    f.with(())
}

/// installer `validateOVNIPv4InternalJoinSubnet` → `isV4NodeSubnetLargeEnough` (the same rule as
/// cluster-network-operator's `validateOVNKubernetesSubnet`, which refuses the cluster at install
/// time in every release this module renders; releases whose installer has
/// `validateOVNIPv4InternalJoinSubnet` refuse it before the ISO is built): every node the
/// IPv4 cluster networks can hold (2^(hostPrefix − prefix) each, summed) needs an address of the
/// join subnet, less its network, broadcast and gateway addresses. A hostPrefix shorter than its
/// CIDR is `host_prefix`'s problem (the installer then reports an internal error here).
fn join_capacity(f: &mut Findings, cx: &Ctx, join: Cidr) {
    let mut nodes: u128 = 0;
    for (n, cidr) in cx.o.cluster_networks.iter().zip(&cx.net.cluster) {
        let Some(cidr) = cidr.filter(|c| c.addr.is_ipv4()) else {
            continue;
        };
        let Ok(bits) = u32::try_from(n.host_prefix - i64::from(cidr.prefix)) else {
            return;
        };
        nodes = nodes.saturating_add(1u128.checked_shl(bits).unwrap_or(u128::MAX));
    }
    let room = (1u128 << (32 - u32::from(join.prefix))).saturating_sub(3);
    if nodes >= room {
        f.err(
            "ovn_internal_join_subnet",
            "ovn-join-subnet-size",
            format!(
                "{join} has {room} node addresses, but the cluster networks allow {nodes} nodes; give a larger join subnet or a longer host_prefix"
            ),
        );
    }
}

fn join_subnet(f: &mut Findings, s: &str) -> Option<Cidr> {
    match Cidr::parse(s) {
        Ok(x) if x.addr.is_unspecified() => {
            super::networks::unspecified(f, "ovn_internal_join_subnet", s);
            None
        }
        Ok(x) if x.is_network() && x.addr.is_ipv4() => Some(x),
        Ok(_) => {
            f.err(
                "ovn_internal_join_subnet",
                "cidr-network-address",
                format!("'{s}' must be an IPv4 network address"),
            );
            None
        }
        Err(e) => {
            f.err("ovn_internal_join_subnet", "cidr-syntax", e.to_string());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_ovn_internal_subnets() {
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "100.64.0.0/14", "host_prefix": 23}]),
            ),
            "cluster_networks[0]",
            "ovn-internal-overlap",
        );
        fails(
            with(compact(), "service_networks", json!(["100.88.0.0/16"])),
            "service_networks[0]",
            "ovn-internal-overlap",
        );
        fails(
            with(compact(), "service_networks", json!(["169.254.0.0/16"])),
            "service_networks[0]",
            "ovn-internal-overlap",
        );
        // A custom join subnet moves the reserved range.
        let v = with(
            with(
                compact(),
                "ovn_internal_join_subnet",
                json!("100.66.0.0/16"),
            ),
            "service_networks",
            json!(["100.64.0.0/16"]),
        );
        ok_plan(&v);
        // installer TestValidateInstallConfig "user-provided IPv4 InternalJoinSubnet too small":
        // 10.128.0.0/14 split into /23 is 512 nodes, a /24 join subnet holds 253.
        let small = with(
            with(
                compact(),
                "ovn_internal_join_subnet",
                json!("100.64.0.0/24"),
            ),
            "cluster_networks",
            json!([{"cidr": "10.128.0.0/14", "host_prefix": 23}]),
        );
        fails(
            small.clone(),
            "ovn_internal_join_subnet",
            "ovn-join-subnet-size",
        );
        // cluster-network-operator TestValidateOVNKubernetesSubnetsIPv4: a /21 (2045) holds them.
        ok_plan(&with(
            small,
            "ovn_internal_join_subnet",
            json!("100.64.0.0/21"),
        ));
        fails(
            with(
                compact(),
                "ovn_internal_join_subnet",
                json!("100.66.0.1/16"),
            ),
            "ovn_internal_join_subnet",
            "cidr-network-address",
        );
        // validate.SubnetCIDR on internalJoinSubnet: the unspecified address.
        fails(
            with(compact(), "ovn_internal_join_subnet", json!("0.0.0.0/16")),
            "ovn_internal_join_subnet",
            "cidr-unspecified",
        );
    }
}
