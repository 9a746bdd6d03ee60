//! `DELETE /nodes/{node}/storage/{storage}/content/{volume}` — pve-storage's `delete`
//! (`src/PVE/API2/Storage/Content.pm`): `$real_volume_id`, `PVE::Storage::path` (the storage must
//! exist and the plugin must parse the volume name), the privilege check, then the `imgdel` worker
//! runs `PVE::Storage::vdisk_free` (`src/PVE/Storage.pm`).
//!
//! Upstream checks nothing else: neither `delete` nor `vdisk_free` asks whether a VM's config still
//! uses the volume (only `volume_is_base_and_used`, for linked-clone bases), so an ISO attached to a
//! VM is deleted all the same, and so is a disk. A volume that is not there is no error either:
//! the directory plugin's `free_image` warns (`disk image '…' does not exist`, the task ends
//! `WARNINGS: 1`) and LVM-thin's removes nothing and says nothing; the worker then prints
//! `Removed volume '…'` in both cases.

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::model::Storage;
use crate::sim::{Sim, Spawn};
use crate::tasks::{base_duration, Action, TaskResult};

/// A delete request as the handler parsed it.
pub struct DeleteVolume {
    pub node: String,
    pub storage: String,
    /// `{volume}` as given: a volume ID or, with the storage from the path, a volume name.
    pub volume: String,
    /// Seconds the call may wait for its task (`delay`, 1–30).
    pub delay: Option<u64>,
}

/// The volume the `imgdel` worker frees.
#[derive(Debug, Clone)]
pub struct FreeVolume {
    pub node: String,
    pub storage: String,
    /// Volume name without the storage (`iso/x.iso`, `vm-101-disk-0`).
    pub name: String,
}

/// What `delete` answers: the task's UPID, or `null` when `delay` saw it end well.
pub enum Answer {
    Upid(String),
    Done,
}

/// Checks the request and starts the `imgdel` worker.
pub fn start(sim: &mut Sim, who: &Principal, req: DeleteVolume) -> ReplyResult<Answer> {
    let (sid, name) = real_volume_id(&req.storage, &req.volume)?;
    // `PVE::Storage::path` → `storage_config`: "storage 'x' does not exist" (a die, 500).
    let st = sim
        .storage(&req.node, &sid)
        .ok_or_else(|| ErrorReply::die(format!("storage '{sid}' does not exist")))?;
    let (vtype, owner) = parse_volname(st, &name)?;
    // Backups of a VM: Datastore.AllocateSpace plus VM.Backup; everything else Datastore.Allocate.
    let path = format!("/storage/{sid}");
    match (vtype, owner) {
        ("backup", Some(vmid)) => {
            sim.access
                .require(who, &path, &["Datastore.AllocateSpace"], false)?;
            sim.access
                .require(who, &format!("/vms/{vmid}"), &["VM.Backup"], false)?;
        }
        _ => sim
            .access
            .require(who, &path, &["Datastore.Allocate"], false)?,
    }
    let id = match owner {
        Some(vmid) => format!("{vmid}@{sid}"),
        None => sid.clone(),
    };
    let upid = sim.spawn(
        who,
        Spawn {
            node: req.node.clone(),
            kind: "imgdel".to_string(),
            id,
            action: Action::DeleteVolume(FreeVolume {
                node: req.node,
                storage: sid,
                name,
            }),
            base_secs: base_duration("imgdel"),
            flock: None,
            fail: None,
        },
    );
    // `delay`: upstream polls the worker for up to that many seconds and answers `null` when it
    // ended without error, dies with its status when it failed, else returns the UPID. The
    // simulator does not hold its state while time passes: it answers from the task as it stands
    // after the spawn (an instant task has ended; a longer one gets its UPID, as a slow PVE does).
    if req.delay.is_some() {
        if let Some(status) = sim.task(&upid).and_then(|t| t.exitstatus.clone()) {
            return if status == "OK" || status.starts_with("WARNINGS: ") {
                Ok(Answer::Done)
            } else {
                Err(ErrorReply::die(status))
            };
        }
    }
    Ok(Answer::Upid(upid))
}

/// `$real_volume_id`: a `{volume}` with a colon is a volume ID whose storage must be the path's
/// (`storage ID mismatch (a != b)`, a parameter error on `volume`); one without is a name on it.
fn real_volume_id(storage: &str, volume: &str) -> ReplyResult<(String, String)> {
    match volume.split_once(':') {
        Some((sid, name)) => {
            // `parse_volume_id`: `^([a-z][a-z0-9\-\_\.]*[a-z0-9]):(.+)$` (case-insensitive).
            let sid_ok = sid.len() >= 2
                && sid.starts_with(|c: char| c.is_ascii_alphabetic())
                && sid.ends_with(|c: char| c.is_ascii_alphanumeric())
                && sid
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !sid_ok || name.is_empty() {
                return Err(ErrorReply::param(
                    "volume",
                    format!("unable to parse volume ID '{volume}'"),
                ));
            }
            if sid != storage {
                return Err(ErrorReply::param(
                    "volume",
                    format!("storage ID mismatch ({sid} != {storage})"),
                ));
            }
            Ok((sid.to_string(), name.to_string()))
        }
        None => Ok((storage.to_string(), volume.to_string())),
    }
}

/// The plugin's `parse_volname`: the volume type and its owner VM, or the plugin's die.
/// Directory-like storages (`PVE/Storage/Plugin.pm`): `VMID/FILE`, `iso/*.iso|img`,
/// `vztmpl/*.tar*`, `backup/vzdump-*`, `snippets/*`, `import/*`; LVM(-thin), ZFS and RBD
/// (`LvmThinPlugin.pm` and its siblings): `vm-VMID-*` / `base-VMID-*` only.
fn parse_volname(st: &Storage, name: &str) -> ReplyResult<(&'static str, Option<u32>)> {
    let file = |prefix: &str| name.strip_prefix(prefix).filter(|f| !f.contains('/'));
    let lower = name.to_ascii_lowercase();
    if st.is_file_based() {
        if let Some((vmid, rest)) = name.split_once('/') {
            if let (Ok(vmid), false) = (vmid.parse::<u32>(), rest.is_empty()) {
                return Ok(("images", Some(vmid)));
            }
        }
        if file("iso/").is_some() && (lower.ends_with(".iso") || lower.ends_with(".img")) {
            return Ok(("iso", None));
        }
        if file("vztmpl/").is_some() && lower.contains(".tar") {
            return Ok(("vztmpl", None));
        }
        if let Some(f) = file("backup/") {
            let owner = f
                .strip_prefix("vzdump-")
                .and_then(|r| r.split_once('-'))
                .and_then(|(_, r)| r.split('-').next())
                .and_then(|v| v.parse().ok());
            return Ok(("backup", owner));
        }
        if file("snippets/").is_some() {
            return Ok(("snippets", None));
        }
        if file("import/").is_some() {
            return Ok(("import", None));
        }
        return Err(ErrorReply::die(format!(
            "unable to parse directory volume name '{name}'"
        )));
    }
    let owner = name
        .strip_prefix("vm-")
        .or_else(|| name.strip_prefix("base-"))
        .and_then(|r| r.split_once('-'))
        .filter(|(_, rest)| !rest.is_empty())
        .and_then(|(vmid, _)| vmid.parse::<u32>().ok());
    match owner {
        Some(vmid) => Ok(("images", Some(vmid))),
        None => {
            let family = match st.kind.as_str() {
                "zfspool" => "zfs",
                "rbd" => "rbd",
                _ => "lvm",
            };
            Err(ErrorReply::die(format!(
                "unable to parse {family} volume name '{name}'"
            )))
        }
    }
}

/// The `imgdel` worker: `vdisk_free` (`activate_storage` dies on a disabled storage), then the
/// worker's own line.
pub fn finish(sim: &mut Sim, v: FreeVolume, log: &mut Vec<String>) -> TaskResult {
    let st = sim
        .storage_mut(&v.node, &v.storage)
        .ok_or_else(|| format!("storage '{}' does not exist", v.storage))?;
    if !st.enabled {
        return Err(format!("storage '{}' is disabled", v.storage).into());
    }
    let file_based = st.is_file_based();
    let mut warnings = 0;
    if st.volumes.remove(&v.name).is_none() && file_based {
        // The directory plugin's `free_image`; the path is the storage's directory layout.
        log.push(format!(
            "WARN: disk image '{}' does not exist",
            file_path(&v.storage, &v.name)
        ));
        warnings += 1;
    }
    log.push(format!("Removed volume '{}:{}'", v.storage, v.name));
    Ok(warnings)
}

/// Where the directory plugin keeps a volume (`filesystem_path`): `template/iso/`,
/// `template/cache/`, `dump/`, `images/`, … under the storage's path (`local` is `/var/lib/vz`,
/// other storages are shown under `/mnt/pve/<id>`, where PVE mounts network storages).
fn file_path(sid: &str, name: &str) -> String {
    let root = if sid == "local" {
        "/var/lib/vz".to_string()
    } else {
        format!("/mnt/pve/{sid}")
    };
    let (kind, rest) = name.split_once('/').unwrap_or(("", name));
    let dir = match kind {
        "iso" => "template/iso",
        "vztmpl" => "template/cache",
        "backup" => "dump",
        "snippets" => "snippets",
        "import" => "import",
        _ => return format!("{root}/images/{name}"),
    };
    format!("{root}/{dir}/{rest}")
}

#[cfg(test)]
mod tests {
    use super::{file_path, real_volume_id};

    #[test]
    fn volume_ids_and_names() {
        assert_eq!(
            real_volume_id("local", "local:iso/a.iso").unwrap(),
            ("local".into(), "iso/a.iso".into())
        );
        assert_eq!(
            real_volume_id("local", "iso/a.iso").unwrap(),
            ("local".into(), "iso/a.iso".into())
        );
        let e = real_volume_id("local", "nfs-shared:iso/a.iso").unwrap_err();
        assert_eq!(e.status, 400);
        assert!(real_volume_id("local", "1x:iso/a.iso").is_err());
        assert_eq!(
            file_path("local", "iso/a.iso"),
            "/var/lib/vz/template/iso/a.iso"
        );
        assert_eq!(
            file_path("nfs", "101/vm-101-disk-0.qcow2"),
            "/mnt/pve/nfs/images/101/vm-101-disk-0.qcow2"
        );
    }
}
