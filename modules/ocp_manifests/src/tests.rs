//! Module-level tests: one failing case per validation rule, golden files, the CRD schema check and
//! the whole module run (check mode, idempotence, diff masking, ISO via the installer test double).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::formats::tests::{TEST_CERT, TEST_SSH_KEY};
use crate::model::Topology;
use crate::plan::fixtures::*;
use crate::plan::plan;

// --- valid shapes and topology ----------------------------------------------------------------

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

#[test]
fn names_openshift_accepts_are_accepted() {
    // The original forced names to start with "ocp"; any DNS label up to 54 characters is fine.
    ok_plan(&with(compact(), "cluster_name", json!("prod-east-1")));
    ok_plan(&with(compact(), "cluster_name", json!("a".repeat(54))));
    ok_plan(&with(compact(), "cluster_name", json!("1cluster")));
}

#[test]
fn ip_pool_allocation_skips_reserved_addresses() {
    let mut v = ha();
    for n in v["nodes"].as_array_mut().unwrap() {
        n.as_object_mut().unwrap().remove("ip");
    }
    v["nodes"][2]["ip"] = json!("192.168.50.4");
    v["ip_pool"] = json!({"start": "192.168.50.2", "end": "192.168.50.9"});
    let p = ok_plan(&v);
    // .2 is DNS, .4 static, .5/.6 VIPs: free are .3, .7, .8, .9.
    let ips: Vec<&str> = p.hosts.iter().map(|h| h.ip.as_str()).collect();
    assert_eq!(
        ips,
        [
            "192.168.50.3",
            "192.168.50.7",
            "192.168.50.4",
            "192.168.50.8",
            "192.168.50.9"
        ]
    );
    // One node more than the pool holds.
    v["nodes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "worker-2", "mac": "bc:24:11:00:00:06"}));
    fails(v.clone(), "nodes[5].ip", "ip-pool-exhausted");
    fails(
        set(v.clone(), "/ip_pool/start", json!("10.0.0.1")),
        "ip_pool.start",
        "ip-pool-in-machine-network",
    );
    fails(
        set(v, "/ip_pool/end", json!("192.168.50.1")),
        "ip_pool.end",
        "ip-pool-range",
    );
    // Without a pool an IP is required.
    let mut v = compact();
    v["nodes"][1].as_object_mut().unwrap().remove("ip");
    fails(v, "nodes[1].ip", "node-ip-required");
}

#[test]
fn all_errors_are_reported_at_once() {
    let v = with(
        with(
            with(compact(), "cluster_name", json!("Bad_Name")),
            "base_domain",
            json!("-x"),
        ),
        "pull_secret",
        json!("{}"),
    );
    let rules: Vec<&str> = problems(&v).iter().map(|p| p.rule).collect();
    assert_eq!(
        rules,
        [
            "cluster-name-dns-label",
            "base-domain-dns-subdomain",
            "pull-secret-format"
        ]
    );
}

// --- one failing test per rule ------------------------------------------------------------------

#[test]
fn rule_version() {
    fails(
        with(compact(), "version", json!("four")),
        "version",
        "version-format",
    );
    fails(
        with(compact(), "version", json!("4.12")),
        "version",
        "version-supported",
    );
}

#[test]
fn rule_cluster_name() {
    fails(
        with(compact(), "cluster_name", json!("Lab")),
        "cluster_name",
        "cluster-name-dns-label",
    );
    fails(
        with(compact(), "cluster_name", json!("lab.one")),
        "cluster_name",
        "cluster-name-dns-label",
    );
    fails(
        with(compact(), "cluster_name", json!("-lab")),
        "cluster_name",
        "cluster-name-dns-label",
    );
    fails(
        with(compact(), "cluster_name", json!("a".repeat(55))),
        "cluster_name",
        "cluster-name-length",
    );
}

#[test]
fn rule_base_domain() {
    fails(
        with(compact(), "base_domain", json!("Example..com")),
        "base_domain",
        "base-domain-dns-subdomain",
    );
    fails(
        with(compact(), "base_domain", json!("under_score.com")),
        "base_domain",
        "base-domain-dns-subdomain",
    );
    ok_plan(&with(compact(), "base_domain", json!("example.com.")));
    let long = (0..4).map(|_| "a".repeat(60)).collect::<Vec<_>>().join(".");
    fails(
        with(compact(), "base_domain", json!(long)),
        "base_domain",
        "cluster-domain-length",
    );
}

#[test]
fn rule_pull_secret() {
    fails(
        with(compact(), "pull_secret", json!("not json")),
        "pull_secret",
        "pull-secret-format",
    );
    fails(
        with(compact(), "pull_secret", json!({"auths": {}})),
        "pull_secret",
        "pull-secret-format",
    );
    fails(
        with(compact(), "pull_secret", json!({"registry": {}})),
        "pull_secret",
        "pull-secret-format",
    );
    // A dict is accepted and serialised (type json).
    ok_plan(&with(
        compact(),
        "pull_secret",
        json!({"auths": {"quay.io": {"auth": "eDp5"}}}),
    ));
}

#[test]
fn rule_ssh_key() {
    fails(
        with(compact(), "ssh_key", json!("ssh-rsa AAAA")),
        "ssh_key",
        "ssh-key-format",
    );
    fails(
        with(
            with(compact(), "ssh_key", json!(TEST_SSH_KEY)),
            "fips",
            json!(true),
        ),
        "ssh_key",
        "ssh-key-format",
    );
}

#[test]
fn rule_trust_bundle() {
    fails(
        with(
            compact(),
            "additional_trust_bundle",
            json!("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
        ),
        "additional_trust_bundle",
        "trust-bundle-pem",
    );
    ok_plan(&with(
        compact(),
        "additional_trust_bundle",
        json!(TEST_CERT),
    ));
}

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

#[test]
fn rule_service_network_size_and_count() {
    fails(
        with(compact(), "service_networks", json!(["172.0.0.0/11"])),
        "service_networks[0]",
        "service-network-size",
    );
    fails(
        with(
            compact(),
            "service_networks",
            json!(["172.30.0.0/16", "172.31.0.0/16"]),
        ),
        "service_networks",
        "service-network-count",
    );
}

#[test]
fn rule_single_address_family() {
    fails(
        with(compact(), "service_networks", json!(["fd02::/112"])),
        "service_networks[0]",
        "single-address-family",
    );
}

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

#[test]
fn rule_vips() {
    let mut v = compact();
    v.as_object_mut().unwrap().remove("api_vips");
    fails(v, "api_vips", "vip-required");
    fails(
        with(compact(), "ingress_vips", json!(["10.9.9.9"])),
        "ingress_vips[0]",
        "vip-in-machine-network",
    );
    fails(
        with(compact(), "ingress_vips", json!(["192.168.50.5"])),
        "api_vips[0]",
        "vip-distinct",
    );
    fails(
        with(compact(), "api_vips", json!(["192.168.50.11"])),
        "api_vips[0]",
        "vip-not-node-ip",
    );
    fails(
        with(
            compact(),
            "api_vips",
            json!(["192.168.50.5", "192.168.50.7"]),
        ),
        "api_vips",
        "vip-count",
    );
    fails(
        with(compact(), "api_vips", json!(["192.168.50.300"])),
        "api_vips[0]",
        "ip-syntax",
    );
    // UserManaged load balancers may sit outside the machine network.
    ok_plan(&with(
        with(compact(), "load_balancer", json!("UserManaged")),
        "api_vips",
        json!(["10.9.9.9"]),
    ));
}

#[test]
fn rule_platform_none_multi_node_needs_no_vips() {
    let mut v = with(compact(), "platform", json!("none"));
    v.as_object_mut().unwrap().remove("api_vips");
    let planned = plan(&options(&v));
    assert!(planned.problems.is_empty());
    assert!(
        planned.warnings.iter().any(|w| w.contains("load balancer")),
        "{:?}",
        planned.warnings
    );
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

#[test]
fn rule_macs() {
    fails(
        set(compact(), "/nodes/1/mac", json!("01:00:5e:00:00:01")),
        "nodes[1].mac",
        "mac-unicast",
    );
    fails(
        set(compact(), "/nodes/1/mac", json!("zz:24:11:00:00:01")),
        "nodes[1].mac",
        "mac-unicast",
    );
    fails(
        set(compact(), "/nodes/2/mac", json!("bc:24:11:00:00:01")),
        "nodes[2].mac",
        "mac-unique",
    );
}

#[test]
fn rule_node_ips() {
    fails(
        set(compact(), "/nodes/1/ip", json!("10.0.0.1")),
        "nodes[1].ip",
        "node-ip-in-machine-network",
    );
    fails(
        set(compact(), "/nodes/2/ip", json!("192.168.50.10")),
        "nodes[2].ip",
        "node-ip-unique",
    );
    fails(
        set(compact(), "/nodes/2/ip", json!("192.168.50.255")),
        "nodes[2].ip",
        "node-ip-host-address",
    );
    fails(
        set(compact(), "/nodes/2/ip", json!("192.168.50.1")),
        "nodes[2].ip",
        "node-ip-not-gateway",
    );
    fails(
        set(compact(), "/nodes/2/ip", json!("fe80::1")),
        "nodes[2].ip",
        "node-ip-in-machine-network",
    );
}

#[test]
fn rule_hostnames() {
    fails(
        set(compact(), "/nodes/1/name", json!("Master_1")),
        "nodes[1].name",
        "hostname-dns-label",
    );
    fails(
        set(compact(), "/nodes/2/name", json!("master-0")),
        "nodes[2].name",
        "hostname-unique",
    );
}

#[test]
fn rule_rendezvous_ip() {
    fails(
        with(ha(), "rendezvous_ip", json!("192.168.50.13")),
        "rendezvous_ip",
        "rendezvous-on-master",
    );
    assert_eq!(
        ok_plan(&with(ha(), "rendezvous_ip", json!("192.168.50.12"))).rendezvous_ip,
        "192.168.50.12"
    );
}

#[test]
fn rule_root_device_hints() {
    let hint = |h: Value| set(compact(), "/nodes/0/root_device_hints", h);
    fails(
        hint(json!({"device_name": "sda"})),
        "nodes[0].root_device_hints.device_name",
        "root-device-hint",
    );
    fails(
        hint(json!({"device_name": "/dev/disk/by-id/wwn-0x5"})),
        "nodes[0].root_device_hints.device_name",
        "root-device-hint",
    );
    fails(
        hint(json!({"wwn": "5000c500a0b1c2d3"})),
        "nodes[0].root_device_hints.wwn",
        "root-device-hint",
    );
    fails(
        hint(json!({"hctl": "0:0:0"})),
        "nodes[0].root_device_hints.hctl",
        "root-device-hint",
    );
    fails(
        hint(json!({"min_size_gigabytes": 0})),
        "nodes[0].root_device_hints.min_size_gigabytes",
        "root-device-hint",
    );
    fails(
        hint(json!({})),
        "nodes[0].root_device_hints",
        "root-device-hint",
    );
    let p = ok_plan(&hint(
        json!({"device_name": "/dev/disk/by-path/pci-0000:00:05.0-scsi-0:0:0:0", "wwn": "0x5000c500a0b1c2d3"}),
    ));
    assert_eq!(
        p.hosts[0].root_device_hints.as_ref().unwrap()["wwn"],
        json!("0x5000c500a0b1c2d3")
    );
}

#[test]
fn rule_ntp_dns_gateway_interface() {
    fails(
        with(compact(), "ntp_servers", json!(["ntp .lab"])),
        "ntp_servers[0]",
        "ntp-source",
    );
    ok_plan(&with(
        compact(),
        "ntp_servers",
        json!(["192.168.50.2", "Pool.NTP.org"]),
    ));
    fails(
        with(compact(), "dns_servers", json!(["dns.lab"])),
        "dns_servers[0]",
        "ip-syntax",
    );
    fails(
        with(compact(), "gateway", json!("10.0.0.1")),
        "gateway",
        "gateway-in-machine-network",
    );
    let mut v = compact();
    v.as_object_mut().unwrap().remove("gateway");
    fails(v, "gateway", "gateway-required");
    let mut v = compact();
    v.as_object_mut().unwrap().remove("dns_servers");
    fails(v, "dns_servers", "dns-servers-required");
    fails(
        with(
            compact(),
            "interface_name",
            json!("a-very-long-interface-name"),
        ),
        "interface_name",
        "interface-name",
    );
}

#[test]
fn rule_nmstate_network_config() {
    let good = json!({"interfaces": [{"name": "ens18", "type": "ethernet", "state": "up", "mac-address": "bc:24:11:00:00:01",
        "ipv4": {"enabled": true, "dhcp": false, "address": [{"ip": "192.168.50.10", "prefix-length": 24}]}}]});
    let p = ok_plan(&set(compact(), "/nodes/0/network_config", good.clone()));
    assert_eq!(p.hosts[0].network_config, good);
    let bad = set(
        good.clone(),
        "/interfaces/0/ipv4/address/0/prefix-length",
        json!(40),
    );
    fails(
        set(compact(), "/nodes/0/network_config", bad),
        "nodes[0].network_config.interfaces[0].ipv4.address[0].prefix-length",
        "nmstate-structure",
    );
    let typo = set(good.clone(), "/interfaces/0/ipv4/dhcpp", json!(false));
    fails(
        set(compact(), "/nodes/0/network_config", typo),
        "nodes[0].network_config",
        "nmstate-gen-conf",
    );
    // A bond of two NICs: both are listed in agent-config, and their MACs count for uniqueness.
    let bond = json!({"interfaces": [
        {"name": "bond0", "type": "bond", "state": "up", "link-aggregation": {"mode": "active-backup", "port": ["ens18", "ens19"]},
         "ipv4": {"enabled": true, "dhcp": false, "address": [{"ip": "192.168.50.10", "prefix-length": 24}]}},
        {"name": "ens18", "type": "ethernet", "state": "up", "mac-address": "BC:24:11:00:00:01"},
        {"name": "ens19", "type": "ethernet", "state": "up", "mac-address": "BC:24:11:00:01:01"}]});
    let p = ok_plan(&set(compact(), "/nodes/0/network_config", bond.clone()));
    let names: Vec<&str> = p.hosts[0]
        .interfaces
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(names, ["ens18", "ens19"]);
    let (_, ac) = crate::render::render(&p, None).unwrap();
    let doc: Value = serde_yaml_ng::from_str(&ac).unwrap();
    assert_eq!(
        doc["hosts"][0]["interfaces"][1]["macAddress"],
        json!("bc:24:11:00:01:01")
    );
    let clash = set(
        bond,
        "/interfaces/2/mac-address",
        json!("bc:24:11:00:00:02"),
    );
    fails(
        set(compact(), "/nodes/0/network_config", clash),
        "nodes[0].network_config",
        "mac-unique",
    );
    let other_mac = set(
        good.clone(),
        "/interfaces/0/mac-address",
        json!("bc:24:11:00:00:99"),
    );
    fails(
        set(compact(), "/nodes/0/network_config", other_mac),
        "nodes[0].network_config",
        "network-config-mac",
    );
    let other_ip = set(
        good,
        "/interfaces/0/ipv4/address/0/ip",
        json!("192.168.50.99"),
    );
    fails(
        set(compact(), "/nodes/0/network_config", other_ip),
        "nodes[0].network_config",
        "network-config-ip",
    );
}

#[test]
fn rule_proxy() {
    fails(
        with(compact(), "proxy", json!({"no_proxy": ["lab"]})),
        "proxy",
        "proxy-url",
    );
    fails(
        with(
            compact(),
            "proxy",
            json!({"http_proxy": "https://p.lab:3128"}),
        ),
        "proxy.http_proxy",
        "proxy-url",
    );
    fails(
        with(compact(), "proxy", json!({"https_proxy": "p.lab:3128"})),
        "proxy.https_proxy",
        "proxy-url",
    );
    fails(
        with(
            compact(),
            "proxy",
            json!({"http_proxy": "http://10.128.0.9:3128"}),
        ),
        "proxy.http_proxy",
        "proxy-url",
    );
    fails(
        with(
            compact(),
            "proxy",
            json!({"http_proxy": "http://p.lab:3128", "no_proxy": ["*.lab"]}),
        ),
        "proxy.no_proxy[0]",
        "no-proxy-entry",
    );
    fails(
        with(
            compact(),
            "proxy",
            json!({"http_proxy": "http://p.lab:3128", "no_proxy": ["*", ".lab"]}),
        ),
        "proxy.no_proxy[0]",
        "no-proxy-entry",
    );
}

#[test]
fn rule_mirrors() {
    fails(
        with(
            compact(),
            "image_digest_sources",
            json!([{"source": "quay.io/ocp:4.16", "mirrors": ["m.lab/ocp"]}]),
        ),
        "image_digest_sources[0].source",
        "mirror-repository",
    );
    fails(
        with(
            compact(),
            "image_digest_sources",
            json!([{"source": "quay.io/ocp", "mirrors": ["m.lab/ocp@sha256:ab"]}]),
        ),
        "image_digest_sources[0].mirrors[0]",
        "mirror-repository",
    );
    fails(
        with(
            compact(),
            "image_digest_sources",
            json!([{"source": "quay.io/ocp", "mirrors": []}]),
        ),
        "image_digest_sources[0].mirrors",
        "mirror-repository",
    );
}

#[test]
fn rule_capabilities() {
    fails(
        with(
            compact(),
            "capabilities",
            json!({"baseline_capability_set": "v9"}),
        ),
        "capabilities.baseline_capability_set",
        "capability-known",
    );
    fails(
        with(
            compact(),
            "capabilities",
            json!({"additional_enabled_capabilities": ["Consolee"]}),
        ),
        "capabilities.additional_enabled_capabilities[0]",
        "capability-known",
    );
    fails(
        with(
            compact(),
            "capabilities",
            json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["baremetal"]}),
        ),
        "capabilities.additional_enabled_capabilities",
        "capability-ingress",
    );
    fails(
        with(
            compact(),
            "capabilities",
            json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress"]}),
        ),
        "capabilities.additional_enabled_capabilities",
        "capability-baremetal",
    );
    fails(
        with(
            compact(),
            "capabilities",
            json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress", "baremetal", "marketplace"]}),
        ),
        "capabilities.additional_enabled_capabilities",
        "capability-marketplace",
    );
}

// --- golden files, schema, parse-back -----------------------------------------------------------

fn golden_cases() -> Vec<(&'static str, Value)> {
    let mut sno = sno();
    sno["ntp_servers"] = json!(["ntp.example.com", "192.168.50.2"]);
    sno["nodes"][0]["root_device_hints"] = json!({"wwn": "0x5000c500a0b1c2d3"});
    sno["version"] = json!("4.18");

    let mut compact = compact();
    for n in compact["nodes"].as_array_mut().unwrap() {
        n.as_object_mut().unwrap().remove("ip");
    }
    compact["ip_pool"] = json!({"start": "192.168.50.10"});
    compact["image_digest_sources"] = json!([
        {"source": "quay.io/openshift-release-dev/ocp-release", "mirrors": ["mirror.lab.example.com:5000/ocp4/openshift-release-dev"]},
        {"source": "quay.io/openshift-release-dev/ocp-v4.0-art-dev", "mirrors": ["mirror.lab.example.com:5000/ocp4/openshift-release-dev"]},
    ]);
    compact["additional_trust_bundle"] = json!(TEST_CERT);
    compact["additional_trust_bundle_policy"] = json!("Always");
    compact["nodes"][0]["root_device_hints"] = json!({"device_name": "/dev/sda"});

    let mut ha = ha();
    ha["proxy"] = json!({"http_proxy": "http://proxy.example.com:3128", "https_proxy": "http://proxy.example.com:3128",
                         "no_proxy": [".example.com", "192.168.50.0/24"]});
    ha["additional_trust_bundle"] = json!(TEST_CERT);
    ha["image_digest_sources"] = json!([{"source": "quay.io/openshift-release-dev/ocp-release", "mirrors": ["mirror.lab.example.com:5000/ocp4/release"]}]);
    ha["capabilities"] = json!({"baseline_capability_set": "vCurrent", "additional_enabled_capabilities": ["baremetal"]});
    ha["cluster_networks"] = json!([{"cidr": "10.128.0.0/14", "host_prefix": 23}]);
    // The inventory's spelling (`serial`) is an alias of serial_number.
    ha["nodes"][3]["root_device_hints"] = json!({"serial": "drive-scsi0"});
    vec![("sno", sno), ("compact", compact), ("ha", ha)]
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[test]
fn golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let schema = crate::schema::crd_schema();
    for (name, v) in golden_cases() {
        let plan = ok_plan(&v);
        let (ic, ac) = crate::render::render(&plan, None).unwrap();
        assert_eq!(crate::verify::verify(&plan, &ic, &ac), vec![], "{name}");
        // The install-config satisfies the upstream CRD (types, enums, required, no unknown fields).
        let doc: Value = serde_yaml_ng::from_str(&ic).unwrap();
        assert_eq!(
            crate::schema::validate(&schema, &doc),
            Vec::<String>::new(),
            "{name} install-config vs CRD"
        );
        // Secrets survive quoting exactly.
        assert_eq!(doc["pullSecret"], json!(PULL_SECRET));
        for (file, text) in [("install-config.yaml", &ic), ("agent-config.yaml", &ac)] {
            let path = golden_dir().join(name).join(file);
            if update {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, text).unwrap();
            } else {
                let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                    panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display())
                });
                assert_eq!(
                    text,
                    &want,
                    "{} differs from the golden file",
                    path.display()
                );
            }
        }
        // Deterministic: a second render is byte-identical.
        assert_eq!(crate::render::render(&plan, None).unwrap(), (ic, ac));
    }
}

#[test]
fn every_topology_with_every_option_passes_the_crd() {
    let schema = crate::schema::crd_schema();
    for (_, mut v) in golden_cases() {
        v["fips"] = json!(true);
        v["ssh_key"] = json!(null);
        v["load_balancer"] = json!("UserManaged");
        v["ovn_internal_join_subnet"] = json!("100.66.0.0/16");
        v["capabilities"] = json!({"baseline_capability_set": "None", "additional_enabled_capabilities": ["Ingress", "baremetal"]});
        let plan = ok_plan(&v);
        let (ic, _) = crate::render::render(&plan, None).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&ic).unwrap();
        assert_eq!(crate::schema::validate(&schema, &doc), Vec::<String>::new());
    }
}

#[test]
fn parse_back_catches_bad_user_templates() {
    let plan = ok_plan(&compact());
    let dir = std::env::temp_dir().join(format!("ocp-tpl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The original template's bug: single-quoted JSON breaks on a quote inside the secret.
    let builtin = include_str!("../templates/install-config.yaml.j2");
    let buggy = builtin.replace(
        "pullSecret: {{ pull_secret | yaml }}",
        "pullSecret: '{{ pull_secret }}'",
    );
    std::fs::write(dir.join("install-config.yaml.j2"), &buggy).unwrap();
    let (ic, ac) = crate::render::render(&plan, Some(&dir)).unwrap();
    let p = crate::verify::verify(&plan, &ic, &ac);
    assert!(
        p.iter()
            .any(|x| x.rule == "rendered-yaml-parses" || x.rule == "rendered-matches-input"),
        "{p:#?}"
    );
    assert!(!format!("{p:?}").contains("cGVsbC1zZWNyZXQ"));
    // Unknown fields (the original's rootVolume) and agent-config typos are caught too.
    let extra = builtin.replace(
        "  replicas: {{ control_plane_replicas }}",
        "  replicas: {{ control_plane_replicas }}\nrootVolume: {}",
    );
    std::fs::write(dir.join("install-config.yaml.j2"), &extra).unwrap();
    let agent =
        include_str!("../templates/agent-config.yaml.j2").replace("rendezvousIP:", "rendevousIP:");
    std::fs::write(dir.join("agent-config.yaml.j2"), agent).unwrap();
    let (ic, ac) = crate::render::render(&plan, Some(&dir)).unwrap();
    let rules: Vec<&str> = crate::verify::verify(&plan, &ic, &ac)
        .iter()
        .map(|x| x.rule)
        .collect::<Vec<_>>();
    assert!(rules.contains(&"rendered-known-fields"), "{rules:?}");
    assert!(rules.contains(&"agent-config-strict-keys"), "{rules:?}");
    let old_api = include_str!("../templates/agent-config.yaml.j2").replace("v1beta1", "v1beta9");
    std::fs::write(dir.join("agent-config.yaml.j2"), old_api).unwrap();
    let (ic, ac) = crate::render::render(&plan, Some(&dir)).unwrap();
    let rules: Vec<&str> = crate::verify::verify(&plan, &ic, &ac)
        .iter()
        .map(|x| x.rule)
        .collect();
    assert!(rules.contains(&"agent-config-api-version"), "{rules:?}");
    // A template referring to an undefined variable fails instead of rendering an empty value.
    std::fs::write(
        dir.join("agent-config.yaml.j2"),
        "x: {{ no_such_thing | yaml }}\n",
    )
    .unwrap();
    assert!(crate::render::render(&plan, Some(&dir))
        .unwrap_err()
        .contains("agent-config.yaml.j2"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// --- the whole module ---------------------------------------------------------------------------

mod module {
    use super::*;
    use std::fs;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ocp-mod-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn run(args: &Value, check: bool, diff: bool) -> Value {
        let mut a = args.clone();
        a["_ansible_check_mode"] = json!(check);
        a["_ansible_diff"] = json!(diff);
        let (r, _) = ansible_module::execute(
            &a.to_string(),
            "ocp_manifests",
            &crate::argument_spec(),
            crate::run,
        );
        r
    }

    fn assert_no_secret(r: &Value) {
        let text = r.to_string();
        for s in ["Y2FuYXJ5OnB1bGwtc2VjcmV0", "bWlycm9yOnMzY3IzdA", "auths"] {
            assert!(!text.contains(s), "secret fragment {s} in {text}");
        }
    }

    #[test]
    fn check_mode_then_write_then_rerun_then_change() {
        let dir = tmp("idem");
        let args = with(compact(), "output_dir", json!(dir.join("out")));
        let r = run(&args, true, true);
        assert_eq!(r["changed"], json!(true), "{r}");
        assert!(!dir.exists(), "check mode wrote something");
        assert_no_secret(&r);

        let r = run(&args, false, false);
        assert_eq!(r["changed"], json!(true), "{r}");
        assert_eq!(r["topology"], json!("compact"));
        assert_eq!(
            r["nodes"][0],
            json!({"name": "master-0", "role": "master", "ip": "192.168.50.10", "mac": "bc:24:11:00:00:01", "interface": "ens18"})
        );
        use std::os::unix::fs::PermissionsExt;
        let ic = dir.join("out/install-config.yaml");
        assert_eq!(
            fs::metadata(&ic).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            fs::metadata(dir.join("out")).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let doc: Value = serde_yaml_ng::from_str(&fs::read_to_string(&ic).unwrap()).unwrap();
        assert_eq!(doc["pullSecret"], json!(PULL_SECRET));
        assert_no_secret(&r);

        let r = run(&args, false, true);
        assert_eq!(r["changed"], json!(false), "{r}");
        assert!(r.get("diff").is_none());

        // A change: diff shows it with secrets masked, the old file is backed up.
        let changed = with(
            args.clone(),
            "pull_secret",
            json!(r#"{"auths":{"quay.io":{"auth":"bmV3LXNlY3JldC12YWx1ZQ=="}}}"#),
        );
        let r = run(
            &with(changed.clone(), "ingress_vips", json!(["192.168.50.7"])),
            false,
            true,
        );
        assert_eq!(r["changed"], json!(true));
        let diff = r["diff"].to_string();
        assert!(
            diff.contains("192.168.50.7") && diff.contains("192.168.50.6"),
            "{diff}"
        );
        assert!(
            !diff.contains("bmV3LXNlY3JldC12YWx1ZQ")
                && !diff.contains("Y2FuYXJ5")
                && !diff.contains("ssh-ed25519 AAAA"),
            "{diff}"
        );
        let backups = r["backups"].as_array().unwrap();
        assert_eq!(backups.len(), 1, "{r}");
        let old = fs::read_to_string(backups[0].as_str().unwrap()).unwrap();
        assert!(old.contains("192.168.50.6"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn validation_failure_names_fields_and_hides_secrets() {
        let args = with(
            with(compact(), "cluster_name", json!("Bad")),
            "api_vips",
            json!(["192.168.50.11"]),
        );
        let r = run(&args, false, false);
        assert_eq!(r["failed"], json!(true));
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("cluster_name:") && msg.contains("api_vips[0]:"),
            "{msg}"
        );
        assert_eq!(r["problems"].as_array().unwrap().len(), 2, "{r}");
        assert_no_secret(&r);
        assert_eq!(
            r["invocation"]["module_args"]["pull_secret"],
            json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
        );
    }

    fn double() -> String {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/bin/openshift-install")
            .display()
            .to_string()
    }

    #[test]
    fn agent_iso_built_reused_and_rebuilt() {
        let dir = tmp("iso");
        let args = with(
            with(sno(), "output_dir", json!(dir)),
            "openshift_install",
            json!(double()),
        );
        let r = run(&args, true, false);
        assert_eq!(
            (r["changed"].clone(), r["iso_built"].clone()),
            (json!(true), json!(false)),
            "{r}"
        );
        assert!(!dir.exists());

        let r = run(&args, false, false);
        assert_eq!(r["iso_built"], json!(true), "{r}");
        let iso = PathBuf::from(r["iso_path"].as_str().unwrap());
        assert_eq!(iso, dir.join("agent/agent.x86_64.iso"));
        assert!(fs::read_to_string(&iso)
            .unwrap()
            .starts_with("PROXSHIFT-TEST-DOUBLE-ISO"));
        let kubeconfig = fs::read_to_string(r["kubeconfig_path"].as_str().unwrap()).unwrap();
        assert!(
            kubeconfig.contains("https://api.lab.example.com:6443"),
            "{kubeconfig}"
        );
        let pw = fs::read_to_string(r["kubeadmin_password_path"].as_str().unwrap()).unwrap();
        assert_eq!(pw.len(), 23);
        // The rendered files stay in output_dir (the installer consumed only its copies).
        assert!(
            dir.join("install-config.yaml").is_file()
                && !dir.join("agent/install-config.yaml").exists()
        );

        let r = run(&args, false, false);
        assert_eq!(
            (r["changed"].clone(), r["iso_built"].clone()),
            (json!(false), json!(false)),
            "{r}"
        );
        assert!(r["iso_reason"].as_str().unwrap().starts_with("kept"));

        // Changed inputs rebuild; a too-old ISO rebuilds.
        let r = run(
            &with(args.clone(), "ntp_servers", json!(["192.168.50.2"])),
            false,
            false,
        );
        assert_eq!(r["iso_built"], json!(true), "{r}");
        let r = run(
            &with(
                with(args.clone(), "ntp_servers", json!(["192.168.50.2"])),
                "iso_max_age_hours",
                json!(0),
            ),
            false,
            false,
        );
        assert_eq!(r["iso_built"], json!(true), "{r}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn installer_failure_returns_log_tail_and_keeps_old_iso() {
        let dir = tmp("isofail");
        let args = with(
            with(sno(), "output_dir", json!(dir)),
            "openshift_install",
            json!(double()),
        );
        assert_eq!(run(&args, false, false)["iso_built"], json!(true));
        // "installer-fail" in the install-config is the double's failure marker.
        let r = run(
            &with(
                args.clone(),
                "base_domain",
                json!("installer-fail.example.com"),
            ),
            false,
            false,
        );
        assert_eq!(r["failed"], json!(true), "{r}");
        assert_eq!(
            r["changed"],
            json!(true),
            "the manifests were written before the build"
        );
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("test double failure marker"),
            "{r}"
        );
        assert!(r["installer_log_tail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("level=fatal")));
        assert!(
            dir.join("agent/agent.x86_64.iso").is_file(),
            "previous ISO kept"
        );
        let failed_dir = PathBuf::from(r["installer_dir"].as_str().unwrap());
        assert!(
            failed_dir.join(".openshift_install.log").is_file(),
            "failed build kept for inspection"
        );
        assert_no_secret(&r);
        let r = run(
            &with(
                args.clone(),
                "openshift_install",
                json!("/nonexistent/openshift-install"),
            ),
            false,
            false,
        );
        assert!(
            r["msg"].as_str().unwrap().contains("not an executable"),
            "{r}"
        );
        // The next successful build clears the failed work dir.
        let r = run(
            &with(args, "ntp_servers", json!(["192.168.50.2"])),
            false,
            false,
        );
        assert_eq!(r["iso_built"], json!(true), "{r}");
        assert!(!failed_dir.exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn nmstatectl_gc_runs_per_host_and_reports_its_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ocp-nmstatectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Stand-ins for nmstatectl: one accepts (and records its arguments), one fails like nmstatectl.
    let log = dir.join("calls");
    let ok = dir.join("ok");
    let bad = dir.join("bad");
    std::fs::write(
        &ok,
        format!(
            "#!/bin/sh\necho \"$1 $(grep -c mac-address \"$2\")\" >> {}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::write(
        &bad,
        "#!/bin/sh\necho 'NmstateError: InvalidArgument: Invalid YAML string' >&2\nexit 1\n",
    )
    .unwrap();
    for f in [&ok, &bad] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let plan = ok_plan(&ha());
    assert_eq!(crate::nmstatectl_check(None, &plan, &dir), Ok(false));
    assert_eq!(crate::nmstatectl_check(Some(&ok), &plan, &dir), Ok(true));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "gc 1\n".repeat(5));
    let problems = crate::nmstatectl_check(Some(&bad), &plan, &dir).unwrap_err();
    assert_eq!(problems.len(), 5);
    assert_eq!(problems[4].path, "nodes[4].network_config");
    assert_eq!(problems[4].rule, "nmstatectl-gc");
    assert!(
        problems[0].msg.contains("Invalid YAML string"),
        "{problems:?}"
    );
    // The temporary per-host files are gone.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sidecar_matches_spec() {
    let yaml = include_str!(
        "../../../ansible_collections/proxshift/openshift/plugins/modules/ocp_manifests.yml"
    );
    let problems = ansible_module::sidecar::check(&crate::argument_spec(), yaml, "ocp_manifests");
    assert!(
        problems.is_empty(),
        "sidecar drift:\n{}",
        problems.join("\n")
    );
}
