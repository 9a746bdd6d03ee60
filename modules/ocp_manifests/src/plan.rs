//! Validation and derivation: options in, a [`Plan`] (or every problem at once) out. Each problem
//! names the option path and the rule it broke. Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use serde_json::{json, Map, Value};

use crate::formats::{
    check_pem_bundle, check_pull_secret, check_repository, check_ssh_key, parse_url,
};
use crate::model::*;
use crate::net::{is_dns_label, is_dns_subdomain, next_ip, parse_mac, to_u128, Cidr};
use crate::nmstate;

/// One broken rule: where (`nodes[2].mac`), which rule (`mac-unique`), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub rule: &'static str,
    pub msg: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [{}]", self.path, self.msg, self.rule)
    }
}

#[derive(Default)]
struct Ctx {
    problems: Vec<Problem>,
    warnings: Vec<String>,
}

impl Ctx {
    fn err(&mut self, path: impl Into<String>, rule: &'static str, msg: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            rule,
            msg: msg.into(),
        });
    }
}

/// The validated plan plus warnings, or every problem found.
pub struct Planned {
    pub plan: Option<Plan>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
    /// Secrets found inside options (pull-secret `auth` values), to mask in all output.
    pub secrets: Vec<String>,
}

/// (major, minor) of `4.16`, `4.16.3`, `4.17.0-rc.1`.
pub fn parse_version(v: &str) -> Option<(u32, u32)> {
    let mut it = v.trim().split(['.', '-', '+']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Known `capabilities.baselineCapabilitySet` values (InstallConfig CRD enum).
pub const BASELINE_SETS: &[&str] = &[
    "None", "v4.11", "v4.12", "v4.13", "v4.14", "v4.15", "v4.16", "v4.17", "v4.18", "vCurrent",
];
/// Known cluster capabilities (openshift/api `ClusterVersionCapability`).
pub const CAPABILITIES: &[&str] = &[
    "openshift-samples",
    "baremetal",
    "marketplace",
    "Console",
    "Insights",
    "Storage",
    "CSISnapshot",
    "NodeTuning",
    "MachineAPI",
    "Build",
    "DeploymentConfig",
    "ImageRegistry",
    "OperatorLifecycleManager",
    "OperatorLifecycleManager-v1",
    "CloudCredential",
    "Ingress",
    "CloudControllerManager",
];

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

fn parse_cidr_list(c: &mut Ctx, list: &[String], opt: &str) -> Vec<Option<Cidr>> {
    list.iter()
        .enumerate()
        .map(|(i, s)| match Cidr::parse(s) {
            Err(e) => {
                c.err(format!("{opt}[{i}]"), "cidr-syntax", e);
                None
            }
            Ok(cidr) if !cidr.is_network() => {
                c.err(
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

fn parse_ip(c: &mut Ctx, s: &str, path: &str) -> Option<IpAddr> {
    match s.parse::<IpAddr>() {
        Ok(ip) => Some(ip),
        Err(_) => {
            c.err(path, "ip-syntax", format!("'{s}' is not an IP address"));
            None
        }
    }
}

/// Validate everything and derive the plan.
pub fn plan(o: &Options) -> Planned {
    let mut c = Ctx::default();
    let mut secrets = Vec::new();

    // --- version ----------------------------------------------------------------------------
    let version = parse_version(&o.version);
    match version {
        None => c.err(
            "version",
            "version-format",
            format!(
                "'{}' is not an OpenShift version like 4.16 or 4.16.3",
                o.version
            ),
        ),
        Some((4, m)) if m >= 14 => {}
        Some(_) => c.err(
            "version",
            "version-supported",
            format!(
                "OpenShift {} is not supported; this module renders 4.14 or later",
                o.version
            ),
        ),
    }
    let minor = version.map(|v| v.1).unwrap_or(14);

    // --- names ------------------------------------------------------------------------------
    let name = o.cluster_name.as_str();
    if !is_dns_label(name) {
        c.err("cluster_name", "cluster-name-dns-label",
              format!("'{name}' must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"));
    } else if name.len() > 54 {
        c.err(
            "cluster_name",
            "cluster-name-length",
            format!(
                "'{name}' is {} characters; at most 54 leave room for '*.apps.' in DNS names",
                name.len()
            ),
        );
    }
    let base = o.base_domain.trim_end_matches('.');
    if !is_dns_subdomain(&o.base_domain) {
        c.err("base_domain", "base-domain-dns-subdomain",
              format!("'{}' must be a DNS subdomain: dot-separated lowercase labels of letters, digits and '-'", o.base_domain));
    } else if is_dns_label(name) && !is_dns_subdomain(&format!("x.apps.{name}.{base}")) {
        c.err(
            "base_domain",
            "cluster-domain-length",
            format!("'*.apps.{name}.{base}' exceeds DNS name limits"),
        );
    }

    // --- secrets and certificates -----------------------------------------------------------
    match check_pull_secret(&o.pull_secret) {
        Ok(s) => secrets.extend(s),
        Err(e) => c.err(
            "pull_secret",
            "pull-secret-format",
            format!("the pull secret {e}"),
        ),
    }
    if o.fips {
        c.warnings.push(
            "fips: openshift-install must run on a host in FIPS mode (or with OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION set)"
                .into(),
        );
    }
    if o.ssh_key.is_none() {
        c.warnings.push(
            "no ssh_key: you will not be able to log in to the nodes to debug the install".into(),
        );
    }
    if let Some(k) = &o.ssh_key {
        if let Err(e) = check_ssh_key(k, o.fips) {
            c.err(
                "ssh_key",
                "ssh-key-format",
                format!("the SSH public key {e}"),
            );
        }
    }
    if let Some(b) = &o.additional_trust_bundle {
        if let Err(e) = check_pem_bundle(b) {
            c.err(
                "additional_trust_bundle",
                "trust-bundle-pem",
                format!("the trust bundle {e}"),
            );
        }
    } else if o.additional_trust_bundle_policy.is_some() {
        c.warnings.push(
            "additional_trust_bundle_policy is ignored without additional_trust_bundle".into(),
        );
    }

    // --- networks ---------------------------------------------------------------------------
    let network_type = if o.network_type.eq_ignore_ascii_case("OVNKubernetes") {
        "OVNKubernetes".to_string()
    } else {
        let why = if o.network_type.eq_ignore_ascii_case("OpenShiftSDN") {
            "OpenShiftSDN is not supported, please use OVNKubernetes".to_string()
        } else {
            format!(
                "'{}' is not supported for agent-based installs; use OVNKubernetes",
                o.network_type
            )
        };
        c.err("network_type", "network-type", why);
        o.network_type.clone()
    };
    if o.machine_networks.is_empty() {
        c.err(
            "machine_networks",
            "machine-network-required",
            "at least one machine network is required",
        );
    }
    let machine = parse_cidr_list(&mut c, &o.machine_networks, "machine_networks");
    let service = parse_cidr_list(&mut c, &o.service_networks, "service_networks");
    let cluster_strs: Vec<String> = o.cluster_networks.iter().map(|n| n.cidr.clone()).collect();
    let cluster = parse_cidr_list(&mut c, &cluster_strs, "cluster_networks");
    if o.service_networks.is_empty() {
        c.err(
            "service_networks",
            "service-network-required",
            "at least one service network is required",
        );
    }
    if o.cluster_networks.is_empty() {
        c.err(
            "cluster_networks",
            "cluster-network-required",
            "at least one cluster network is required",
        );
    }
    // Every network in one address family: dual stack needs two addresses per node, which the
    // node model here does not carry.
    let all: Vec<(String, Cidr)> = [
        ("machine_networks", &machine),
        ("service_networks", &service),
        ("cluster_networks", &cluster),
    ]
    .iter()
    .flat_map(|(opt, list)| {
        list.iter()
            .enumerate()
            .filter_map(move |(i, x)| x.map(|x| (format!("{opt}[{i}]"), x)))
    })
    .collect();
    let v4 = all.first().map(|(_, x)| x.addr.is_ipv4()).unwrap_or(true);
    for (path, x) in &all {
        if x.addr.is_ipv4() != v4 {
            c.err(path.clone(), "single-address-family",
                  "all networks must be in one address family (dual stack is not supported by this module)");
        }
    }
    // Machine vs machine; service vs machine and earlier service; cluster vs all earlier.
    let named = |opt: &str, list: &[Option<Cidr>], upto: usize| -> Vec<(String, Cidr)> {
        list.iter()
            .take(upto)
            .enumerate()
            .filter_map(|(i, x)| x.map(|x| (format!("{opt}[{i}]"), x)))
            .collect()
    };
    for i in 0..machine.len() {
        for p in collect_overlaps(&[machine[i]], &named("machine_networks", &machine, i)) {
            c.err(format!("machine_networks[{i}]"), "cidr-overlap", p);
        }
    }
    for i in 0..service.len() {
        let mut against = named("machine_networks", &machine, machine.len());
        against.extend(named("service_networks", &service, i));
        for p in collect_overlaps(&[service[i]], &against) {
            c.err(format!("service_networks[{i}]"), "cidr-overlap", p);
        }
    }
    for i in 0..cluster.len() {
        let mut against = named("machine_networks", &machine, machine.len());
        against.extend(named("service_networks", &service, service.len()));
        against.extend(named("cluster_networks", &cluster, i));
        for p in collect_overlaps(&[cluster[i]], &against) {
            c.err(format!("cluster_networks[{i}]"), "cidr-overlap", p);
        }
    }
    for (i, s) in service.iter().enumerate() {
        let Some(s) = s else { continue };
        if s.addr.is_ipv4() && s.prefix < 12 {
            c.err(
                format!("service_networks[{i}]"),
                "service-network-size",
                format!("{s} is larger than a /12"),
            );
        }
        if !s.addr.is_ipv4() && s.prefix < 108 {
            c.err(
                format!("service_networks[{i}]"),
                "service-network-size",
                format!("{s}: an IPv6 service network must be /108 or smaller"),
            );
        }
    }
    if o.service_networks.len() > 1 {
        c.err(
            "service_networks",
            "service-network-count",
            "a single-stack install allows only one service network",
        );
    }
    // hostPrefix rules.
    let node_count = o.nodes.len();
    let mut v4_prefixes = BTreeSet::new();
    for (i, (n, cidr)) in o.cluster_networks.iter().zip(&cluster).enumerate() {
        let Some(cidr) = cidr else { continue };
        let path = format!("cluster_networks[{i}].host_prefix");
        let hp = n.host_prefix;
        if cidr.addr.is_ipv4() {
            v4_prefixes.insert(hp);
            if hp < cidr.prefix as i64 || hp > 32 {
                c.err(
                    &path,
                    "host-prefix-range",
                    format!(
                        "hostPrefix {hp} must be between the CIDR's prefix length ({}) and 32",
                        cidr.prefix
                    ),
                );
            } else {
                let subnets = 1u128 << (hp - cidr.prefix as i64).min(100);
                if subnets < node_count as u128 {
                    c.err(&path, "host-prefix-capacity",
                          format!("{cidr} split into /{hp} gives {subnets} node subnets for {node_count} nodes"));
                }
                if hp > 28 {
                    c.warnings.push(format!(
                        "{path}: hostPrefix {hp} leaves fewer than 16 pod addresses per node"
                    ));
                }
            }
        } else if hp != 64 {
            c.err(
                &path,
                "host-prefix-ipv6",
                format!("an IPv6 cluster network needs hostPrefix 64, not {hp}"),
            );
        }
    }
    if v4_prefixes.len() > 1 {
        c.err(
            "cluster_networks",
            "host-prefix-uniform",
            "all IPv4 cluster networks must share one host_prefix",
        );
    }
    // OVN internal subnets.
    let join = o
        .ovn_internal_join_subnet
        .as_deref()
        .and_then(|s| match Cidr::parse(s) {
            Ok(x) if x.is_network() && x.addr.is_ipv4() => Some(x),
            Ok(_) => {
                c.err(
                    "ovn_internal_join_subnet",
                    "cidr-network-address",
                    format!("'{s}' must be an IPv4 network address"),
                );
                None
            }
            Err(e) => {
                c.err("ovn_internal_join_subnet", "cidr-syntax", e);
                None
            }
        });
    if network_type == "OVNKubernetes" {
        for (path, x) in &all {
            for (what, y) in ovn_internal(join) {
                if x.overlaps(&y) {
                    c.err(
                        path.clone(),
                        "ovn-internal-overlap",
                        format!("{x} overlaps the {what} {y}, which OVNKubernetes reserves"),
                    );
                }
            }
            if x.overlaps(&Cidr::parse("172.17.0.0/16").expect("constant")) {
                c.warnings.push(format!(
                    "{path} ({x}) overlaps docker's default bridge 172.17.0.0/16"
                ));
            }
        }
    }
    let machine_ok: Vec<Cidr> = machine.iter().flatten().copied().collect();
    let in_machine = |ip: IpAddr| machine_ok.iter().find(|m| m.contains(ip)).copied();

    // --- gateway, DNS, NTP, interface -------------------------------------------------------
    let gateway = o
        .gateway
        .as_deref()
        .and_then(|g| parse_ip(&mut c, g, "gateway"));
    if let Some(g) = gateway {
        if in_machine(g).is_none() && !machine_ok.is_empty() {
            c.err(
                "gateway",
                "gateway-in-machine-network",
                format!("{g} is not inside any machine network"),
            );
        }
    }
    let dns_servers = o.dns_servers.clone().unwrap_or_default();
    for (i, d) in dns_servers.iter().enumerate() {
        parse_ip(&mut c, d, &format!("dns_servers[{i}]"));
    }
    let ntp = o.ntp_servers.clone().unwrap_or_default();
    for (i, s) in ntp.iter().enumerate() {
        if s.parse::<IpAddr>().is_err() && !is_dns_subdomain(&s.to_ascii_lowercase()) {
            c.err(
                format!("ntp_servers[{i}]"),
                "ntp-source",
                format!("'{s}' is neither an IP address nor a domain name"),
            );
        }
    }
    if !nmstate::is_ifname(&o.interface_name) {
        c.err(
            "interface_name",
            "interface-name",
            format!("'{}' is not a Linux interface name", o.interface_name),
        );
    }

    // --- nodes: names, MACs, IPs ------------------------------------------------------------
    if o.nodes.is_empty() {
        c.err("nodes", "nodes-required", "at least one node is required");
    }
    let mut names = BTreeMap::new();
    let mut macs: BTreeMap<String, usize> = BTreeMap::new();
    let mut node_macs = Vec::new();
    let mut static_ips: Vec<Option<IpAddr>> = Vec::new();
    for (i, n) in o.nodes.iter().enumerate() {
        if !is_dns_label(&n.name) {
            c.err(
                format!("nodes[{i}].name"),
                "hostname-dns-label",
                format!(
                    "'{}' must be a DNS label (lowercase letters, digits, '-')",
                    n.name
                ),
            );
        } else if n.name == "localhost" {
            c.err(
                format!("nodes[{i}].name"),
                "hostname-dns-label",
                "'localhost' is rejected by the assisted installer",
            );
        }
        if let Some(j) = names.insert(n.name.clone(), i) {
            c.err(
                format!("nodes[{i}].name"),
                "hostname-unique",
                format!("'{}' is also the name of nodes[{j}]", n.name),
            );
        }
        match parse_mac(&n.mac) {
            Ok(m) => {
                if let Some(j) = macs.get(&m) {
                    c.err(
                        format!("nodes[{i}].mac"),
                        "mac-unique",
                        format!(
                            "{} is also the MAC of nodes[{j}] (compared case-insensitively)",
                            n.mac
                        ),
                    );
                } else {
                    macs.insert(m.clone(), i);
                }
                node_macs.push(m);
            }
            Err(e) => {
                c.err(format!("nodes[{i}].mac"), "mac-unicast", e);
                node_macs.push(n.mac.to_ascii_lowercase());
            }
        }
        if let Some(ifn) = &n.interface {
            if !nmstate::is_ifname(ifn) {
                c.err(
                    format!("nodes[{i}].interface"),
                    "interface-name",
                    format!("'{ifn}' is not a Linux interface name"),
                );
            }
        }
        static_ips.push(
            n.ip.as_deref()
                .and_then(|s| parse_ip(&mut c, s, &format!("nodes[{i}].ip"))),
        );
    }
    let vip_strs = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
    let (api_strs, ingress_strs) = (vip_strs(&o.api_vips), vip_strs(&o.ingress_vips));
    let api: Vec<Option<IpAddr>> = api_strs
        .iter()
        .enumerate()
        .map(|(i, s)| parse_ip(&mut c, s, &format!("api_vips[{i}]")))
        .collect();
    let ingress: Vec<Option<IpAddr>> = ingress_strs
        .iter()
        .enumerate()
        .map(|(i, s)| parse_ip(&mut c, s, &format!("ingress_vips[{i}]")))
        .collect();

    // Allocate missing IPs from the pool, never handing out a reserved address.
    let mut reserved: BTreeSet<IpAddr> = static_ips.iter().flatten().copied().collect();
    reserved.extend(api.iter().flatten());
    reserved.extend(ingress.iter().flatten());
    reserved.extend(gateway);
    reserved.extend(dns_servers.iter().filter_map(|d| d.parse::<IpAddr>().ok()));
    let mut ips = static_ips.clone();
    if static_ips.iter().any(Option::is_none) {
        match &o.ip_pool {
            None => {
                for (i, ip) in static_ips.iter().enumerate() {
                    if ip.is_none() && o.nodes[i].ip.is_none() {
                        c.err(
                            format!("nodes[{i}].ip"),
                            "node-ip-required",
                            "no ip given and no ip_pool to allocate one from",
                        );
                    }
                }
            }
            Some(pool) => allocate(&mut c, pool, &machine_ok, &reserved, &o.nodes, &mut ips),
        }
    }
    let mut seen_ips: BTreeMap<IpAddr, usize> = BTreeMap::new();
    for (i, ip) in ips.iter().enumerate() {
        let Some(ip) = *ip else { continue };
        let path = format!("nodes[{i}].ip");
        if let Some(j) = seen_ips.insert(ip, i) {
            c.err(
                &path,
                "node-ip-unique",
                format!("{ip} is also the IP of nodes[{j}]"),
            );
        }
        match in_machine(ip) {
            None if !machine_ok.is_empty() => c.err(
                &path,
                "node-ip-in-machine-network",
                format!(
                    "{ip} is not inside any machine network ({})",
                    o.machine_networks.join(", ")
                ),
            ),
            Some(m) if ip.is_ipv4() && m.prefix < 31 && (ip == m.network() || ip == m.last()) => c
                .err(
                    &path,
                    "node-ip-host-address",
                    format!("{ip} is the network or broadcast address of {m}"),
                ),
            _ => {}
        }
        if Some(ip) == gateway {
            c.err(&path, "node-ip-not-gateway", format!("{ip} is the gateway"));
        }
    }

    // --- topology and roles -----------------------------------------------------------------
    let explicit_masters = o
        .nodes
        .iter()
        .filter(|n| n.role.as_deref() == Some("master"))
        .count();
    let want_masters = if o.nodes.len() < 3 {
        o.nodes.len().min(1)
    } else {
        3
    }
    .max(explicit_masters);
    let mut assigned = explicit_masters;
    let roles: Vec<String> = o
        .nodes
        .iter()
        .map(|n| match n.role.as_deref() {
            Some(r) => r.to_string(),
            None if assigned < want_masters => {
                assigned += 1;
                "master".into()
            }
            None => "worker".into(),
        })
        .collect();
    let masters = roles.iter().filter(|r| *r == "master").count();
    let workers = roles.len() - masters;
    let max_masters = if minor >= 18 { 5 } else { 3 };
    let topology = match masters {
        0 => {
            if !o.nodes.is_empty() {
                c.err("nodes", "control-plane-replicas", "no node has role master");
            }
            Topology::Sno
        }
        1 => {
            if workers > 0 {
                c.err("nodes", "sno-no-workers",
                      format!("a single control-plane node cannot be installed with workers ({workers} given); add workers after installation"));
            }
            Topology::Sno
        }
        2 => {
            c.err("nodes", "control-plane-replicas",
                  "2 control-plane nodes need the arbiter or two-node-fencing features, which this module does not render; use 1 or 3");
            Topology::Compact
        }
        m if m > max_masters => {
            let allowed = if minor >= 18 {
                "1, 3, 4 or 5"
            } else {
                "1 or 3 (4 and 5 need OpenShift 4.18+)"
            };
            c.err(
                "nodes",
                "control-plane-replicas",
                format!(
                    "{m} control-plane nodes; OpenShift {} allows {allowed}",
                    o.version
                ),
            );
            Topology::Ha
        }
        _ if workers == 0 => Topology::Compact,
        _ => {
            if workers == 1 {
                c.warnings.push("1 worker: ingress runs 2 router replicas, so use 0 workers (compact) or at least 2 (HA)".into());
            }
            Topology::Ha
        }
    };
    let platform = match (o.platform.as_str(), topology) {
        ("auto", Topology::Sno) | ("none", _) => "none",
        ("baremetal", Topology::Sno) => {
            c.err(
                "platform",
                "sno-platform-none",
                "only platform none supports 1 control-plane node and 0 workers",
            );
            "baremetal"
        }
        _ => "baremetal",
    };

    // --- VIPs -------------------------------------------------------------------------------
    let user_managed = o.load_balancer.as_deref() == Some("UserManaged");
    if platform == "baremetal" {
        for (opt, list) in [("api_vips", &api), ("ingress_vips", &ingress)] {
            if list.is_empty() {
                c.err(
                    opt,
                    "vip-required",
                    format!("platform baremetal needs at least one VIP in {opt}"),
                );
            }
            if list.len() > 1 {
                c.err(
                    opt,
                    "vip-count",
                    "give one VIP (two only for dual stack, which this module does not render)",
                );
            }
            for (i, vip) in list.iter().enumerate() {
                let Some(vip) = *vip else { continue };
                let path = format!("{opt}[{i}]");
                if !user_managed && in_machine(vip).is_none() && !machine_ok.is_empty() {
                    c.err(
                        &path,
                        "vip-in-machine-network",
                        format!(
                            "{vip}: IP expected to be in one of the machine networks: {}",
                            o.machine_networks.join(",")
                        ),
                    );
                }
                if let Some(j) = ips.iter().position(|x| *x == Some(vip)) {
                    c.err(
                        &path,
                        "vip-not-node-ip",
                        format!("{vip} is also the IP of nodes[{j}] ({})", o.nodes[j].name),
                    );
                }
                if Some(vip) == gateway {
                    c.err(&path, "vip-not-node-ip", format!("{vip} is the gateway"));
                }
            }
        }
        if !user_managed {
            for (i, a) in api.iter().enumerate() {
                if a.is_some() && ingress.contains(a) {
                    c.err(
                        format!("api_vips[{i}]"),
                        "vip-distinct",
                        "the API VIP must differ from the Ingress VIP",
                    );
                }
            }
        }
    } else if !api.is_empty() || !ingress.is_empty() {
        c.warnings.push("api_vips/ingress_vips are ignored with platform none (DNS points at the node or an external load balancer)".into());
    }
    if platform == "none" && topology != Topology::Sno {
        c.warnings.push("platform none with several nodes: api, api-int and *.apps DNS and their load balancer are your job".into());
    }
    if o.load_balancer.is_some() && platform != "baremetal" {
        c.warnings
            .push("load_balancer is ignored unless platform is baremetal".into());
    }

    // --- rendezvous IP ----------------------------------------------------------------------
    let master_ips: Vec<IpAddr> = ips
        .iter()
        .zip(&roles)
        .filter(|(_, r)| *r == "master")
        .filter_map(|(ip, _)| *ip)
        .collect();
    let rendezvous = match &o.rendezvous_ip {
        Some(s) => match parse_ip(&mut c, s, "rendezvous_ip") {
            Some(ip) if master_ips.contains(&ip) => Some(ip),
            Some(ip) => {
                c.err("rendezvous_ip", "rendezvous-on-master",
                      format!("{ip} is not the IP of a control-plane node; the rendezvousIP must be assigned to a control plane host"));
                None
            }
            None => None,
        },
        None => master_ips.first().copied(),
    };

    // --- proxy, mirrors, capabilities -------------------------------------------------------
    let proxy = o
        .proxy
        .as_ref()
        .map(|p| check_proxy(&mut c, p, &cluster, &service));
    let mirrors: Vec<PlanMirror> = o
        .image_digest_sources
        .clone()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            if let Err(e) = check_repository(&m.source) {
                c.err(
                    format!("image_digest_sources[{i}].source"),
                    "mirror-repository",
                    e,
                );
            }
            if m.mirrors.is_empty() {
                c.err(
                    format!("image_digest_sources[{i}].mirrors"),
                    "mirror-repository",
                    "at least one mirror is required",
                );
            }
            for (j, r) in m.mirrors.iter().enumerate() {
                if let Err(e) = check_repository(r) {
                    c.err(
                        format!("image_digest_sources[{i}].mirrors[{j}]"),
                        "mirror-repository",
                        e,
                    );
                }
            }
            PlanMirror {
                source: m.source,
                mirrors: m.mirrors,
            }
        })
        .collect();
    let capabilities = o
        .capabilities
        .as_ref()
        .map(|cap| check_capabilities(&mut c, cap, platform, minor));

    // --- hosts: root device hints and networkConfig ------------------------------------------
    let mut hosts = Vec::new();
    // Every MAC of every host's interfaces (the installer requires them unique across hosts).
    let mut all_macs: BTreeMap<String, usize> = macs.clone();
    let (mut reported_gateway, mut reported_dns) = (false, false);
    for (i, n) in o.nodes.iter().enumerate() {
        let hints = n
            .root_device_hints
            .as_ref()
            .map(|h| root_hints(&mut c, h, i));
        let interface = n
            .interface
            .clone()
            .unwrap_or_else(|| o.interface_name.clone());
        let ip = ips[i];
        let prefix_length = ip.and_then(in_machine).map(|m| m.prefix).unwrap_or(0);
        let mac = node_macs.get(i).cloned().unwrap_or_default();
        let (network_config, interface, interfaces) = match &n.network_config {
            Some(doc) => {
                // The user's own nmstate: it must carry this node's MAC and IP.
                let ifaces = nmstate::mac_interfaces(doc);
                for (name, m) in &ifaces {
                    match all_macs.get(m) {
                        Some(j) if *j != i => c.err(
                            format!("nodes[{i}].network_config"),
                            "mac-unique",
                            format!("interface {name} has MAC {m}, which nodes[{j}] also uses"),
                        ),
                        _ => {
                            all_macs.insert(m.clone(), i);
                        }
                    }
                }
                let name = match ifaces.iter().find(|(_, m)| *m == mac) {
                    Some((name, _)) => name.clone(),
                    None => {
                        c.err(
                            format!("nodes[{i}].network_config"),
                            "network-config-mac",
                            format!("no interface has mac-address {} (nodes[{i}].mac)", n.mac),
                        );
                        interface
                    }
                };
                if let Some(ip) = ip {
                    if !nmstate::addresses(doc).contains(&ip) {
                        c.err(
                            format!("nodes[{i}].network_config"),
                            "network-config-ip",
                            format!("does not assign the node IP {ip}"),
                        );
                    }
                }
                let interfaces = ifaces
                    .into_iter()
                    .map(|(name, mac)| PlanInterface { name, mac })
                    .collect();
                (doc.clone(), name, interfaces)
            }
            None => {
                if gateway.is_none() && !reported_gateway {
                    reported_gateway = true;
                    c.err(
                        "gateway",
                        "gateway-required",
                        "static node networking needs a gateway for the default route",
                    );
                }
                if dns_servers.is_empty() && !reported_dns {
                    reported_dns = true;
                    c.err(
                        "dns_servers",
                        "dns-servers-required",
                        "static node networking needs at least one DNS server",
                    );
                }
                let doc = match ip {
                    Some(ip) => nmstate::generate(&nmstate::HostNet {
                        interface: &interface,
                        mac: &mac,
                        ip,
                        prefix_length,
                        gateway: gateway.filter(|g| g.is_ipv4() == ip.is_ipv4()),
                        dns_servers: &dns_servers,
                    }),
                    None => Value::Null,
                };
                let interfaces = vec![PlanInterface {
                    name: interface.clone(),
                    mac: mac.clone(),
                }];
                (doc, interface, interfaces)
            }
        };
        if !network_config.is_null() {
            let structural = nmstate::check(&network_config);
            if structural.is_empty() {
                // The nmstate library itself: what `nmstatectl gc` does when the installer builds the ISO.
                if let Err(e) = nmstate::gen_conf(&network_config) {
                    c.err(format!("nodes[{i}].network_config"), "nmstate-gen-conf", e);
                }
            }
            for (p, msg) in structural {
                let path = if p.is_empty() {
                    format!("nodes[{i}].network_config")
                } else {
                    format!("nodes[{i}].network_config.{p}")
                };
                c.err(path, "nmstate-structure", msg);
            }
        }
        hosts.push(PlanHost {
            name: n.name.clone(),
            role: roles[i].clone(),
            ip: ip.map(|x| x.to_string()).unwrap_or_default(),
            mac,
            interface,
            interfaces,
            prefix_length,
            root_device_hints: hints,
            network_config,
        });
    }

    let problems = c.problems;
    let plan = problems.is_empty().then(|| Plan {
        cluster_name: name.to_string(),
        base_domain: o.base_domain.clone(),
        version: o.version.clone(),
        topology,
        platform: platform.to_string(),
        control_plane_replicas: masters,
        compute_replicas: workers,
        network_type,
        machine_networks: o.machine_networks.clone(),
        cluster_networks: o
            .cluster_networks
            .iter()
            .map(|n| PlanClusterNetwork {
                cidr: n.cidr.clone(),
                host_prefix: n.host_prefix,
            })
            .collect(),
        service_networks: o.service_networks.clone(),
        ovn_internal_join_subnet: o.ovn_internal_join_subnet.clone(),
        api_vips: if platform == "baremetal" {
            api_strs.clone()
        } else {
            vec![]
        },
        ingress_vips: if platform == "baremetal" {
            ingress_strs.clone()
        } else {
            vec![]
        },
        load_balancer: o.load_balancer.clone().filter(|_| platform == "baremetal"),
        pull_secret: o.pull_secret.clone(),
        ssh_key: o.ssh_key.as_ref().map(|k| k.trim().to_string()),
        additional_trust_bundle: o.additional_trust_bundle.clone(),
        additional_trust_bundle_policy: o
            .additional_trust_bundle_policy
            .clone()
            .filter(|_| o.additional_trust_bundle.is_some()),
        proxy,
        image_digest_sources: mirrors,
        capabilities,
        fips: o.fips,
        rendezvous_ip: rendezvous.map(|x| x.to_string()).unwrap_or_default(),
        ntp_servers: ntp,
        hosts,
    });
    Planned {
        plan,
        problems,
        warnings: c.warnings,
        secrets,
    }
}

fn collect_overlaps(one: &[Option<Cidr>], against: &[(String, Cidr)]) -> Vec<String> {
    let Some(Some(x)) = one.first() else {
        return vec![];
    };
    against
        .iter()
        .filter(|(_, y)| x.overlaps(y))
        .map(|(p, y)| format!("{x} overlaps {p} ({y})"))
        .collect()
}

fn allocate(
    c: &mut Ctx,
    pool: &IpPool,
    machine: &[Cidr],
    reserved: &BTreeSet<IpAddr>,
    nodes: &[NodeOpt],
    ips: &mut [Option<IpAddr>],
) {
    let Some(start) = parse_ip(c, &pool.start, "ip_pool.start") else {
        return;
    };
    let Some(net) = machine.iter().find(|m| m.contains(start)).copied() else {
        c.err(
            "ip_pool.start",
            "ip-pool-in-machine-network",
            format!("{start} is not inside any machine network"),
        );
        return;
    };
    let end = match &pool.end {
        Some(e) => match parse_ip(c, e, "ip_pool.end") {
            Some(e) if !net.contains(e) => {
                c.err(
                    "ip_pool.end",
                    "ip-pool-in-machine-network",
                    format!("{e} is not inside {net}, the network of ip_pool.start"),
                );
                return;
            }
            Some(e) if to_u128(e) < to_u128(start) => {
                c.err(
                    "ip_pool.end",
                    "ip-pool-range",
                    format!("{e} is before ip_pool.start {start}"),
                );
                return;
            }
            Some(e) => e,
            None => return,
        },
        None => net.last(),
    };
    let mut next = Some(start);
    for (i, slot) in ips.iter_mut().enumerate() {
        if slot.is_some() || nodes[i].ip.is_some() {
            continue;
        }
        // Skip reserved addresses and the network/broadcast addresses.
        while let Some(ip) = next {
            let edge = ip.is_ipv4() && net.prefix < 31 && (ip == net.network() || ip == net.last());
            if to_u128(ip) > to_u128(end) || (!reserved.contains(&ip) && !edge) {
                break;
            }
            next = next_ip(ip);
        }
        match next {
            Some(ip) if to_u128(ip) <= to_u128(end) => {
                *slot = Some(ip);
                next = next_ip(ip);
            }
            _ => {
                c.err(
                    format!("nodes[{i}].ip"),
                    "ip-pool-exhausted",
                    format!("ip_pool {start}–{end} has no free address left for this node"),
                );
                next = None;
            }
        }
    }
}

fn check_proxy(
    c: &mut Ctx,
    p: &ProxyOpt,
    cluster: &[Option<Cidr>],
    service: &[Option<Cidr>],
) -> PlanProxy {
    if p.http_proxy.is_none() && p.https_proxy.is_none() {
        c.err(
            "proxy",
            "proxy-url",
            "give http_proxy or https_proxy (or both)",
        );
    }
    for (opt, value, schemes) in [
        ("http_proxy", &p.http_proxy, &["http"][..]),
        ("https_proxy", &p.https_proxy, &["http", "https"][..]),
    ] {
        let Some(v) = value else { continue };
        match parse_url(v) {
            Err(e) => c.err(format!("proxy.{opt}"), "proxy-url", e),
            Ok((scheme, host)) => {
                if !schemes.contains(&scheme.as_str()) {
                    c.err(
                        format!("proxy.{opt}"),
                        "proxy-url",
                        format!(
                            "scheme '{scheme}' is not allowed (use {})",
                            schemes.join(" or ")
                        ),
                    );
                }
                if let Ok(ip) = host.parse::<IpAddr>() {
                    if cluster
                        .iter()
                        .chain(service)
                        .flatten()
                        .any(|n| n.contains(ip))
                    {
                        c.err(
                            format!("proxy.{opt}"),
                            "proxy-url",
                            format!("proxy IP {ip} is inside the cluster or service network"),
                        );
                    }
                }
            }
        }
    }
    let entries = p.no_proxy.clone().unwrap_or_default();
    for (i, e) in entries.iter().enumerate() {
        let ok = if e == "*" {
            entries.len() == 1
        } else {
            let d = e.strip_prefix('.').unwrap_or(e).to_ascii_lowercase();
            e.parse::<IpAddr>().is_ok() || Cidr::parse(e).is_ok() || is_dns_subdomain(&d)
        };
        if !ok {
            c.err(format!("proxy.no_proxy[{i}]"), "no-proxy-entry",
                  format!("'{e}' must be a domain (optionally with a leading '.'), an IP, a CIDR, or '*' alone; no spaces or wildcards"));
        }
    }
    PlanProxy {
        http_proxy: p.http_proxy.clone(),
        https_proxy: p.https_proxy.clone(),
        no_proxy: (!entries.is_empty()).then(|| entries.join(",")),
    }
}

fn check_capabilities(
    c: &mut Ctx,
    cap: &CapabilitiesOpt,
    platform: &str,
    minor: u32,
) -> PlanCapabilities {
    let extra = cap
        .additional_enabled_capabilities
        .clone()
        .unwrap_or_default();
    for (i, name) in extra.iter().enumerate() {
        if !CAPABILITIES.contains(&name.as_str()) {
            c.err(
                format!("capabilities.additional_enabled_capabilities[{i}]"),
                "capability-known",
                format!(
                    "'{name}' is not a known capability ({})",
                    CAPABILITIES.join(", ")
                ),
            );
        }
    }
    let has = |n: &str| extra.iter().any(|x| x == n);
    if let Some(b) = &cap.baseline_capability_set {
        if !BASELINE_SETS.contains(&b.as_str()) {
            c.err(
                "capabilities.baseline_capability_set",
                "capability-known",
                format!(
                    "'{b}' is not a known baseline ({})",
                    BASELINE_SETS.join(", ")
                ),
            );
        }
        if b == "None" {
            if minor >= 16 && !has("Ingress") {
                c.err(
                    "capabilities.additional_enabled_capabilities",
                    "capability-ingress",
                    "the Ingress capability must be enabled",
                );
            }
            if platform == "baremetal" && !has("baremetal") {
                c.err(
                    "capabilities.additional_enabled_capabilities",
                    "capability-baremetal",
                    "platform baremetal with baseline None requires the baremetal capability",
                );
            }
            if has("marketplace") && !has("OperatorLifecycleManager") {
                c.err(
                    "capabilities.additional_enabled_capabilities",
                    "capability-marketplace",
                    "marketplace requires OperatorLifecycleManager",
                );
            }
        }
    }
    PlanCapabilities {
        baseline_capability_set: cap.baseline_capability_set.clone(),
        additional_enabled_capabilities: extra,
    }
}

fn root_hints(c: &mut Ctx, h: &RootDeviceHintsOpt, i: usize) -> Value {
    let at = |f: &str| format!("nodes[{i}].root_device_hints.{f}");
    let mut m = Map::new();
    if let Some(d) = &h.device_name {
        let rest = d.strip_prefix("/dev/");
        let ok = match rest {
            None => false,
            Some(r) if r.contains('/') => d
                .strip_prefix("/dev/disk/by-path/")
                .is_some_and(|p| !p.is_empty() && !p.contains('/')),
            Some(r) => !r.is_empty(),
        };
        if !ok {
            c.err(
                at("device_name"),
                "root-device-hint",
                format!("'{d}' must start with /dev/ and nest only under /dev/disk/by-path/"),
            );
        }
        m.insert("deviceName".into(), json!(d));
    }
    if let Some(w) = &h.wwn {
        let hex = w.strip_prefix("0x").unwrap_or("");
        if !((hex.len() == 16 || hex.len() == 32) && hex.chars().all(|x| x.is_ascii_hexdigit())) {
            c.err(at("wwn"), "root-device-hint", format!("'{w}' must be 0x followed by 16 or 32 hex digits (as Proxmox wwn= and lsblk show it)"));
        }
        m.insert("wwn".into(), json!(w));
    }
    if let Some(s) = &h.serial_number {
        if s.trim().is_empty() {
            c.err(at("serial_number"), "root-device-hint", "must not be empty");
        }
        m.insert("serialNumber".into(), json!(s));
    }
    if let Some(x) = &h.hctl {
        let parts: Vec<&str> = x.split(':').collect();
        if parts.len() != 4
            || !parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|d| d.is_ascii_digit()))
        {
            c.err(
                at("hctl"),
                "root-device-hint",
                format!("'{x}' must be Host:Channel:Target:Lun, e.g. 0:0:0:0"),
            );
        }
        m.insert("hctl".into(), json!(x));
    }
    if let Some(x) = &h.model {
        m.insert("model".into(), json!(x));
    }
    if let Some(x) = &h.vendor {
        m.insert("vendor".into(), json!(x));
    }
    if let Some(g) = h.min_size_gigabytes {
        if g <= 0 {
            c.err(
                at("min_size_gigabytes"),
                "root-device-hint",
                "must be a positive number of gigabytes",
            );
        }
        m.insert("minSizeGigabytes".into(), json!(g));
    }
    if let Some(r) = h.rotational {
        m.insert("rotational".into(), json!(r));
    }
    if m.is_empty() {
        c.err(
            format!("nodes[{i}].root_device_hints"),
            "root-device-hint",
            "give at least one hint (device_name, wwn, serial_number, …)",
        );
    }
    Value::Object(m)
}
