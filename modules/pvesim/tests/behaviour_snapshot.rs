//! VM snapshots as qemu-server serves them (`PVE/API2/Qemu.pm` over `PVE/AbstractConfig.pm`): create,
//! list, config, rollback and delete as tasks with UPIDs, the reserved names, the storage feature check,
//! the locks while the workers run and the parent chain.

mod common;

use common::{start, start_with, Api};
use pvesim::Options;
use serde_json::json;

fn snap(api: &Api, node: &str, vmid: u32, name: &str, extra: &[(&str, &str)]) -> String {
    let mut form = vec![("snapname", name)];
    form.extend_from_slice(extra);
    api.post(&format!("/nodes/{node}/qemu/{vmid}/snapshot"), &form)
        .upid()
}

fn names(api: &Api, node: &str, vmid: u32) -> Vec<(String, Option<String>)> {
    api.get(&format!("/nodes/{node}/qemu/{vmid}/snapshot"), &[])
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s.get("parent").and_then(|p| p.as_str()).map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn snapshots_chain_and_list_with_current_last() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = snap(
        &api,
        "pve2",
        101,
        "before-upgrade",
        &[("description", "4.19.7")],
    );
    assert!(upid.contains(":qmsnapshot:101:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(api.exit(&snap(&api, "pve2", 101, "nightly", &[])), "OK");
    assert_eq!(
        names(&api, "pve2", 101),
        vec![
            ("before-upgrade".into(), None),
            ("nightly".into(), Some("before-upgrade".into())),
            ("current".into(), Some("nightly".into())),
        ]
    );
    let list = api.get("/nodes/pve2/qemu/101/snapshot", &[]).ok().clone();
    assert_eq!(list[0]["description"], "4.19.7");
    assert_eq!(list[0]["vmstate"], 0);
    assert!(list[0]["snaptime"].as_u64().unwrap() > 1_700_000_000);
    let cfg = api
        .get("/nodes/pve2/qemu/101/snapshot/before-upgrade/config", &[])
        .ok()
        .clone();
    assert_eq!(cfg["scsi0"], "local-lvm:vm-101-disk-0,size=8G");
    assert_eq!(cfg["description"], "4.19.7");
    assert!(cfg.get("lock").is_none() && cfg.get("parent").is_none());
    assert_eq!(api.config("pve2", 101)["parent"], "nightly");
    assert_eq!(
        api.get("/nodes/pve2/qemu/101/snapshot/anything", &[]).ok(),
        &json!([{"cmd": "rollback"}, {"cmd": "config"}])
    );
}

#[test]
fn reserved_names_are_refused_by_the_api_and_a_used_name_by_the_worker() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post("/nodes/pve2/qemu/101/snapshot", &[("snapname", "current")]);
    assert_eq!(
        r.message(),
        "unable to use snapshot name 'current' (reserved name)\n"
    );
    let r = api.post("/nodes/pve2/qemu/101/snapshot", &[("snapname", "Pending")]);
    assert_eq!(
        r.message(),
        "unable to use snapshot name 'pending' (reserved name)\n"
    );
    assert_eq!(api.exit(&snap(&api, "pve2", 101, "s1", &[])), "OK");
    assert_eq!(
        api.exit(&snap(&api, "pve2", 101, "s1", &[])),
        "snapshot name 's1' already used"
    );
    // pve-configid: a name must start with a letter.
    let r = api.post("/nodes/pve2/qemu/101/snapshot", &[("snapname", "1st")]);
    assert!(r.error("snapname").contains("invalid"), "{:?}", r.data());
}

#[test]
fn a_disk_on_a_storage_without_snapshots_refuses_the_snapshot() {
    let sim = start();
    let api = Api::root(&sim);
    let feature = |f: &str| {
        api.get("/nodes/pve2/qemu/101/feature", &[("feature", f)])
            .ok()
            .clone()
    };
    let before = feature("snapshot");
    assert_eq!(before["hasFeature"], 1, "{before}");
    // A raw volume on a file storage cannot be snapshotted (qcow2 only); the CD-ROM does not count.
    let upid = api
        .post(
            "/nodes/pve2/qemu/101/config",
            &[
                ("scsi1", "nfs-shared:1,format=raw"),
                ("ide2", "none,media=cdrom"),
            ],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    let c = api.config("pve2", 101);
    assert!(
        c["scsi1"]
            .as_str()
            .unwrap()
            .starts_with("nfs-shared:101/vm-101-disk-0.raw"),
        "{c}"
    );
    // The feature check predicts it (vm_feature), and says where the disks are available.
    let after = feature("snapshot");
    assert_eq!(after["hasFeature"], 0, "{after}");
    assert_eq!(feature("copy")["hasFeature"], 1);
    assert_eq!(
        feature("clone")["hasFeature"],
        0,
        "a linked clone needs a template"
    );
    let nodes = after["nodes"].as_array().unwrap();
    assert!(nodes.len() < 3 && nodes.contains(&json!("pve2")), "{after}");
    assert_eq!(
        api.exit(&snap(&api, "pve2", 101, "s1", &[])),
        "snapshot feature is not available"
    );
    assert_eq!(names(&api, "pve2", 101), vec![("current".into(), None)]);
    let r = api.get(
        "/nodes/pve2/qemu/101/feature",
        &[("feature", "snapshot"), ("snapname", "s1")],
    );
    assert!(
        r.message().contains("snapshot 's1' does not exist"),
        "{:?}",
        r.body
    );
    let r = api.get("/nodes/pve2/qemu/101/feature", &[("feature", "backup")]);
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(api.config("pve2", 101).get("lock").is_none());
}

#[test]
fn rollback_stops_the_vm_restores_its_config_and_starts_it_only_when_asked() {
    let sim = start();
    let api = Api::root(&sim);
    assert_eq!(api.exit(&snap(&api, "pve1", 100, "clean", &[])), "OK");
    assert!(api
        .put("/nodes/pve1/qemu/100/config", &[("memory", "4096")])
        .data()
        .is_null());
    let upid = api
        .post("/nodes/pve1/qemu/100/snapshot/clean/rollback", &[])
        .upid();
    assert!(upid.contains(":qmrollback:100:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    let c = api.config("pve1", 100);
    assert_eq!(c["memory"], "2048", "the snapshot's config");
    assert_eq!(c["parent"], "clean");
    let status = api
        .get("/nodes/pve1/qemu/100/status/current", &[])
        .ok()
        .clone();
    assert_eq!(
        status["status"], "stopped",
        "a rollback without RAM leaves the VM stopped"
    );
    let upid = api
        .post(
            "/nodes/pve1/qemu/100/snapshot/clean/rollback",
            &[("start", "1")],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    let status = api
        .get("/nodes/pve1/qemu/100/status/current", &[])
        .ok()
        .clone();
    assert_eq!(status["status"], "running");
    assert_eq!(
        api.exit(
            &api.post("/nodes/pve1/qemu/100/snapshot/gone/rollback", &[])
                .upid()
        ),
        "snapshot 'gone' does not exist"
    );
}

#[test]
fn delete_relinks_the_chain_and_a_locked_vm_refuses() {
    let sim = start();
    let api = Api::root(&sim);
    for s in ["aa", "bb", "cc"] {
        assert_eq!(api.exit(&snap(&api, "pve2", 101, s, &[])), "OK");
    }
    let upid = api.delete("/nodes/pve2/qemu/101/snapshot/bb", &[]).upid();
    assert!(upid.contains(":qmdelsnapshot:101:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(
        names(&api, "pve2", 101),
        vec![
            ("aa".into(), None),
            ("cc".into(), Some("aa".into())),
            ("current".into(), Some("cc".into())),
        ]
    );
    let upid = api.delete("/nodes/pve2/qemu/101/snapshot/cc", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(api.config("pve2", 101)["parent"], "aa");
    assert_eq!(
        api.exit(&api.delete("/nodes/pve2/qemu/101/snapshot/cc", &[]).upid()),
        "snapshot 'cc' does not exist"
    );
    // Another lock (a backup) fails the worker and is left as it was.
    sim.with_sim(|s| {
        s.vms
            .get_mut(&101)
            .unwrap()
            .conf
            .insert("lock".into(), "backup".into());
    });
    assert_eq!(
        api.exit(&api.delete("/nodes/pve2/qemu/101/snapshot/aa", &[]).upid()),
        "VM is locked (backup)"
    );
    assert_eq!(api.config("pve2", 101)["lock"], "backup");
}

#[test]
fn the_config_is_locked_while_a_snapshot_is_taken() {
    let sim = start_with(Options {
        time_scale: 1.0,
        ..Options::default()
    });
    let api = Api::root(&sim);
    let upid = snap(&api, "pve2", 101, "slow", &[]);
    assert_eq!(api.config("pve2", 101)["lock"], "snapshot");
    let r = api.put("/nodes/pve2/qemu/101/config", &[("memory", "2048")]);
    assert!(
        r.message().contains("VM is locked (snapshot)"),
        "{}",
        r.message()
    );
    sim.advance(std::time::Duration::from_secs(5));
    assert_eq!(api.exit(&upid), "OK");
    assert!(api.config("pve2", 101).get("lock").is_none());
}

#[test]
fn a_locked_vm_takes_no_snapshot_and_a_name_outside_pve_configid_is_a_parameter_error() {
    let sim = start();
    let api = Api::root(&sim);
    // `snapshot_prepare`'s `check_lock`: the worker fails and the other lock stays as it was.
    sim.with_sim(|s| {
        s.vms
            .get_mut(&101)
            .unwrap()
            .conf
            .insert("lock".into(), "backup".into());
    });
    assert_eq!(
        api.exit(&snap(&api, "pve2", 101, "before-upgrade", &[])),
        "VM is locked (backup)"
    );
    assert_eq!(api.config("pve2", 101)["lock"], "backup");
    assert_eq!(names(&api, "pve2", 101), vec![("current".into(), None)]);
    // `snapname` is a `pve-configid` of at most 40 characters, checked before any worker.
    for bad in ["before upgrade", "1st", &"a".repeat(41)] {
        let r = api.post("/nodes/pve2/qemu/101/snapshot", &[("snapname", bad)]);
        assert_eq!(r.status, 400, "{bad}: {}", r.message());
        assert!(!r.error("snapname").is_empty(), "{bad}");
    }
}

#[test]
fn a_failed_snapshot_worker_leaves_the_config_unlocked() {
    let sim = start();
    let api = Api::root(&sim);
    let fault: pvesim::Fault = serde_json::from_value(
        json!({"fail_tasks": {"type": "qmsnapshot", "count": 1, "message": "snapshot failed: injected"}}),
    )
    .unwrap();
    sim.inject(fault).unwrap();
    let upid = snap(&api, "pve2", 101, "s1", &[]);
    assert_eq!(api.exit(&upid), "snapshot failed: injected");
    // pve-guest-common `snapshot_create` cleans up (`snapshot_delete` with force): no stale `snapshot` lock.
    assert!(api.config("pve2", 101).get("lock").is_none());
    assert_eq!(names(&api, "pve2", 101), vec![("current".into(), None)]);
}
