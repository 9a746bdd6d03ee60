//! OVN-Kubernetes' own subnets (join, transit, masquerade) must not overlap any network; docker's
//! default bridge only earns a warning.

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

fn join_subnet(f: &mut Findings, s: &str) -> Option<Cidr> {
    match Cidr::parse(s) {
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
        fails(
            with(
                compact(),
                "ovn_internal_join_subnet",
                json!("100.66.0.1/16"),
            ),
            "ovn_internal_join_subnet",
            "cidr-network-address",
        );
    }
}
