//! `GET /nodes/{node}/storage` — pve-storage's `storage_info`: what the listing says about a
//! storage beyond its configuration, where PVE releases differ.

use serde_json::{json, Value};

use crate::sim::{Generation, PveVersion};
use crate::vmconfig::storage_formats;

/// What `format=1` adds to a storage, per release (pve-storage `src/PVE/Storage.pm`,
/// `storage_info` with `$includeformat`):
/// - PVE 8 (pve-storage 8.x): `format: [{FMT: 1, …}, DEFAULT]`, the plugin's
///   `plugindata()->{format}`, and only for plugins that declare one (`DirPlugin`,
///   `NFSPlugin`, `CIFSPlugin`, `GlusterfsPlugin`, `ZFSPoolPlugin`, `BTRFSPlugin`; not
///   `LVMPlugin`, `LvmThinPlugin`, `RBDPlugin`, iSCSI).
/// - PVE 9.0: that `format` pair for every storage, from the plugin's `get_formats` (commit
///   e9e2497 "plugin: add get_formats() method", before 9.0.0).
/// - PVE 9.1 on (pve-storage 9.0.14, commit 6333922 "api: list: return 'formats' info in a
///   better structured way"): `formats: {supported: [sorted], default}` as well, `format` kept
///   as deprecated ("FIXME: deprecated, remove with 10.0").
pub fn add_format_info(version: PveVersion, kind: &str, o: &mut Value) {
    let (def, sup) = storage_formats(kind);
    let valid: serde_json::Map<String, Value> =
        sup.iter().map(|f| (f.to_string(), json!(1))).collect();
    match version.generation() {
        Generation::Pve8 => {
            const DECLARED: &[&str] = &["dir", "nfs", "cifs", "glusterfs", "zfspool", "btrfs"];
            if DECLARED.contains(&kind) {
                o["format"] = json!([valid, def]);
            }
        }
        Generation::Pve9 => {
            o["format"] = json!([valid, def]);
            if version.at_least(9, 1, 0) {
                let mut sorted = sup.to_vec();
                sorted.sort_unstable();
                o["formats"] = json!({"default": def, "supported": sorted});
            }
        }
    }
}
