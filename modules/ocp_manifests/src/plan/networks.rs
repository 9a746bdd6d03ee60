//! Machine, service and cluster networks: network type, CIDR syntax, no overlaps, service network
//! size; which address families the cluster uses (the rules on them are in `stack`).

use std::net::IpAddr;

use crate::net::Cidr;

use super::context::{Ctx, Findings, Staged};

/// The parsed networks. A `None` entry did not parse (its problem is already reported).
#[derive(Default)]
pub(super) struct Networks {
    pub network_type: String,
    pub service: Vec<Option<Cidr>>,
    pub cluster: Vec<Option<Cidr>>,
    /// Every parsed network with its option path (`service_networks[0]`), machine first.
    pub all: Vec<(String, Cidr)>,
    /// The machine networks that parsed.
    pub machine_ok: Vec<Cidr>,
    /// IPv4 only, IPv6 only, or both, read from the service networks as the installer does.
    pub stack: Stack,
    /// The family of the first machine network (the installer's "primary" family): IPv4?
    pub primary_v4: bool,
}

/// The cluster's address families. The installer's `inferIPVersionFromInstallConfig`
/// (pkg/types/validation/installconfig.go) reads them from the service networks only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Stack {
    #[default]
    V4,
    V6,
    Dual,
}

impl Stack {
    fn of(service: &[Option<Cidr>]) -> Stack {
        let v4 = service.iter().flatten().any(|c| c.addr.is_ipv4());
        let v6 = service.iter().flatten().any(|c| !c.addr.is_ipv4());
        match (v4, v6) {
            (true, true) => Stack::Dual,
            (false, true) => Stack::V6,
            _ => Stack::V4,
        }
    }
}

impl Networks {
    /// The machine network holding `ip`.
    pub fn in_machine(&self, ip: IpAddr) -> Option<Cidr> {
        self.machine_ok.iter().find(|m| m.contains(ip)).copied()
    }
}

pub(super) fn check(cx: &Ctx) -> Staged<Networks> {
    let mut f = Findings::default();
    let o = cx.o;
    let network_type = network_type(&mut f, &o.network_type);
    if o.machine_networks.is_empty() {
        f.err(
            "machine_networks",
            "machine-network-required",
            "at least one machine network is required",
        );
    }
    let machine = parse_cidr_list(&mut f, &o.machine_networks, "machine_networks");
    let service = parse_cidr_list(&mut f, &o.service_networks, "service_networks");
    let cluster_strs: Vec<String> = o.cluster_networks.iter().map(|n| n.cidr.clone()).collect();
    let cluster = parse_cidr_list(&mut f, &cluster_strs, "cluster_networks");
    if o.service_networks.is_empty() {
        f.err(
            "service_networks",
            "service-network-required",
            "at least one service network is required",
        );
    }
    if o.cluster_networks.is_empty() {
        f.err(
            "cluster_networks",
            "cluster-network-required",
            "at least one cluster network is required",
        );
    }
    let all: Vec<(String, Cidr)> = [
        ("machine_networks", &machine),
        ("service_networks", &service),
        ("cluster_networks", &cluster),
    ]
    .iter()
    .flat_map(|(opt, list)| named(opt, list, list.len()))
    .collect();
    overlaps(&mut f, &machine, &service, &cluster);
    service_size(&mut f, &service);
    let machine_ok: Vec<Cidr> = machine.iter().flatten().copied().collect();
    let stack = Stack::of(&service);
    let primary_v4 = machine_ok.first().is_none_or(|m| m.addr.is_ipv4());
    f.with(Networks {
        network_type,
        service,
        cluster,
        all,
        machine_ok,
        stack,
        primary_v4,
    })
}

/// Only OVNKubernetes (spelled in any case); anything else is reported and kept as given.
fn network_type(f: &mut Findings, given: &str) -> String {
    if given.eq_ignore_ascii_case("OVNKubernetes") {
        return "OVNKubernetes".to_string();
    }
    let why = if given.eq_ignore_ascii_case("OpenShiftSDN") {
        "OpenShiftSDN is not supported, please use OVNKubernetes".to_string()
    } else {
        format!("'{given}' is not supported for agent-based installs; use OVNKubernetes")
    };
    f.err("network_type", "network-type", why);
    given.to_string()
}

fn parse_cidr_list(f: &mut Findings, list: &[String], opt: &str) -> Vec<Option<Cidr>> {
    list.iter()
        .enumerate()
        .map(|(i, s)| match Cidr::parse(s) {
            Err(e) => {
                f.err(format!("{opt}[{i}]"), "cidr-syntax", e.to_string());
                None
            }
            Ok(cidr) if cidr.addr.is_unspecified() => {
                unspecified(f, &format!("{opt}[{i}]"), s);
                None
            }
            Ok(cidr) if !cidr.is_network() => {
                f.err(
                    format!("{opt}[{i}]"),
                    "cidr-network-address",
                    format!(
                        "invalid network address: got {s}, expecting {}/{}",
                        cidr.network(),
                        cidr.prefix
                    ),
                );
                None
            }
            Ok(cidr) => Some(cidr),
        })
        .collect()
}

/// installer `validate.SubnetCIDR` (pkg/validate/validate.go), which `validateNetworking` runs on every
/// machine, service and cluster network and on OVN-Kubernetes' `internalJoinSubnet`: a block whose
/// address is `0.0.0.0` or `::` is refused ("address must be specified") before its host bits are
/// looked at, so `0.0.0.0/0` and `::/0` fail although they are network addresses.
pub(super) fn unspecified(f: &mut Findings, path: &str, given: &str) {
    f.err(
        path,
        "cidr-unspecified",
        format!("'{given}': address must be specified (0.0.0.0 or :: is the unspecified address, not a network; the installer's validate.SubnetCIDR refuses it)"),
    );
}

/// The first `upto` parsed entries of `list` with their option paths.
fn named(opt: &str, list: &[Option<Cidr>], upto: usize) -> Vec<(String, Cidr)> {
    list.iter()
        .take(upto)
        .enumerate()
        .filter_map(|(i, x)| x.map(|x| (format!("{opt}[{i}]"), x)))
        .collect()
}

/// Machine vs earlier machine; service vs machine and earlier service; cluster vs all earlier.
fn overlaps(
    f: &mut Findings,
    machine: &[Option<Cidr>],
    service: &[Option<Cidr>],
    cluster: &[Option<Cidr>],
) {
    for i in 0..machine.len() {
        for p in collect_overlaps(machine[i], &named("machine_networks", machine, i)) {
            f.err(format!("machine_networks[{i}]"), "cidr-overlap", p);
        }
    }
    for i in 0..service.len() {
        let mut against = named("machine_networks", machine, machine.len());
        against.extend(named("service_networks", service, i));
        for p in collect_overlaps(service[i], &against) {
            f.err(format!("service_networks[{i}]"), "cidr-overlap", p);
        }
    }
    for i in 0..cluster.len() {
        let mut against = named("machine_networks", machine, machine.len());
        against.extend(named("service_networks", service, service.len()));
        against.extend(named("cluster_networks", cluster, i));
        for p in collect_overlaps(cluster[i], &against) {
            f.err(format!("cluster_networks[{i}]"), "cidr-overlap", p);
        }
    }
}

fn collect_overlaps(one: Option<Cidr>, against: &[(String, Cidr)]) -> Vec<String> {
    let Some(x) = one else {
        return vec![];
    };
    against
        .iter()
        .filter(|(_, y)| x.overlaps(y))
        .map(|(p, y)| format!("{x} overlaps {p} ({y})"))
        .collect()
}

fn service_size(f: &mut Findings, service: &[Option<Cidr>]) {
    for (i, s) in service.iter().enumerate() {
        let Some(s) = s else { continue };
        if s.addr.is_ipv4() && s.prefix < 12 {
            f.err(
                format!("service_networks[{i}]"),
                "service-network-size",
                format!("{s} is larger than a /12"),
            );
        }
        if !s.addr.is_ipv4() && s.prefix < 108 {
            f.err(
                format!("service_networks[{i}]"),
                "service-network-size",
                format!("{s}: an IPv6 service network must be /108 or smaller"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_network_type() {
        fails(
            with(compact(), "network_type", json!("OpenShiftSDN")),
            "network_type",
            "network-type",
        );
        fails(
            with(compact(), "network_type", json!("Calico")),
            "network_type",
            "network-type",
        );
        assert_eq!(
            ok_plan(&with(compact(), "network_type", json!("ovnkubernetes"))).network_type,
            "OVNKubernetes"
        );
    }

    #[test]
    fn rule_cidr_network_address_and_syntax() {
        fails(
            with(compact(), "machine_networks", json!(["192.168.50.1/24"])),
            "machine_networks[0]",
            "cidr-network-address",
        );
        fails(
            with(compact(), "service_networks", json!(["172.30.0.0/33"])),
            "service_networks[0]",
            "cidr-syntax",
        );
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "10.128.1.0/14"}]),
            ),
            "cluster_networks[0]",
            "cidr-network-address",
        );
        fails(
            with(compact(), "machine_networks", json!([])),
            "machine_networks",
            "machine-network-required",
        );
    }

    /// installer `validate.SubnetCIDR`: "address must be specified" for 0.0.0.0 and ::, whatever the
    /// prefix (pkg/validate/validate_test.go TestSubnetCIDR "0.0.0.0/0").
    #[test]
    fn rule_cidr_unspecified() {
        fails(
            with(compact(), "machine_networks", json!(["0.0.0.0/0"])),
            "machine_networks[0]",
            "cidr-unspecified",
        );
        fails(
            with(compact(), "service_networks", json!(["0.0.0.0/16"])),
            "service_networks[0]",
            "cidr-unspecified",
        );
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "0.0.0.0/14", "host_prefix": 23}]),
            ),
            "cluster_networks[0]",
            "cidr-unspecified",
        );
        fails(
            with(ipv6_only(compact()), "machine_networks", json!(["::/0"])),
            "machine_networks[0]",
            "cidr-unspecified",
        );
    }

    #[test]
    fn rule_cidr_overlap() {
        fails(
            with(compact(), "service_networks", json!(["192.168.0.0/16"])),
            "service_networks[0]",
            "cidr-overlap",
        );
        fails(
            with(
                compact(),
                "cluster_networks",
                json!([{"cidr": "172.30.0.0/15", "host_prefix": 23}]),
            ),
            "cluster_networks[0]",
            "cidr-overlap",
        );
        fails(
            with(
                compact(),
                "machine_networks",
                json!(["192.168.50.0/24", "192.168.50.128/25"]),
            ),
            "machine_networks[1]",
            "cidr-overlap",
        );
    }

    #[test]
    fn rule_networks_and_nodes_required() {
        fails(
            with(compact(), "service_networks", json!([])),
            "service_networks",
            "service-network-required",
        );
        fails(
            with(compact(), "cluster_networks", json!([])),
            "cluster_networks",
            "cluster-network-required",
        );
        fails(
            with(compact(), "nodes", json!([])),
            "nodes",
            "nodes-required",
        );
    }

    /// The count per stack is `stack`'s rule.
    #[test]
    fn rule_service_network_size() {
        fails(
            with(compact(), "service_networks", json!(["172.0.0.0/11"])),
            "service_networks[0]",
            "service-network-size",
        );
        fails(
            with(
                ipv6_only(compact()),
                "service_networks",
                json!(["fd02::/64"]),
            ),
            "service_networks[0]",
            "service-network-size",
        );
    }
}
