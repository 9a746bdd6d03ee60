//! The shapes community.proxmox's inventory plugin (`plugins/inventory/proxmox.py`, 1.4.0) gives its
//! host vars, so that `compose`/`groups`/`keyed_groups` written for it work unchanged with ours
//! (pure). What it does, and what is copied here:
//! - a var's name is `to_safe(facts_prefix + key.lower())`: every character but `[A-Za-z0-9_]`
//!   becomes `_`, spaces are dropped (`_fact`, `to_safe`);
//! - each config key is a var (`_get_vm_config`): a property string whose comma-separated parts all
//!   hold `=` becomes a dict (`net0: virtio=BC:..,bridge=vmbr0` → `proxmox_net0.bridge`), except
//!   `description`; disk keys (`rootfs` and every key starting with `virtio`, `sata`, `ide`, `scsi` —
//!   `scsihw` included, as upstream) get `disk_image=` in front first, so `scsi0: local-lvm:vm-1-disk-0,size=32G`
//!   becomes `{disk_image, size}`; the raw `lxc` list of pairs becomes a dict without the `lxc.` prefix;
//!   numbers stay numbers;
//! - `agent_interfaces`: `{name, mac-address, ip-addresses: ["<ip>/<prefix>"]}` per guest-agent
//!   interface (`_get_agent_network_interfaces`), set only when there is one;
//! - `lxc_interfaces`: `{name, hwaddr, inet, inet6}` per container interface, `inet`/`inet6` only
//!   when present (`_get_lxc_interfaces`), set only when there is one.

use pve_client::power::GuestInterface;
use serde_json::{json, Map, Value};

/// community.proxmox's `to_safe`: spaces dropped, every other character but `[A-Za-z0-9_]` → `_`.
pub fn to_safe(word: &str) -> String {
    word.chars()
        .filter(|c| *c != ' ')
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The host var name of `key` (`_fact`): `to_safe(prefix + key.lower())`.
pub fn fact_name(prefix: &str, key: &str) -> String {
    to_safe(&format!("{prefix}{}", key.to_lowercase()))
}

/// Is `key` a disk key whose value community.proxmox prefixes with `disk_image=`?
fn is_disk_key(key: &str) -> bool {
    key == "rootfs"
        || ["virtio", "sata", "ide", "scsi"]
            .iter()
            .any(|p| key.starts_with(p))
}

/// The value community.proxmox gives the config key `key` (see the module documentation).
pub fn config_fact(key: &str, value: &Value) -> Value {
    if key == "lxc" {
        if let Value::Array(pairs) = value {
            return Value::Object(lxc_pairs(pairs));
        }
    }
    let Value::String(text) = value else {
        return value.clone();
    };
    let text = if is_disk_key(key) {
        format!("disk_image={text}")
    } else {
        text.clone()
    };
    if key == "description" || !text.split(',').all(|part| part.contains('=')) {
        return Value::String(text);
    }
    let mut dict = Map::new();
    for part in text.split(',') {
        if let Some((k, v)) = part.split_once('=') {
            dict.insert(k.to_string(), Value::String(v.to_string()));
        }
    }
    Value::Object(dict)
}

/// The raw `lxc` config entries (`[["lxc.apparmor.profile", "unconfined"], ...]`) as a dict, the
/// `lxc.` prefix dropped.
fn lxc_pairs(pairs: &[Value]) -> Map<String, Value> {
    let mut out = Map::new();
    for pair in pairs {
        if let Some([Value::String(k), v]) = pair.as_array().map(Vec::as_slice) {
            let k = k.strip_prefix("lxc.").unwrap_or(k);
            out.insert(k.to_string(), v.clone());
        }
    }
    out
}

/// A VM's guest-agent interfaces as community.proxmox lists them; `None` when there are none.
pub fn agent_interfaces(ifaces: &[GuestInterface]) -> Option<Value> {
    if ifaces.is_empty() {
        return None;
    }
    let list = ifaces
        .iter()
        .map(|i| {
            let addrs: Vec<String> = i
                .addresses
                .iter()
                .map(|a| format!("{}/{}", a.ip, a.prefix))
                .collect();
            json!({"name": i.name, "mac-address": i.mac.clone().unwrap_or_default(), "ip-addresses": addrs})
        })
        .collect();
    Some(Value::Array(list))
}

/// A running container's interfaces as community.proxmox lists them; `None` when there are none.
pub fn lxc_interfaces(ifaces: &[Value]) -> Option<Value> {
    if ifaces.is_empty() {
        return None;
    }
    let list = ifaces
        .iter()
        .map(|i| {
            let mut o = Map::new();
            for key in ["name", "hwaddr", "inet", "inet6"] {
                match i.get(key) {
                    Some(v) => {
                        o.insert(key.into(), v.clone());
                    }
                    // `name` and `hwaddr` are always there upstream (it indexes them).
                    None if key == "name" || key == "hwaddr" => {
                        o.insert(key.into(), Value::Null);
                    }
                    None => {}
                }
            }
            Value::Object(o)
        })
        .collect();
    Some(Value::Array(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_strings_become_dicts_as_upstream() {
        let f = |k: &str, v: Value| config_fact(k, &v);
        assert_eq!(
            f(
                "net0",
                json!("virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1")
            ),
            json!({"virtio": "BC:24:11:00:00:01", "bridge": "vmbr0", "firewall": "1"})
        );
        // Disks: the volume has no key, upstream names it disk_image.
        assert_eq!(
            f("scsi0", json!("local-lvm:vm-100-disk-0,size=32G,ssd=1")),
            json!({"disk_image": "local-lvm:vm-100-disk-0", "size": "32G", "ssd": "1"})
        );
        assert_eq!(
            f("rootfs", json!("local-lvm:subvol-200-disk-0,size=8G")),
            json!({"disk_image": "local-lvm:subvol-200-disk-0", "size": "8G"})
        );
        // `scsihw` starts with `scsi`: upstream treats it as a disk too.
        assert_eq!(
            f("scsihw", json!("virtio-scsi-single")),
            json!({"disk_image": "virtio-scsi-single"})
        );
        // Only when every part holds `=`; a value with `=` inside a part splits at the first.
        assert_eq!(f("cpu", json!("host")), json!("host"));
        assert_eq!(
            f("mp0", json!("local-lvm:vm-1-disk-1,mp=/srv")),
            json!("local-lvm:vm-1-disk-1,mp=/srv")
        );
        assert_eq!(
            f("boot", json!("order=scsi0;net0")),
            json!({"order": "scsi0;net0"})
        );
        assert_eq!(
            f("ipconfig0", json!("ip=10.0.0.5/24,gw=10.0.0.1")),
            json!({"ip": "10.0.0.5/24", "gw": "10.0.0.1"})
        );
        assert_eq!(
            f("args", json!("-smbios type=1,x=y")),
            json!({"-smbios type": "1", "x": "y"})
        );
        // description stays text; numbers stay numbers; tags have no `=`.
        assert_eq!(f("description", json!("a=b,c=d")), json!("a=b,c=d"));
        assert_eq!(f("cores", json!(4)), json!(4));
        assert_eq!(
            f("tags", json!("proxshift-sno;worker")),
            json!("proxshift-sno;worker")
        );
        assert_eq!(f("agent", json!("1")), json!("1"));
        assert_eq!(
            f("agent", json!("enabled=1,fstrim_cloned_disks=1")),
            json!({"enabled": "1", "fstrim_cloned_disks": "1"})
        );
        assert_eq!(f("name", json!("")), json!(""));
        assert_eq!(
            f(
                "lxc",
                json!([["lxc.apparmor.profile", "unconfined"], ["lxc.cap.drop", ""]])
            ),
            json!({"apparmor.profile": "unconfined", "cap.drop": ""})
        );
    }

    #[test]
    fn names_are_safe_and_lower_case() {
        assert_eq!(fact_name("proxmox_", "net0"), "proxmox_net0");
        assert_eq!(fact_name("pve-", "Some Key.x"), "pve_somekey_x");
    }

    #[test]
    fn interfaces_take_upstream_shapes() {
        let ifaces: Vec<GuestInterface> = serde_json::from_value(json!([
            {"name": "lo", "ip-addresses": [{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}]},
            {"name": "eth0", "hardware-address": "bc:24:11:00:00:01",
             "ip-addresses": [{"ip-address": "10.1.0.1", "ip-address-type": "ipv4", "prefix": 24},
                              {"ip-address": "fe80::1", "ip-address-type": "ipv6", "prefix": 64}]}
        ]))
        .unwrap();
        assert_eq!(
            agent_interfaces(&ifaces).unwrap(),
            json!([
                {"name": "lo", "mac-address": "", "ip-addresses": ["127.0.0.1/8"]},
                {"name": "eth0", "mac-address": "bc:24:11:00:00:01", "ip-addresses": ["10.1.0.1/24", "fe80::1/64"]}
            ])
        );
        assert_eq!(agent_interfaces(&[]), None);
        let ct = vec![
            json!({"name": "eth0", "hwaddr": "bc:24:11:aa:00:01", "inet": "10.2.0.5/24", "extra": 1}),
            json!({"name": "lo", "hwaddr": "00:00:00:00:00:00", "inet6": "::1/128"}),
        ];
        assert_eq!(
            lxc_interfaces(&ct).unwrap(),
            json!([
                {"name": "eth0", "hwaddr": "bc:24:11:aa:00:01", "inet": "10.2.0.5/24"},
                {"name": "lo", "hwaddr": "00:00:00:00:00:00", "inet6": "::1/128"}
            ])
        );
        assert_eq!(lxc_interfaces(&[]), None);
    }
}
