//! Reading a Proxmox VM config as the API (and pvesim's state) writes it: values as text, the MACs of
//! its NICs, its disks, its tags and a label for messages. Pure.

use serde_json::{json, Value};

pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The MACs in a VM config's `netN` entries (`virtio=BC:24:11:…,bridge=vmbr0`), upper case.
pub fn config_macs(config: &Value) -> Vec<String> {
    let mut nets: Vec<(u32, String)> = config
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let idx = k.strip_prefix("net")?.parse::<u32>().ok()?;
            let mac = text(v).split(',').find_map(|p| {
                let (_, val) = p.split_once('=')?;
                (val.len() == 17 && val.matches(':').count() == 5).then(|| val.to_uppercase())
            })?;
            Some((idx, mac))
        })
        .collect();
    nets.sort();
    nets.into_iter().map(|(_, m)| m).collect()
}

/// Disks (`scsiN`, `virtioN`, `sataN`, `ideN`, `efidisk0`, `tpmstate0`) with a storage and a size;
/// CD-ROMs are not disks.
pub(crate) fn config_disks(config: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for (k, v) in config.as_object().into_iter().flatten() {
        let bus = k.trim_end_matches(|c: char| c.is_ascii_digit());
        if !["scsi", "virtio", "sata", "ide", "efidisk", "tpmstate"].contains(&bus) || bus == k {
            continue;
        }
        let s = text(v);
        if s.contains("media=cdrom") {
            continue;
        }
        let Some((storage, _)) = s.split(',').next().and_then(|vol| vol.split_once(':')) else {
            continue;
        };
        if let Some(size) = s.split(',').find_map(|p| p.strip_prefix("size=")) {
            out.push(json!({"storage": storage, "size": size}));
        }
    }
    out
}

pub(crate) fn vm_tags(vm: &Value) -> Vec<String> {
    text(&vm["config"]["tags"])
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(|t| t.to_ascii_lowercase())
        .collect()
}

pub(crate) fn vm_label(vm: &Value) -> String {
    match vm["config"]["name"].as_str() {
        Some(n) => format!("VM {} ({n}) on {}", vm["vmid"], text(&vm["node"])),
        None => format!("VM {} on {}", vm["vmid"], text(&vm["node"])),
    }
}
