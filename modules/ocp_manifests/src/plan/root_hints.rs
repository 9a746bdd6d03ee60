//! Root-device hints: installer field names, each hint in the form the installer accepts.

use serde_json::{json, Map, Value};

use crate::model::RootDeviceHintsOpt;

use super::context::Findings;

/// The hints of `nodes[i]` under the installer's names (`deviceName`, `serialNumber`, …); None when
/// no hint is given.
pub(super) fn check(c: &mut Findings, h: &RootDeviceHintsOpt, i: usize) -> Option<Value> {
    let at = |f: &str| format!("nodes[{i}].root_device_hints.{f}");
    let mut m = Map::new();
    if let Some(d) = &h.device_name {
        if !device_name_ok(d) {
            c.err(
                at("device_name"),
                "root-device-hint",
                format!("'{d}' must start with /dev/ and nest only under /dev/disk/by-path/"),
            );
        }
        m.insert("deviceName".into(), json!(d));
    }
    if let Some(w) = &h.wwn {
        if !wwn_ok(w) {
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
        if !hctl_ok(x) {
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
    // An empty hint set is no hint: the installer writes a host's `root-device-hints.yaml` only
    // when the hints marshal to something other than `{}` (pkg/asset/agent/agentconfig
    // `AgentHosts.HostConfigFiles`), and the agent then picks the installation disk itself.
    if m.is_empty() {
        c.warn(format!(
            "nodes[{i}].root_device_hints is empty: no hint is written and the agent chooses the installation disk"
        ));
        return None;
    }
    Some(Value::Object(m))
}

/// `/dev/NAME`, nested only as `/dev/disk/by-path/NAME`.
fn device_name_ok(d: &str) -> bool {
    match d.strip_prefix("/dev/") {
        None => false,
        Some(r) if r.contains('/') => d
            .strip_prefix("/dev/disk/by-path/")
            .is_some_and(|p| !p.is_empty() && !p.contains('/')),
        Some(r) => !r.is_empty(),
    }
}

/// `0x` and 16 or 32 hex digits.
fn wwn_ok(w: &str) -> bool {
    let hex = w.strip_prefix("0x").unwrap_or("");
    (hex.len() == 16 || hex.len() == 32) && hex.chars().all(|x| x.is_ascii_hexdigit())
}

/// Four `:`-separated decimal numbers.
fn hctl_ok(x: &str) -> bool {
    let parts: Vec<&str> = x.split(':').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|d| d.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::plan::fixtures::*;

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
        // AgentHosts.HostConfigFiles: `{}` is no hint at all, accepted and not rendered.
        let p = ok_plan(&hint(json!({})));
        assert!(p.hosts[0].root_device_hints.is_none());
        let (_, agent_config) = crate::render::render(&p, None).unwrap();
        let doc: Value = serde_yaml_ng::from_str(&agent_config).unwrap();
        assert!(doc["hosts"][0].get("rootDeviceHints").is_none());
        let p = ok_plan(&hint(
            json!({"device_name": "/dev/disk/by-path/pci-0000:00:05.0-scsi-0:0:0:0", "wwn": "0x5000c500a0b1c2d3"}),
        ));
        assert_eq!(
            p.hosts[0].root_device_hints.as_ref().unwrap()["wwn"],
            json!("0x5000c500a0b1c2d3")
        );
    }
}
