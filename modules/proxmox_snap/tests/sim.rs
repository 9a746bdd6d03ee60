//! proxmox_snap against the in-process Proxmox simulator: the lab seed plus a cluster `c1` of three
//! VMs (tags `c1` and the owner tag `proxshift-c1`), one VM tagged `c1` only (not owned) and, where a
//! test needs one, a VM whose disk cannot be snapshotted. The module body runs through
//! `ansible_module::execute` as the binary does; the request log shows what was written.

use module_testkit::TestModule;
use pvesim::{Fault, SimHandle, Simulator};
use serde_json::{json, Value};

const TOKEN: &str = "5e1e0c5a-7d2b-4c4e-9a51-000000000001";

fn vm_yaml(vmid: u32, tags: &str, disk: &str, running: bool) -> String {
    format!(
        "  - vmid: {vmid}\n    node: pve1\n    running: {running}\n    config:\n      name: c1-n{vmid}\n      \
         memory: \"4096\"\n      scsi0: \"{disk}\"\n      tags: \"{tags}\"\n"
    )
}

/// The lab at the release under test, with VMs 201-203 of cluster c1 (203 running when asked),
/// 209 tagged `c1` without the owner tag, and `extra` seed VMs.
fn sim(running_203: bool, extra: &str) -> SimHandle {
    let mut seed = pvesim::lab::seed_under_test();
    let mut y = String::from("vms:\n");
    for vmid in [201, 202, 203] {
        let disk = format!("local-lvm:vm-{vmid}-disk-0,size=8G");
        y.push_str(&vm_yaml(
            vmid,
            "c1;proxshift-c1",
            &disk,
            vmid == 203 && running_203,
        ));
    }
    y.push_str(&vm_yaml(
        209,
        "c1",
        "local-lvm:vm-209-disk-0,size=8G",
        false,
    ));
    y.push_str(extra);
    seed.vms
        .extend(pvesim::Seed::from_yaml(&y).expect("seed").vms);
    Simulator::start(pvesim::Config::with_seed(seed)).expect("simulator starts")
}

fn module(sim: &SimHandle, mut args: Value) -> Value {
    args["api_host"] = json!(sim.url());
    args["api_token_id"] = json!("root@pam!pvesim");
    args["api_token_secret"] = json!(TOKEN);
    args["_ansible_diff"] = json!(true);
    TestModule::new(
        "proxmox_snap",
        proxmox_snap::argument_spec(),
        proxmox_snap::run,
    )
    .hiding(TOKEN)
    .run(&args)
    .0
}

fn cluster(snapname: &str) -> Value {
    json!({"tags": ["c1"], "owner_tag": "proxshift-c1", "snapname": snapname})
}

fn with(mut base: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

fn snapshots(sim: &SimHandle, vmid: u32) -> Vec<String> {
    sim.with_sim(|s| s.vms[&vmid].snapshots.keys().cloned().collect())
}

fn snapshot_writes(sim: &SimHandle) -> Vec<String> {
    sim.writes()
        .iter()
        .filter(|w| w.path.contains("/snapshot"))
        .map(|w| format!("{} {}", w.method, w.path))
        .collect()
}

#[test]
fn a_cluster_snapshot_is_taken_of_owned_vms_only_and_once() {
    let sim = sim(false, "");
    let r = module(
        &sim,
        with(cluster("restore-1"), json!({"_ansible_check_mode": true})),
    );
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(r["have"], json!([201, 202, 203]));
    assert_eq!(
        r["msg"],
        "snapshot 'restore-1' would be taken of 3 VMs; 0 VMs had it already"
    );
    assert!(sim.writes().is_empty(), "check mode: {:?}", sim.writes());

    let r = module(&sim, cluster("restore-1"));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(r["vms"][0]["action"], "created");
    assert_eq!(r["diff"]["after"]["c1-n201 (201)"], json!(["restore-1"]));
    assert_eq!(r["diff"]["before"]["c1-n201 (201)"], json!([]));
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("left alone, without the owner tag 'proxshift-c1': c1-n209 (209)"),
        "{r:#}"
    );
    for vmid in [201, 202, 203] {
        assert_eq!(snapshots(&sim, vmid), ["restore-1"]);
    }
    assert!(snapshots(&sim, 209).is_empty());
    let desc = sim.with_sim(|s| s.vms[&201].snapshots["restore-1"]["description"].clone());
    assert_eq!(desc, proxmox_snap::plan::MARKER);

    sim.clear_requests();
    let r = module(&sim, cluster("restore-1"));
    assert_eq!(r["changed"], json!(false), "{r:#}");
    assert_eq!(r["vms"][1]["action"], "exists");
    assert_eq!(r["msg"], "snapshot 'restore-1' is on 3 VMs already");
    assert!(sim.writes().is_empty());
}

#[test]
fn retention_removes_only_this_modules_older_snapshots_of_the_series() {
    let sim = sim(false, "");
    let keep2 = |name: &str| with(cluster(name), json!({"vmid": null, "retention": 2}));
    for name in ["restore-1", "restore-2"] {
        assert_eq!(module(&sim, keep2(name))["changed"], json!(true));
        sim.advance(std::time::Duration::from_secs(60));
    }
    // A snapshot someone took by hand with a name of the series: never pruned.
    let r = module(
        &sim,
        with(
            json!({"vmid": 201, "owner_tag": "proxshift-c1", "snapname": "restore-x"}),
            json!({}),
        ),
    );
    assert_eq!(r["changed"], json!(true));
    sim.with_sim(|s| {
        let d = s
            .vms
            .get_mut(&201)
            .unwrap()
            .snapshots
            .get_mut("restore-x")
            .unwrap();
        d.insert("description".into(), "by hand".into());
    });
    sim.advance(std::time::Duration::from_secs(60));

    let r = module(
        &sim,
        with(keep2("restore-3"), json!({"_ansible_check_mode": true})),
    );
    assert_eq!(r["vms"][0]["pruned"], json!(["restore-1"]), "{r:#}");
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .ends_with("3 older snapshots would be removed"),
        "{r}"
    );

    sim.clear_requests();
    let r = module(&sim, keep2("restore-3"));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(
        snapshots(&sim, 201),
        ["restore-2", "restore-3", "restore-x"]
    );
    assert_eq!(snapshots(&sim, 202), ["restore-2", "restore-3"]);
    assert_eq!(
        r["vms"][0]["snapshots"],
        json!(["restore-2", "restore-x", "restore-3"])
    );
    let w = snapshot_writes(&sim);
    assert_eq!(
        w[..2],
        [
            "POST /nodes/pve1/qemu/201/snapshot".to_string(),
            "DELETE /nodes/pve1/qemu/201/snapshot/restore-1".to_string()
        ],
        "create first, then prune: {w:?}"
    );
}

#[test]
fn a_rollback_refuses_a_running_vm_before_any_write_and_force_allows_it() {
    let sim = sim(true, "");
    assert_eq!(module(&sim, cluster("restore-1"))["changed"], json!(true));
    sim.clear_requests();
    let rollback = with(cluster("restore-1"), json!({"state": "rollback"}));
    let r = module(&sim, rollback.clone());
    assert_eq!(r["failed"], json!(true), "{r:#}");
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("nothing was changed: c1-n203 (203) is running"),
        "{msg}"
    );
    assert!(msg.contains("set force=true"), "{msg}");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());

    let r = module(&sim, with(rollback.clone(), json!({"force": true})));
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(r["msg"], "3 VMs rolled back to 'restore-1'");
    assert_eq!(r["vms"][2]["action"], "rolled back");
    assert_eq!(snapshot_writes(&sim).len(), 3);
    let status = sim.with_sim(|s| s.vms[&203].running());
    assert!(!status, "a rollback without RAM leaves the VM stopped");

    let r = module(&sim, with(rollback, json!({"snapname": "never-taken"})));
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("c1-n201 (201) has no snapshot 'never-taken' to roll back to"),
        "{r}"
    );
}

#[test]
fn a_vm_that_cannot_take_a_snapshot_refuses_the_set_before_any_write() {
    // 204's disk is a raw file on a directory storage: PVE cannot snapshot it, and its
    // `feature` check says so before the first VM is snapshotted.
    let extra = vm_yaml(
        204,
        "c1;proxshift-c1",
        "local:204/vm-204-disk-0.raw,size=8G",
        false,
    );
    let sim = sim(false, &extra);
    for check_mode in [true, false] {
        let r = module(
            &sim,
            with(
                cluster("restore-1"),
                json!({"_ansible_check_mode": check_mode}),
            ),
        );
        assert_eq!(r["failed"], json!(true), "{r:#}");
        assert_eq!(r["changed"], json!(false));
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.starts_with("nothing was changed: c1-n204 (204) cannot be snapshotted: a disk is on a storage without snapshots"),
            "{msg}"
        );
    }
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}

#[test]
fn a_half_done_cluster_snapshot_says_which_vms_have_it() {
    // A failure no check predicts: the thin pool of 204 refuses the snapshot volume.
    let extra = vm_yaml(
        204,
        "c1;proxshift-c1",
        "local-lvm:vm-204-disk-0,size=8G",
        false,
    ) + &vm_yaml(
        205,
        "c1;proxshift-c1",
        "local-lvm:vm-205-disk-0,size=8G",
        false,
    );
    let sim = sim(false, &extra);
    sim.inject(Fault::FailTasks {
        kind: "qmsnapshot".into(),
        vmid: Some(204),
        count: 1,
        message: "lvcreate 'pve/snap_vm-204-disk-0_restore-1' error:   Cannot create new thin volume, free space in thin pool pve/data reached threshold.".into(),
    })
    .unwrap();
    let r = module(&sim, cluster("restore-1"));
    assert_eq!(r["failed"], json!(true), "{r:#}");
    assert_eq!(r["changed"], json!(true));
    let msg = r["msg"].as_str().unwrap();
    assert!(
        msg.contains("snapshot 'restore-1' on c1-n204 (204) failed"),
        "{msg}"
    );
    assert!(msg.contains("reached threshold"), "{msg}");
    assert!(
        msg.ends_with("is now on: c1-n201 (201), c1-n202 (202), c1-n203 (203); not on: c1-n204 (204), c1-n205 (205)"),
        "{msg}"
    );
    assert_eq!(r["have"], json!([201, 202, 203]));
    assert_eq!(r["vms"][4]["action"], "not reached");
    assert!(
        snapshots(&sim, 205).is_empty(),
        "no VM after the failure is touched"
    );
    assert!(!msg.contains(TOKEN));
}

#[test]
fn absent_removes_where_present_and_changes_nothing_after() {
    let sim = sim(false, "");
    module(
        &sim,
        with(cluster("restore-1"), json!({"tags": null, "vmid": 202})),
    );
    let absent = with(cluster("restore-1"), json!({"state": "absent"}));
    let r = module(&sim, absent.clone());
    assert_eq!(r["changed"], json!(true), "{r:#}");
    assert_eq!(
        r["msg"],
        "snapshot 'restore-1' removed from 1 VM; 2 VMs had none"
    );
    assert!(snapshots(&sim, 202).is_empty());
    assert_eq!(module(&sim, absent)["changed"], json!(false));
}

#[test]
fn bad_options_and_unowned_vms_are_refused_before_any_write() {
    let sim = sim(false, "");
    let r = module(&sim, cluster("before upgrade"));
    assert_eq!(
        r["msg"],
        "snapname 'before upgrade' is not a valid Proxmox snapshot name: only letters, digits, '_' and '-' are allowed"
    );
    assert!(
        sim.requests().is_empty(),
        "refused before the first request"
    );
    let r = module(
        &sim,
        json!({"name": "c1-n209", "owner_tag": "proxshift-c1", "snapname": "ab"}),
    );
    assert!(
        r["msg"]
            .as_str()
            .unwrap()
            .contains("c1-n209 (209) does not carry the owner tag 'proxshift-c1'"),
        "{r}"
    );
    let r = module(&sim, json!({"tags": ["nobody"], "snapname": "ab"}));
    assert_eq!(r["failed"], json!(true), "{r}");
    assert!(sim.writes().is_empty(), "{:?}", sim.writes());
}
