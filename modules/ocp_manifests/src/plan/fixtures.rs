//! Shared input builders for the plan tests: valid SNO, compact and HA clusters as a playbook
//! passes them, run through the real argument spec, and the assertions every rule test uses.

use serde_json::{json, Value};

use crate::formats::tests::TEST_SSH_KEY;
use crate::model::{Options, Plan};
use crate::plan::{plan, Problem};

pub(crate) const PULL_SECRET: &str = r#"{"auths":{"quay.io":{"auth":"Y2FuYXJ5OnB1bGwtc2VjcmV0LSdxdW90ZWQnLSJkcSI=","email":"it's@example.com"},"mirror.lab.example.com:5000":{"auth":"bWlycm9yOnMzY3IzdA=="}}}"#;

/// A valid compact (3 masters) cluster as a playbook would pass it.
pub(crate) fn compact() -> Value {
    json!({
        "cluster_name": "lab",
        "base_domain": "example.com",
        "version": "4.16",
        "machine_networks": ["192.168.50.0/24"],
        "gateway": "192.168.50.1",
        "dns_servers": ["192.168.50.2"],
        "api_vips": ["192.168.50.5"],
        "ingress_vips": ["192.168.50.6"],
        "nodes": [
            {"name": "master-0", "mac": "BC:24:11:00:00:01", "ip": "192.168.50.10"},
            {"name": "master-1", "mac": "BC:24:11:00:00:02", "ip": "192.168.50.11"},
            {"name": "master-2", "mac": "BC:24:11:00:00:03", "ip": "192.168.50.12"},
        ],
        "pull_secret": PULL_SECRET,
        "ssh_key": TEST_SSH_KEY.trim(),
        "output_dir": "/nonexistent",
    })
}

pub(crate) fn sno() -> Value {
    let mut v = compact();
    v["nodes"] = json!([{"name": "sno", "mac": "bc:24:11:00:00:09", "ip": "192.168.50.20"}]);
    v.as_object_mut().unwrap().remove("api_vips");
    v.as_object_mut().unwrap().remove("ingress_vips");
    v
}

pub(crate) fn ha() -> Value {
    let mut v = compact();
    let nodes = v["nodes"].as_array_mut().unwrap();
    nodes.push(json!({"name": "worker-0", "mac": "BC:24:11:00:00:04", "ip": "192.168.50.13"}));
    nodes.push(json!({"name": "worker-1", "mac": "BC:24:11:00:00:05", "ip": "192.168.50.14"}));
    v
}

/// Options as the module sees them: through the real argument spec (defaults, coercion).
pub(crate) fn options(v: &Value) -> Options {
    let raw = v.as_object().unwrap().clone();
    let r =
        ansible_module::validate::validate(&raw, &crate::argument_spec(), "ocp_manifests", false);
    assert!(r.errors.is_empty(), "spec errors: {:?}", r.errors);
    serde_json::from_value(Value::Object(r.params)).unwrap()
}

pub(crate) fn problems(v: &Value) -> Vec<Problem> {
    plan(&options(v)).problems
}

pub(crate) fn ok_plan(v: &Value) -> Plan {
    let p = plan(&options(v));
    assert!(
        p.problems.is_empty(),
        "unexpected problems: {:#?}",
        p.problems
    );
    p.plan.unwrap()
}

/// Assert that `v` fails with `rule` at `path` (and say what it did fail with otherwise).
#[track_caller]
pub(crate) fn fails(v: Value, path: &str, rule: &str) {
    let p = problems(&v);
    assert!(
        p.iter().any(|x| x.path == path && x.rule == rule),
        "expected {rule} at {path}, got {p:#?}"
    );
    let shown = p
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !shown.contains("cGVsbC1zZWNyZXQ") && !shown.contains("s3cr3t"),
        "secret leaked: {shown}"
    );
}

/// Set the value at a JSON pointer; the last key may be new.
pub(crate) fn set(mut v: Value, pointer: &str, x: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let slot = v.pointer_mut(parent).unwrap_or_else(|| panic!("{pointer}"));
    match slot {
        Value::Array(a) => a[key.parse::<usize>().unwrap()] = x,
        other => other[key] = x,
    }
    v
}

pub(crate) fn with(mut v: Value, key: &str, x: Value) -> Value {
    v[key] = x;
    v
}

/// The compact cluster in dual stack, IPv4 primary: every network list, VIP and node holds both
/// families.
pub(crate) fn dual_stack() -> Value {
    let mut v = compact();
    v["machine_networks"] = json!(["192.168.50.0/24", "fd00:50::/64"]);
    v["service_networks"] = json!(["172.30.0.0/16", "fd02::/112"]);
    v["cluster_networks"] = json!([{"cidr": "10.128.0.0/14", "host_prefix": 23},
                                   {"cidr": "fd01::/48", "host_prefix": 64}]);
    v["secondary_gateway"] = json!("fd00:50::1");
    v["dns_servers"] = json!(["192.168.50.2", "fd00:50::2"]);
    v["api_vips"] = json!(["192.168.50.5", "fd00:50::5"]);
    v["ingress_vips"] = json!(["192.168.50.6", "fd00:50::6"]);
    for (i, n) in v["nodes"].as_array_mut().unwrap().iter_mut().enumerate() {
        n["secondary_ip"] = json!(format!("fd00:50::{}", 10 + i));
    }
    v
}

/// `v` (the compact or SNO fixture) in single-stack IPv6: 192.168.50.x becomes fd00:50::x.
pub(crate) fn ipv6_only(v: Value) -> Value {
    let text = serde_json::to_string(&v)
        .unwrap()
        .replace("192.168.50.0/24", "fd00:50::/64")
        .replace("192.168.50.", "fd00:50::");
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["service_networks"] = json!(["fd02::/112"]);
    v["cluster_networks"] = json!([{"cidr": "fd01::/48", "host_prefix": 64}]);
    v
}
