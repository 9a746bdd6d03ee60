//! Backups and restores as PVE serves them (pve-manager `PVE/API2/VZDump.pm` over `PVE/VZDump.pm`;
//! qemu-server `PVE/API2/Qemu.pm` `create_vm` with `archive`): the `vzdump` task, the archive in the
//! storage's `backup` content with its notes, the `backup` lock, `mode=stop`, `prune-backups`, the
//! volume's deletion and the `qmrestore` task, onto a new VMID or over the VM with `force`.

mod common;

use common::{enc, start, start_with, Api};
use pvesim::Options;
use serde_json::Value;

fn backup(api: &Api, node: &str, vmid: &str, extra: &[(&str, &str)]) -> String {
    let mut form = vec![("vmid", vmid), ("storage", "local")];
    form.extend_from_slice(extra);
    api.post(&format!("/nodes/{node}/vzdump"), &form).upid()
}

fn backups(api: &Api, node: &str) -> Vec<Value> {
    api.get(
        &format!("/nodes/{node}/storage/local/content"),
        &[("content", "backup")],
    )
    .ok()
    .as_array()
    .unwrap()
    .clone()
}

#[test]
fn a_backup_is_a_vzdump_task_and_an_archive_with_notes_in_the_backup_content() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = backup(
        &api,
        "pve2",
        "101",
        &[
            ("compress", "zstd"),
            (
                "notes-template",
                "{{guestname}} on {{node}} ({{vmid}}, {{cluster}})",
            ),
        ],
    );
    assert!(upid.contains(":vzdump:101:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    let list = backups(&api, "pve2");
    assert_eq!(list.len(), 1, "{list:?}");
    let b = &list[0];
    let volid = b["volid"].as_str().unwrap();
    assert!(
        volid.starts_with("local:backup/vzdump-qemu-101-") && volid.ends_with(".vma.zst"),
        "{volid}"
    );
    // YYYY_MM_DD-HH_MM_SS
    let stamp = &volid["local:backup/vzdump-qemu-101-".len()..volid.len() - ".vma.zst".len()];
    assert_eq!(stamp.len(), 19, "{stamp}");
    assert_eq!(&stamp[4..5], "_");
    assert_eq!(&stamp[10..11], "-");
    assert_eq!(b["format"], "vma.zst");
    assert_eq!(b["vmid"], 101);
    assert_eq!(b["subtype"], "qemu");
    assert_eq!(b["notes"], "spare on pve2 (101, lab)");
    assert_eq!(b["size"], 8u64 << 30);
    assert!(b["ctime"].as_u64().unwrap() > 1_700_000_000);
    // Only backups are listed under content=backup; the disk images are not.
    let all = api
        .get(
            "/nodes/pve2/storage/local-lvm/content",
            &[("content", "backup")],
        )
        .ok()
        .clone();
    assert_eq!(all, serde_json::json!([]));
}

#[test]
fn the_vm_is_locked_backup_while_it_is_saved_and_another_lock_fails_it() {
    let sim = start_with(Options {
        time_scale: 1.0,
        ..Options::default()
    });
    let api = Api::root(&sim);
    let upid = backup(&api, "pve2", "101", &[]);
    assert_eq!(api.config("pve2", 101)["lock"], "backup");
    sim.advance(std::time::Duration::from_secs(10));
    assert_eq!(api.exit(&upid), "OK");
    assert!(api.config("pve2", 101).get("lock").is_none());

    sim.with_sim(|s| {
        let vm = s.vms.get_mut(&101).unwrap();
        vm.conf.insert("lock".into(), "snapshot".into());
    });
    let upid = backup(&api, "pve2", "101", &[]);
    sim.advance(std::time::Duration::from_secs(10));
    assert_eq!(api.exit(&upid), "job errors");
    let log = api.task_log(&upid).join("\n");
    assert!(
        log.contains("ERROR: Backup of VM 101 failed - VM is locked (snapshot)"),
        "{log}"
    );
    assert_eq!(
        api.config("pve2", 101)["lock"],
        "snapshot",
        "left as it was"
    );
}

#[test]
fn a_storage_without_backup_content_is_refused() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post(
        "/nodes/pve2/vzdump",
        &[("vmid", "101"), ("storage", "local-lvm")],
    );
    assert!(
        r.message()
            .contains("storage 'local-lvm' does not support backups"),
        "{}",
        r.message()
    );
}

#[test]
fn stop_mode_restarts_a_running_vm_and_keep_last_prunes_older_archives() {
    let sim = start();
    let api = Api::root(&sim);
    for _ in 0..2 {
        let upid = backup(
            &api,
            "pve1",
            "100",
            &[("mode", "stop"), ("prune-backups", "keep-last=1")],
        );
        assert_eq!(api.exit(&upid), "OK");
        let log = api.task_log(&upid).join("\n");
        assert!(log.contains("stopping virtual guest 100"), "{log}");
        sim.advance(std::time::Duration::from_secs(60));
    }
    let status = api
        .get("/nodes/pve1/qemu/100/status/current", &[])
        .ok()
        .clone();
    assert_eq!(
        status["status"], "running",
        "started again after the backup"
    );
    let list = backups(&api, "pve1");
    assert_eq!(list.len(), 1, "keep-last=1: {list:?}");
}

#[test]
fn an_archive_is_deleted_like_any_volume() {
    let sim = start();
    let api = Api::root(&sim);
    assert_eq!(api.exit(&backup(&api, "pve2", "101", &[])), "OK");
    let volid = backups(&api, "pve2")[0]["volid"]
        .as_str()
        .unwrap()
        .to_string();
    let upid = api
        .delete(
            &format!("/nodes/pve2/storage/local/content/{}", enc(&volid)),
            &[],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    assert!(backups(&api, "pve2").is_empty());
    // A restore from it now finds nothing.
    let r = api.post("/nodes/pve2/qemu", &[("vmid", "150"), ("archive", &volid)]);
    assert!(
        r.message()
            .contains(&format!("volume '{volid}' does not exist")),
        "{}",
        r.message()
    );
}

#[test]
fn a_restore_makes_the_vm_again_onto_a_new_vmid_or_over_it_with_force() {
    let sim = start();
    let api = Api::root(&sim);
    assert_eq!(api.exit(&backup(&api, "pve2", "101", &[])), "OK");
    let volid = backups(&api, "pve2")[0]["volid"]
        .as_str()
        .unwrap()
        .to_string();

    let upid = api
        .post("/nodes/pve2/qemu", &[("vmid", "150"), ("archive", &volid)])
        .upid();
    assert!(upid.contains(":qmrestore:150:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    let c = api.config("pve2", 150);
    assert_eq!(c["name"], "spare");
    assert_eq!(c["memory"], "1024");
    assert_eq!(c["scsi0"], "local-lvm:vm-150-disk-0,size=8G");

    // Over the VM itself: refused without force, then its config and disks as saved.
    assert!(api
        .put("/nodes/pve2/qemu/101/config", &[("memory", "4096")])
        .data()
        .is_null());
    let r = api.post("/nodes/pve2/qemu", &[("vmid", "101"), ("archive", &volid)]);
    assert_eq!(
        r.message(),
        "unable to restore VM 101 - VM 101 already exists on node 'pve2'\n"
    );
    let upid = api
        .post(
            "/nodes/pve2/qemu",
            &[("vmid", "101"), ("archive", &volid), ("force", "1")],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    let c = api.config("pve2", 101);
    assert_eq!(c["memory"], "1024");
    assert_eq!(c["scsi0"], "local-lvm:vm-101-disk-0,size=8G");
    assert!(c.get("lock").is_none());

    // A running VM is never overwritten.
    assert_eq!(
        api.exit(&api.post("/nodes/pve2/qemu/101/status/start", &[]).upid()),
        "OK"
    );
    let r = api.post(
        "/nodes/pve2/qemu",
        &[("vmid", "101"), ("archive", &volid), ("force", "1")],
    );
    assert_eq!(r.message(), "unable to restore VM 101 - vm is running\n");
}
