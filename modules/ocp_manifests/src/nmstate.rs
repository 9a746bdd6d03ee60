//! Per-host nmstate `networkConfig`: generation from a node's MAC/IP/gateway/DNS/interface, and a
//! structural check of any nmstate document (ours, the user's, or one parsed back from a template).

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::{json, Map, Value};

use crate::net::{parse_mac, Cidr};

pub struct HostNet<'a> {
    pub interface: &'a str,
    pub mac: &'a str,
    /// The node's static addresses with their prefix lengths: one, or one per family (dual stack).
    pub addresses: &'a [(IpAddr, u8)],
    /// Default gateways; each becomes the default route of its family when the node has an
    /// address in that family.
    pub gateways: &'a [IpAddr],
    pub dns_servers: &'a [String],
}

/// One ethernet interface with static addresses (a family without one is disabled), DNS servers,
/// and a default route per family (main table 254).
pub fn generate(h: &HostNet) -> Value {
    let family = |v4: bool| -> Value {
        let list: Vec<Value> = h
            .addresses
            .iter()
            .filter(|(ip, _)| ip.is_ipv4() == v4)
            .map(|(ip, p)| json!({"ip": ip.to_string(), "prefix-length": p}))
            .collect();
        match (list.is_empty(), v4) {
            (true, _) => json!({"enabled": false}),
            (false, true) => json!({"enabled": true, "dhcp": false, "address": list}),
            (false, false) => {
                json!({"enabled": true, "dhcp": false, "autoconf": false, "address": list})
            }
        }
    };
    let mut iface = Map::new();
    iface.insert("name".into(), json!(h.interface));
    iface.insert("type".into(), json!("ethernet"));
    iface.insert("state".into(), json!("up"));
    iface.insert("mac-address".into(), json!(h.mac));
    iface.insert("ipv4".into(), family(true));
    iface.insert("ipv6".into(), family(false));
    let mut doc = Map::new();
    doc.insert("interfaces".into(), json!([Value::Object(iface)]));
    if !h.dns_servers.is_empty() {
        doc.insert(
            "dns-resolver".into(),
            json!({"config": {"server": h.dns_servers}}),
        );
    }
    let routes: Vec<Value> = h
        .gateways
        .iter()
        .filter(|gw| {
            h.addresses
                .iter()
                .any(|(ip, _)| ip.is_ipv4() == gw.is_ipv4())
        })
        .map(|gw| {
            let dest = if gw.is_ipv4() { "0.0.0.0/0" } else { "::/0" };
            json!({"destination": dest, "next-hop-address": gw.to_string(),
                   "next-hop-interface": h.interface, "table-id": 254})
        })
        .collect();
    if !routes.is_empty() {
        doc.insert("routes".into(), json!({ "config": routes }));
    }
    Value::Object(doc)
}

const TOP_KEYS: &[&str] = &[
    "interfaces",
    "routes",
    "dns-resolver",
    "route-rules",
    "ovs-db",
    "ovn",
    "hostname",
];
const IFACE_TYPES: &[&str] = &[
    "ethernet",
    "bond",
    "vlan",
    "linux-bridge",
    "ovs-bridge",
    "ovs-interface",
    "dummy",
    "loopback",
    "vrf",
    "infiniband",
    "mac-vlan",
    "mac-vtap",
    "vxlan",
    "veth",
    "team",
    "unknown",
];
const STATES: &[&str] = &["up", "down", "absent", "ignore"];

/// A Linux interface name: 1–15 bytes, no `/`, `:` or whitespace.
pub fn is_ifname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && !s.contains(['/', ':'])
        && !s.contains(char::is_whitespace)
        && s != "."
        && s != ".."
}

/// Structural problems of an nmstate document, each as (path below networkConfig, message).
pub fn check(doc: &Value) -> Vec<(String, String)> {
    let mut p: Vec<(String, String)> = Vec::new();
    let Some(top) = doc.as_object() else {
        return vec![(String::new(), "must be a mapping".into())];
    };
    for k in top.keys() {
        if !TOP_KEYS.contains(&k.as_str()) {
            p.push((
                k.clone(),
                format!("unknown nmstate section (known: {})", TOP_KEYS.join(", ")),
            ));
        }
    }
    let mut names = BTreeSet::new();
    match top.get("interfaces").and_then(Value::as_array) {
        None => p.push(("interfaces".into(), "must be a non-empty list".into())),
        Some(list) if list.is_empty() => {
            p.push(("interfaces".into(), "must be a non-empty list".into()))
        }
        Some(list) => {
            for (i, iface) in list.iter().enumerate() {
                check_interface(iface, &format!("interfaces[{i}]"), &mut names, &mut p);
            }
            // Second pass: references to other interfaces (VLAN base, bond ports) must resolve.
            for (i, iface) in list.iter().enumerate() {
                if let Some(base) = iface.pointer("/vlan/base-iface").and_then(Value::as_str) {
                    if !names.contains(base) {
                        p.push((
                            format!("interfaces[{i}].vlan.base-iface"),
                            format!("'{base}' is not a defined interface"),
                        ));
                    }
                }
                for key in ["/link-aggregation/port", "/bridge/port"] {
                    for (j, port) in iface
                        .pointer(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .enumerate()
                    {
                        let name = port
                            .as_str()
                            .or_else(|| port.get("name").and_then(Value::as_str))
                            .unwrap_or_default();
                        if !names.contains(name) {
                            let path = format!(
                                "interfaces[{i}].{}[{j}]",
                                key.trim_start_matches('/').replace('/', ".")
                            );
                            p.push((path, format!("'{name}' is not a defined interface")));
                        }
                    }
                }
            }
        }
    }
    if let Some(routes) = top.get("routes") {
        match routes.get("config").map(|c| c.as_array()) {
            Some(Some(list)) => {
                for (i, r) in list.iter().enumerate() {
                    check_route(r, &format!("routes.config[{i}]"), &names, &mut p);
                }
            }
            Some(None) => p.push(("routes.config".into(), "must be a list".into())),
            None => {}
        }
    }
    if let Some(dns) = top.get("dns-resolver") {
        let cfg = dns.get("config");
        match cfg.and_then(|c| c.get("server")).map(|s| s.as_array()) {
            Some(Some(servers)) => {
                for (i, s) in servers.iter().enumerate() {
                    if s.as_str().and_then(|x| x.parse::<IpAddr>().ok()).is_none() {
                        p.push((
                            format!("dns-resolver.config.server[{i}]"),
                            format!("{s} is not an IP address"),
                        ));
                    }
                }
            }
            Some(None) => p.push((
                "dns-resolver.config.server".into(),
                "must be a list of IP addresses".into(),
            )),
            None if cfg.is_none() => {
                p.push(("dns-resolver".into(), "needs a 'config' mapping".into()))
            }
            None => {}
        }
    }
    p
}

fn check_interface(
    iface: &Value,
    at: &str,
    names: &mut BTreeSet<String>,
    p: &mut Vec<(String, String)>,
) {
    let Some(o) = iface.as_object() else {
        p.push((at.into(), "must be a mapping".into()));
        return;
    };
    match o.get("name").and_then(Value::as_str) {
        Some(n) if is_ifname(n) => {
            if !names.insert(n.to_string()) {
                p.push((
                    format!("{at}.name"),
                    format!("interface '{n}' is defined twice"),
                ));
            }
        }
        Some(n) => p.push((
            format!("{at}.name"),
            format!("'{n}' is not a Linux interface name (1–15 chars, no '/', ':' or spaces)"),
        )),
        None => p.push((format!("{at}.name"), "is required".into())),
    }
    match o.get("type").and_then(Value::as_str) {
        Some(t) if IFACE_TYPES.contains(&t) => {
            if t == "vlan" {
                let id = o
                    .get("vlan")
                    .and_then(|v| v.get("id"))
                    .and_then(Value::as_u64);
                if id.is_none_or(|id| id > 4094)
                    || iface
                        .pointer("/vlan/base-iface")
                        .and_then(Value::as_str)
                        .is_none()
                {
                    p.push((
                        format!("{at}.vlan"),
                        "a vlan interface needs vlan.base-iface and vlan.id (0–4094)".into(),
                    ));
                }
            }
            if t == "bond"
                && iface
                    .pointer("/link-aggregation/mode")
                    .and_then(Value::as_str)
                    .is_none()
            {
                p.push((
                    format!("{at}.link-aggregation.mode"),
                    "a bond interface needs link-aggregation.mode".into(),
                ));
            }
        }
        Some(t) => p.push((
            format!("{at}.type"),
            format!("'{t}' is not an nmstate interface type"),
        )),
        None => p.push((format!("{at}.type"), "is required".into())),
    }
    if let Some(s) = o.get("state") {
        if !s.as_str().is_some_and(|s| STATES.contains(&s)) {
            p.push((
                format!("{at}.state"),
                format!("{s} is not one of {}", STATES.join(", ")),
            ));
        }
    }
    if let Some(m) = o.get("mac-address") {
        let why = match m.as_str() {
            None => Some("must be a string".to_string()),
            Some(m) => parse_mac(m).err().map(|e| e.to_string()),
        };
        if let Some(why) = why {
            p.push((format!("{at}.mac-address"), why));
        }
    }
    for (fam, max) in [("ipv4", 32u64), ("ipv6", 128u64)] {
        let Some(ipc) = o.get(fam) else { continue };
        let fat = format!("{at}.{fam}");
        let Some(ipo) = ipc.as_object() else {
            p.push((fat, "must be a mapping".into()));
            continue;
        };
        for flag in ["enabled", "dhcp", "autoconf"] {
            if ipo.get(flag).is_some_and(|v| !v.is_boolean()) {
                p.push((format!("{fat}.{flag}"), "must be true or false".into()));
            }
        }
        let addrs = ipo.get("address").map(|a| a.as_array());
        if let Some(None) = addrs {
            p.push((format!("{fat}.address"), "must be a list".into()));
        }
        let addrs = addrs.flatten().cloned().unwrap_or_default();
        if !addrs.is_empty() && ipo.get("dhcp").and_then(Value::as_bool) == Some(true) {
            p.push((
                format!("{fat}.address"),
                "static addresses together with dhcp: true".into(),
            ));
        }
        if !addrs.is_empty() && ipo.get("enabled").and_then(Value::as_bool) != Some(true) {
            p.push((
                format!("{fat}.enabled"),
                "must be true when addresses are given".into(),
            ));
        }
        for (j, a) in addrs.iter().enumerate() {
            let aat = format!("{fat}.address[{j}]");
            let ip = a
                .get("ip")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<IpAddr>().ok());
            match ip {
                Some(ip) if ip.is_ipv4() == (fam == "ipv4") => {}
                Some(_) => p.push((format!("{aat}.ip"), format!("is not an {fam} address"))),
                None => p.push((
                    format!("{aat}.ip"),
                    "is missing or not an IP address".into(),
                )),
            }
            if a.get("prefix-length")
                .and_then(Value::as_u64)
                .is_none_or(|l| l > max)
            {
                p.push((
                    format!("{aat}.prefix-length"),
                    format!("must be an integer 0–{max}"),
                ));
            }
        }
    }
}

fn check_route(r: &Value, at: &str, names: &BTreeSet<String>, p: &mut Vec<(String, String)>) {
    let dest = r
        .get("destination")
        .and_then(Value::as_str)
        .map(Cidr::parse);
    let dest = match dest {
        Some(Ok(c)) if c.is_network() => Some(c),
        Some(Ok(c)) => {
            p.push((
                format!("{at}.destination"),
                format!("'{c}' is not a network address"),
            ));
            None
        }
        Some(Err(e)) => {
            p.push((format!("{at}.destination"), e.to_string()));
            None
        }
        None => {
            p.push((format!("{at}.destination"), "is required".into()));
            None
        }
    };
    if let Some(hop) = r.get("next-hop-address") {
        match hop.as_str().and_then(|s| s.parse::<IpAddr>().ok()) {
            Some(ip) if dest.is_some_and(|d| d.addr.is_ipv4() != ip.is_ipv4()) => p.push((
                format!("{at}.next-hop-address"),
                "is not in the destination's address family".into(),
            )),
            Some(_) => {}
            None => p.push((
                format!("{at}.next-hop-address"),
                format!("{hop} is not an IP address"),
            )),
        }
    }
    if let Some(i) = r.get("next-hop-interface") {
        if !i.as_str().is_some_and(|n| names.contains(n)) {
            p.push((
                format!("{at}.next-hop-interface"),
                format!("{i} is not an interface defined in this networkConfig"),
            ));
        }
    }
    for key in ["table-id", "metric"] {
        if r.get(key).is_some_and(|v| v.as_u64().is_none()) {
            p.push((
                format!("{at}.{key}"),
                "must be a non-negative integer".into(),
            ));
        }
    }
}

/// Interfaces of a document as (name, lowercase MAC) pairs, for agent-config `interfaces[]`.
pub fn mac_interfaces(doc: &Value) -> Vec<(String, String)> {
    doc.get("interfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let name = i.get("name")?.as_str()?;
            let mac = parse_mac(i.get("mac-address")?.as_str()?).ok()?;
            Some((name.to_string(), mac))
        })
        .collect()
}

/// Whether the document configures the interface `name`: as an interface of its own, a bond's
/// port or a VLAN's base interface.
pub fn mentions_interface(doc: &Value, name: &str) -> bool {
    let is = |v: Option<&Value>| v.and_then(Value::as_str) == Some(name);
    doc.get("interfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|i| {
            is(i.get("name"))
                || is(i.pointer("/vlan/base-iface"))
                || i.pointer("/link-aggregation/port")
                    .and_then(Value::as_array)
                    .is_some_and(|ports| ports.iter().any(|p| is(Some(p))))
        })
}

/// Every static address of a document.
pub fn addresses(doc: &Value) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for iface in doc
        .get("interfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for fam in ["ipv4", "ipv6"] {
            for a in iface
                .pointer(&format!("/{fam}/address"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                out.extend(
                    a.get("ip")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<IpAddr>().ok()),
                );
            }
        }
    }
    out
}

/// Why the nmstate library rejects a networkConfig.
#[derive(Debug, thiserror::Error)]
pub enum GenConfError {
    #[error("nmstate cannot parse it: {0}")]
    Parse(#[source] serde_json::Error),
    #[error("nmstate cannot generate NetworkManager keyfiles: {0}")]
    Generate(#[source] ::nmstate::NmstateError),
}

/// The nmstate library's verdict, as `nmstatectl gc` gives it: parse the document as a
/// `NetworkState` and generate the NetworkManager keyfiles. Returns the keyfile names.
pub fn gen_conf(doc: &Value) -> Result<Vec<String>, GenConfError> {
    let state: ::nmstate::NetworkState =
        serde_json::from_value(doc.clone()).map_err(GenConfError::Parse)?;
    let conf = state.gen_conf().map_err(GenConfError::Generate)?;
    let mut names: Vec<String> = conf.into_values().flatten().map(|(name, _)| name).collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        generate(&HostNet {
            interface: "ens18",
            mac: "bc:24:11:00:00:01",
            addresses: &[("192.0.2.10".parse().unwrap(), 24)],
            gateways: &["192.0.2.1".parse().unwrap()],
            dns_servers: &["192.0.2.53".to_string()],
        })
    }

    #[test]
    fn generated_config_is_valid_and_complete() {
        let d = sample();
        assert_eq!(check(&d), vec![]);
        assert_eq!(d["routes"]["config"][0]["table-id"], json!(254));
        assert_eq!(
            d["interfaces"][0]["ipv4"]["address"][0]["prefix-length"],
            json!(24)
        );
        assert_eq!(
            mac_interfaces(&d),
            vec![("ens18".to_string(), "bc:24:11:00:00:01".to_string())]
        );
        assert_eq!(addresses(&d), vec!["192.0.2.10".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn ipv6_generation() {
        let d = generate(&HostNet {
            interface: "ens18",
            mac: "bc:24:11:00:00:01",
            addresses: &[("fd00::10".parse().unwrap(), 64)],
            gateways: &["fd00::1".parse().unwrap()],
            dns_servers: &[],
        });
        assert_eq!(check(&d), vec![]);
        assert_eq!(d["routes"]["config"][0]["destination"], json!("::/0"));
        assert_eq!(d["interfaces"][0]["ipv4"], json!({"enabled": false}));
        assert!(d.get("dns-resolver").is_none());
        assert_eq!(gen_conf(&d).unwrap(), vec!["ens18.nmconnection"]);
    }

    #[test]
    fn dual_stack_generation_has_both_families_and_default_routes() {
        let d = generate(&HostNet {
            interface: "ens18",
            mac: "bc:24:11:00:00:01",
            addresses: &[
                ("192.0.2.10".parse().unwrap(), 24),
                ("fd00::10".parse().unwrap(), 64),
            ],
            gateways: &["192.0.2.1".parse().unwrap(), "fd00::1".parse().unwrap()],
            dns_servers: &["192.0.2.53".to_string(), "fd00::53".to_string()],
        });
        assert_eq!(check(&d), vec![]);
        assert_eq!(
            d["interfaces"][0]["ipv4"]["address"][0]["ip"],
            json!("192.0.2.10")
        );
        assert_eq!(
            d["interfaces"][0]["ipv6"]["address"][0]["prefix-length"],
            json!(64)
        );
        assert_eq!(d["interfaces"][0]["ipv6"]["autoconf"], json!(false));
        let dests: Vec<&Value> = d["routes"]["config"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["destination"])
            .collect();
        assert_eq!(dests, [&json!("0.0.0.0/0"), &json!("::/0")]);
        assert_eq!(addresses(&d).len(), 2);
        assert_eq!(gen_conf(&d).unwrap(), vec!["ens18.nmconnection"]);
    }

    #[test]
    fn library_generates_keyfiles_or_says_why_not() {
        assert_eq!(gen_conf(&sample()).unwrap(), vec!["ens18.nmconnection"]);
        let mut typo = sample();
        typo["interfaces"][0]["ipv4"]["dhcpp"] = json!(true);
        assert!(gen_conf(&typo)
            .unwrap_err()
            .to_string()
            .contains("unknown field `dhcpp`"));
        let bond = json!({"interfaces": [
            {"name": "bond0", "type": "bond", "state": "up", "link-aggregation": {"mode": "lacp", "port": ["ens18"]}},
            {"name": "ens18", "type": "ethernet", "state": "up"}]});
        assert_eq!(check(&bond), vec![]);
        assert_eq!(
            gen_conf(&bond).unwrap(),
            vec!["bond0.nmconnection", "ens18.nmconnection"]
        );
        let mut bad_mode = bond.clone();
        bad_mode["interfaces"][0]["link-aggregation"]["mode"] = json!("fastest");
        assert!(gen_conf(&bad_mode)
            .unwrap_err()
            .to_string()
            .contains("unknown variant `fastest`"));
    }

    #[test]
    fn structural_errors_are_found() {
        let mut d = sample();
        d["interfaces"][0]["type"] = json!("ethernett");
        d["interfaces"][0]["mac-address"] = json!("01:00:5e:00:00:01");
        d["interfaces"][0]["ipv4"]["address"][0]["prefix-length"] = json!(33);
        d["routes"]["config"][0]["next-hop-interface"] = json!("eth9");
        d["routes"]["config"][0]["destination"] = json!("0.0.0.1/0");
        d["dns-resolver"]["config"]["server"] = json!(["dns.lab"]);
        d["bogus"] = json!(1);
        let paths: Vec<String> = check(&d).into_iter().map(|(p, _)| p).collect();
        for want in [
            "interfaces[0].type",
            "interfaces[0].mac-address",
            "interfaces[0].ipv4.address[0].prefix-length",
            "routes.config[0].next-hop-interface",
            "routes.config[0].destination",
            "dns-resolver.config.server[0]",
            "bogus",
        ] {
            assert!(paths.iter().any(|p| p == want), "{want} not in {paths:?}");
        }
        assert_eq!(check(&json!({"interfaces": []}))[0].0, "interfaces");
        let vlan = json!({"interfaces": [{"name": "ens18.10", "type": "vlan", "vlan": {"base-iface": "ens19", "id": 10}}]});
        assert_eq!(check(&vlan)[0].0, "interfaces[0].vlan.base-iface");
        let dhcp_and_static = json!({"interfaces": [{"name": "e", "type": "ethernet",
            "ipv4": {"enabled": true, "dhcp": true, "address": [{"ip": "10.0.0.1", "prefix-length": 24}]}}]});
        assert!(check(&dhcp_and_static)[0].1.contains("dhcp"));
    }
}
