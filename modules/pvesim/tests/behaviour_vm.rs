//! VM behaviours that bite real clients: UPIDs, normalisation, digest, locks, pending,
//! memory, agent, power outcomes, clone, resize, destroy, HA.

mod common;

use std::time::Duration;

use common::{enc, realtime, start, start_seed, start_with, Api, ROOT_PASSWORD};
use pvesim::Options;
use serde_json::{json, Value};

fn create(api: &Api, params: &[(&str, &str)]) -> String {
    api.post("/nodes/pve1/qemu", params).upid()
}

#[test]
fn create_returns_upid_and_normalises_config() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = create(
        &api,
        &[
            ("vmid", "200"),
            ("name", "master-0"),
            ("memory", "16384"),
            ("cores", "4"),
            ("bios", "ovmf"),
            ("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=0"),
            ("scsi0", "local-lvm:120,iothread=1,discard=on,format=raw"),
            ("ide2", "local:iso/agent.x86_64.iso,media=cdrom"),
            ("net0", "virtio,bridge=vmbr0,tag=10"),
            ("tags", "ocp;Zeta;alpha;OCP"),
            ("agent", "1"),
        ],
    );
    assert!(upid.starts_with("UPID:pve1:"), "{upid}");
    assert!(upid.contains(":qmcreate:200:root@pam!pvesim:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    let t = api.task(&upid);
    assert_eq!(t["tokenid"], "pvesim");
    assert_eq!(t["user"], "root@pam");
    assert_eq!(t["type"], "qmcreate");

    let c = api.config("pve1", 200);
    assert_eq!(c["tags"], "alpha;ocp;zeta");
    assert_eq!(c["memory"], "16384", "memory is a property string");
    assert_eq!(c["cores"], 4, "cores is a number");
    assert_eq!(c["agent"], "1");
    assert_eq!(
        c["efidisk0"],
        "local-lvm:vm-200-disk-0,efitype=4m,pre-enrolled-keys=0,size=4M"
    );
    assert_eq!(
        c["scsi0"],
        "local-lvm:vm-200-disk-1,discard=on,iothread=1,size=120G"
    );
    assert_eq!(c["ide2"], "local:iso/agent.x86_64.iso,media=cdrom");
    let net = c["net0"].as_str().unwrap();
    assert!(net.starts_with("virtio=BC:24:11:"), "{net}");
    assert!(net.ends_with(",bridge=vmbr0,tag=10"), "{net}");
    assert_eq!(c["boot"], "order=scsi0;ide2;net0");
    assert!(c["smbios1"].as_str().unwrap().starts_with("uuid="));
    assert_eq!(c["vmgenid"].as_str().unwrap().len(), 36);
    assert!(c["meta"].as_str().unwrap().starts_with("creation-qemu="));
    assert_eq!(c["digest"].as_str().unwrap().len(), 40);
    assert!(c.get("lock").is_none());
    // Only explicitly set keys, no defaults.
    assert!(c.get("sockets").is_none() && c.get("scsihw").is_none());
}

#[test]
fn nextid_is_a_string_and_checks_taken_ids() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.get("/cluster/nextid", &[]);
    assert_eq!(r.ok(), &json!("102"));
    assert_eq!(
        api.get("/cluster/nextid", &[("vmid", "150")]).ok(),
        &json!("150")
    );
    let r = api.get("/cluster/nextid", &[("vmid", "100")]);
    assert_eq!(r.status, 400);
    assert_eq!(r.error("vmid"), "VM 100 already exists");
}

#[test]
fn create_existing_vmid_anywhere_fails() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post("/nodes/pve1/qemu", &[("vmid", "101")]);
    assert_eq!(r.status, 500);
    assert_eq!(
        r.message(),
        "unable to create VM 101 - VM 101 already exists on node 'pve2'\n"
    );
}

#[test]
fn booleans_only_1_or_0_in_forms_but_json_true_ok() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post("/nodes/pve1/qemu", &[("vmid", "210"), ("onboot", "true")]);
    assert_eq!(
        r.error("onboot"),
        "type check ('boolean') failed - got 'true'"
    );
    let r = api.post("/nodes/pve1/qemu", &[("vmid", "210"), ("onboot", "yes")]);
    assert_eq!(r.status, 400);
    let r = api.post_json(
        "/nodes/pve1/qemu",
        &json!({"vmid": 210, "onboot": true, "cores": 2}),
    );
    let upid = r.upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(
        api.config("pve1", 210)["onboot"],
        1,
        "booleans come back as 1"
    );
}

#[test]
fn missing_vm_is_500_with_pve_text() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.get("/nodes/pve1/qemu/4242/config", &[]);
    assert_eq!(r.status, 500);
    assert_eq!(
        r.message(),
        "Configuration file 'nodes/pve1/qemu-server/4242.conf' does not exist\n"
    );
    // A VM on another node is "missing" on this one.
    let r = api.get("/nodes/pve1/qemu/101/status/current", &[]);
    assert_eq!(
        r.message(),
        "Configuration file 'nodes/pve1/qemu-server/101.conf' does not exist\n"
    );
}

#[test]
fn digest_changes_on_write_and_guards_updates() {
    let sim = start();
    let api = Api::root(&sim);
    let d1 = api.config("pve2", 101)["digest"]
        .as_str()
        .unwrap()
        .to_string();
    api.put(
        "/nodes/pve2/qemu/101/config",
        &[("description", "first"), ("digest", &d1)],
    )
    .ok();
    let d2 = api.config("pve2", 101)["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(d1, d2);
    let r = api.put(
        "/nodes/pve2/qemu/101/config",
        &[("cores", "2"), ("digest", &d1)],
    );
    assert_eq!(r.status, 500);
    assert_eq!(
        r.message(),
        "checksum mismatch (file change by other user?)\n"
    );
    assert_eq!(api.config("pve2", 101)["description"], "first");
    let r = api.put("/nodes/pve2/qemu/101/config", &[]);
    assert_eq!(r.message(), "no options specified\n");
}

#[test]
fn config_post_is_async_put_is_sync() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post("/nodes/pve2/qemu/101/config", &[("cores", "4")]);
    let upid = r.upid();
    assert!(upid.contains(":qmconfig:101:"));
    assert_eq!(api.exit(&upid), "OK");
    let r = api.put("/nodes/pve2/qemu/101/config", &[("sockets", "2")]);
    assert_eq!(r.ok(), &Value::Null);
    let c = api.config("pve2", 101);
    assert_eq!(
        (c["cores"].clone(), c["sockets"].clone()),
        (json!(4), json!(2))
    );
    // background_delay: null when the task finished in time.
    let r = api.post(
        "/nodes/pve2/qemu/101/config",
        &[("cores", "6"), ("background_delay", "5")],
    );
    assert_eq!(r.ok(), &Value::Null);
}

#[test]
fn delete_option_detaches_disk_to_unused_and_force_destroys() {
    let sim = start();
    let api = Api::root(&sim);
    api.put("/nodes/pve2/qemu/101/config", &[("scsi1", "local-lvm:4")])
        .ok();
    let c = api.config("pve2", 101);
    assert_eq!(c["scsi1"], "local-lvm:vm-101-disk-1,size=4G");
    api.put("/nodes/pve2/qemu/101/config", &[("delete", "scsi1")])
        .ok();
    let c = api.config("pve2", 101);
    assert!(c.get("scsi1").is_none());
    assert_eq!(c["unused0"], "local-lvm:vm-101-disk-1");
    api.put("/nodes/pve2/qemu/101/config", &[("delete", "unused0")])
        .ok();
    let content = api.get("/nodes/pve2/storage/local-lvm/content", &[("vmid", "101")]);
    let vols: Vec<&str> = content
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    assert_eq!(vols, vec!["local-lvm:vm-101-disk-0"]);
    let r = api.put(
        "/nodes/pve2/qemu/101/config",
        &[("cores", "2"), ("delete", "cores")],
    );
    assert_eq!(r.status, 400);
}

#[test]
fn lvmthin_rejects_qcow2_as_task_error_and_vm_vanishes() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = create(
        &api,
        &[("vmid", "220"), ("scsi0", "local-lvm:32,format=qcow2")],
    );
    let exit = api.exit(&upid);
    assert!(
        exit.starts_with("unable to create VM 220 - unsupported format 'qcow2'"),
        "{exit}"
    );
    assert_eq!(
        api.task_log(&upid).last().unwrap(),
        &format!("TASK ERROR: {exit}")
    );
    assert_eq!(api.get("/nodes/pve1/qemu/220/config", &[]).status, 500);
    // qcow2 on a dir storage is fine and keeps the extension in the volume name.
    let upid = create(
        &api,
        &[("vmid", "221"), ("scsi0", "nfs-shared:1,format=qcow2")],
    );
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(
        api.config("pve1", 221)["scsi0"],
        "nfs-shared:221/vm-221-disk-0.qcow2,size=1G"
    );
    // A storage without `images` content cannot hold disks.
    let upid = create(&api, &[("vmid", "222"), ("scsi0", "local:1")]);
    assert_eq!(
        api.exit(&upid),
        "unable to create VM 222 - storage 'local' does not support content-type 'images'"
    );
}

#[test]
fn lock_create_is_visible_while_the_task_runs() {
    let sim = start_with(realtime());
    let api = Api::root(&sim);
    let upid = create(&api, &[("vmid", "230"), ("scsi0", "local-lvm:8")]);
    assert_eq!(api.task(&upid)["status"], "running");
    let c = api.config("pve1", 230);
    assert_eq!(c["lock"], "create");
    let r = api.put("/nodes/pve1/qemu/230/config", &[("cores", "2")]);
    assert_eq!(r.status, 500);
    assert_eq!(r.message(), "VM is locked (create)\n");
    sim.advance(Duration::from_secs(10));
    assert_eq!(api.exit(&upid), "OK");
    assert!(api.config("pve1", 230).get("lock").is_none());
}

#[test]
fn stale_lock_blocks_until_unlocked() {
    let sim = start();
    let api = Api::root(&sim);
    sim.inject(pvesim::Fault::StaleLock {
        vmid: 101,
        lock: "backup".into(),
    })
    .unwrap();
    let r = api.put("/nodes/pve2/qemu/101/config", &[("cores", "2")]);
    assert_eq!(r.message(), "VM is locked (backup)\n");
    let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "VM is locked (backup)");
    // `qm unlock` = delete=lock, which only a root@pam session may do (`lock` is in none of
    // qemu-server's option tables): root's token is refused, root's ticket is not.
    let r = api.put("/nodes/pve2/qemu/101/config", &[("delete", "lock")]);
    assert_eq!(r.message(), "only root can set 'lock' config\n");
    let root = Api::login(&sim, "root@pam", ROOT_PASSWORD).expect("root logs in");
    root.put("/nodes/pve2/qemu/101/config", &[("delete", "lock")])
        .ok();
    api.put("/nodes/pve2/qemu/101/config", &[("cores", "2")])
        .ok();
}

#[test]
fn file_lock_contention_times_out() {
    let sim = start_with(Options {
        time_scale: 0.001,
        ..Options::default()
    });
    let api = Api::root(&sim);
    sim.inject(pvesim::Fault::HoldFileLock {
        vmid: 101,
        seconds: 3600.0,
    })
    .unwrap();
    let r = api.put("/nodes/pve2/qemu/101/config", &[("cores", "2")]);
    assert_eq!(r.status, 500);
    assert_eq!(
        r.message(),
        "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout\n"
    );
    // A worker waiting for the lock fails the same way, as a task error.
    let upid = api
        .post("/nodes/pve2/qemu/101/config", &[("cores", "2")])
        .upid();
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        api.exit(&upid),
        "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout"
    );
    // qemu-server stages changes under the lock: a worker that never got it changed nothing.
    let pending = api.get("/nodes/pve2/qemu/101/pending", &[]);
    let staged: Vec<_> = pending
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("pending").is_some() || e.get("delete").is_some())
        .collect();
    assert!(staged.is_empty(), "a failed config task staged {staged:?}");
}

#[test]
fn short_file_lock_is_waited_for() {
    let sim = start_with(Options {
        time_scale: 1.0,
        ..Options::default()
    });
    let api = Api::root(&sim);
    // Held 4 s (wall clock), lock timeout 10 s: the PUT waits for the holder, then succeeds. The hold
    // is long so that a loaded machine still sends the PUT while the lock is held.
    sim.inject(pvesim::Fault::HoldFileLock {
        vmid: 101,
        seconds: 4.0,
    })
    .unwrap();
    api.put("/nodes/pve2/qemu/101/config", &[("cores", "3")])
        .ok();
    let put = sim
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT")
        .unwrap();
    assert_eq!(put.status, 200);
    assert!(put.lock_waits >= 1, "answered before the lock was free");
    assert_eq!(api.config("pve2", 101)["cores"], 3);
}

#[test]
fn running_vm_keeps_non_hotplug_changes_pending_until_reboot() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = api
        .post(
            "/nodes/pve1/qemu/100/config",
            &[
                ("cores", "8"),
                ("memory", "4096"),
                ("net1", "virtio,bridge=vmbr1"),
                ("name", "bastion2"),
            ],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    let current = api
        .get("/nodes/pve1/qemu/100/config", &[("current", "1")])
        .ok()
        .clone();
    assert_eq!(current["cores"], 2);
    assert_eq!(current["memory"], "2048");
    assert!(
        current["net1"]
            .as_str()
            .unwrap()
            .starts_with("virtio=BC:24:11:"),
        "NICs hotplug"
    );
    assert_eq!(current["name"], "bastion2");
    let pending_view = api.config("pve1", 100);
    assert_eq!(pending_view["cores"], 8);
    let pending = api.get("/nodes/pve1/qemu/100/pending", &[]).ok().clone();
    let cores = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "cores")
        .unwrap();
    assert_eq!(
        (cores["value"].clone(), cores["pending"].clone()),
        (json!(2), json!(8))
    );
    let name = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "name")
        .unwrap();
    assert!(name.get("pending").is_none());
    // Pending deletion of a non-hotpluggable key.
    api.put("/nodes/pve1/qemu/100/config", &[("delete", "ostype")])
        .ok();
    let pending = api.get("/nodes/pve1/qemu/100/pending", &[]).ok().clone();
    let ostype = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "ostype")
        .unwrap();
    assert_eq!(ostype["delete"], 1);
    // Reboot applies everything.
    let upid = api.post("/nodes/pve1/qemu/100/status/reboot", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    let current = api
        .get("/nodes/pve1/qemu/100/config", &[("current", "1")])
        .ok()
        .clone();
    assert_eq!(current["cores"], 8);
    assert!(current.get("ostype").is_none());
    let pending = api.get("/nodes/pve1/qemu/100/pending", &[]).ok().clone();
    assert!(pending
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p.get("pending").is_none() && p.get("delete").is_none()));
}

#[test]
fn memory_is_not_checked_at_create_but_start_fails_when_overcommitted() {
    let sim = start();
    let api = Api::root(&sim);
    // pve3 has 64 GiB.
    let upid = api
        .post("/nodes/pve3/qemu", &[("vmid", "300"), ("memory", "49152")])
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    let upid = api
        .post("/nodes/pve3/qemu", &[("vmid", "301"), ("memory", "32768")])
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    let upid = api.post("/nodes/pve3/qemu/300/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    let upid = api.post("/nodes/pve3/qemu/301/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "start failed: QEMU exited with code 1");
    assert!(api
        .task_log(&upid)
        .iter()
        .any(|l| l.contains("Cannot allocate memory")));
    // Switchable.
    let mut o = sim.options();
    o.check_memory_on_start = false;
    sim.set_options(o);
    let upid = api.post("/nodes/pve3/qemu/301/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
}

#[test]
fn balloon_larger_than_memory_is_rejected() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.put("/nodes/pve2/qemu/101/config", &[("balloon", "4096")]);
    assert_eq!(
        r.message(),
        "balloon value too large (must be smaller than assigned memory)\n"
    );
}

/// `agent: 0` is configured but without a channel: a running VM's agent "is not running"
/// (`assert_agent_available`); "No QEMU guest agent configured" is for a config without `agent`.
#[test]
fn a_disabled_agent_is_not_running_rather_than_unconfigured() {
    let sim = start();
    let api = Api::root(&sim);
    api.put("/nodes/pve2/qemu/101/config", &[("agent", "0")])
        .ok();
    let r = api.get("/nodes/pve2/qemu/101/agent/network-get-interfaces", &[]);
    assert_eq!(r.message(), "VM 101 is not running\n");
    let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    let r = api.get("/nodes/pve2/qemu/101/agent/network-get-interfaces", &[]);
    assert_eq!(
        (r.status, r.message()),
        (500, "QEMU guest agent is not running\n")
    );
}

#[test]
fn guest_agent_answers_after_its_delay() {
    let sim = start_with(realtime());
    let api = Api::root(&sim);
    let r = api.get("/nodes/pve2/qemu/101/agent/network-get-interfaces", &[]);
    assert_eq!(r.message(), "No QEMU guest agent configured\n");
    api.put(
        "/nodes/pve2/qemu/101/config",
        &[("agent", "1"), ("ipconfig0", "ip=10.1.0.5/24,gw=10.1.0.1")],
    )
    .ok();
    let r = api.get("/nodes/pve2/qemu/101/agent/network-get-interfaces", &[]);
    assert_eq!(r.message(), "VM 101 is not running\n");
    let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
    sim.advance(Duration::from_secs(3));
    assert_eq!(api.exit(&upid), "OK");
    let r = api.get("/nodes/pve2/qemu/101/agent/network-get-interfaces", &[]);
    assert_eq!(r.status, 500);
    assert_eq!(r.message(), "QEMU guest agent is not running\n");
    sim.advance(Duration::from_secs(25));
    let r = api.get("/nodes/pve2/qemu/101/agent/network-get-interfaces", &[]);
    let ifaces = r.ok()["result"].as_array().unwrap().clone();
    let ens18 = ifaces.iter().find(|i| i["name"] == "ens18").unwrap();
    assert_eq!(ens18["hardware-address"], "bc:24:11:00:01:01");
    let addrs: Vec<&str> = ens18["ip-addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip-address"].as_str().unwrap())
        .collect();
    assert!(addrs.contains(&"10.1.0.5"), "{addrs:?}");
    assert!(addrs.iter().any(|a| a.starts_with("fe80::")));
    // Seeded agent IPs.
    let r = api.get("/nodes/pve1/qemu/100/agent/network-get-interfaces", &[]);
    assert!(r.ok().to_string().contains("10.0.0.100"));
}

#[test]
fn power_outcomes_match_pve() {
    let sim = start();
    let api = Api::root(&sim);
    // start on running → task error; stop on stopped → OK.
    let upid = api.post("/nodes/pve1/qemu/100/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "VM 100 already running");
    let upid = api.post("/nodes/pve2/qemu/101/status/stop", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    let upid = api.post("/nodes/pve2/qemu/101/status/shutdown", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    // reboot/reset/suspend on stopped → synchronous 500.
    for a in ["reboot", "reset", "suspend", "resume"] {
        let r = api.post(&format!("/nodes/pve2/qemu/101/status/{a}"), &[]);
        assert_eq!(r.message(), "VM 101 not running\n", "{a}");
    }
    // Templates cannot start.
    let upid = api.post("/nodes/pve1/qemu/9000/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "you can't start a vm if it's a template");
    // Pause: status stays running, qmpstatus paused; shutdown refuses.
    let upid = api.post("/nodes/pve1/qemu/100/status/suspend", &[]).upid();
    assert!(upid.contains(":qmpause:"));
    assert_eq!(api.exit(&upid), "OK");
    let cur = api
        .get("/nodes/pve1/qemu/100/status/current", &[])
        .ok()
        .clone();
    assert_eq!(
        (cur["status"].clone(), cur["qmpstatus"].clone()),
        (json!("running"), json!("paused"))
    );
    let r = api.post("/nodes/pve1/qemu/100/status/shutdown", &[]);
    assert_eq!(r.message(), "VM is paused - cannot shutdown\n");
    let upid = api.post("/nodes/pve1/qemu/100/status/resume", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    // DELETE a running VM.
    let r = api.delete("/nodes/pve1/qemu/100", &[]);
    assert_eq!(r.message(), "VM 100 is running - destroy failed\n");
    let upid = api.post("/nodes/pve1/qemu/100/status/stop", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    let cur = api
        .get("/nodes/pve1/qemu/100/status/current", &[])
        .ok()
        .clone();
    assert_eq!(cur["status"], "stopped");
    assert_eq!(cur["agent"], 1);
    assert_eq!(cur["ha"], json!({"managed": 0}));
}

#[test]
fn shutdown_of_unresponsive_guest_times_out_unless_forced() {
    let mut seed = pvesim::Seed::lab();
    seed.vms
        .iter_mut()
        .find(|v| v.vmid == 100)
        .unwrap()
        .ignore_shutdown = true;
    let sim = start_seed(seed);
    let api = Api::root(&sim);
    let upid = api
        .post("/nodes/pve1/qemu/100/status/shutdown", &[("timeout", "5")])
        .upid();
    assert_eq!(api.exit(&upid), "VM quit/powerdown failed - got timeout");
    let upid = api
        .post(
            "/nodes/pve1/qemu/100/status/shutdown",
            &[("forceStop", "1")],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    assert!(api
        .task_log(&upid)
        .iter()
        .any(|l| l == "VM still running - terminating now with SIGTERM"));
}

#[test]
fn clone_regenerates_macs_and_checks_parameters() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = api
        .post("/nodes/pve1/qemu/9000/clone", &[("newid", "400")])
        .upid();
    assert!(upid.contains(":qmclone:9000:"));
    assert_eq!(api.exit(&upid), "OK");
    let c = api.config("pve1", 400);
    assert_eq!(c["name"], "Copy-of-VM-rhcos-template");
    assert!(c.get("template").is_none());
    let mac = c["net0"].as_str().unwrap();
    assert!(
        mac.starts_with("virtio=BC:24:11:") && !mac.contains("BC:24:11:90:00:01"),
        "{mac}"
    );
    // Template default is a linked clone; storage/format are not allowed then.
    let r = api.post(
        "/nodes/pve1/qemu/9000/clone",
        &[("newid", "401"), ("full", "0"), ("storage", "local-lvm")],
    );
    assert_eq!(
        r.message(),
        "parameter 'storage' not allowed for linked clones\n"
    );
    let r = api.post("/nodes/pve1/qemu/9000/clone", &[("newid", "400")]);
    assert_eq!(
        r.message(),
        "unable to create VM 400: config file already exists\n"
    );
    let r = api.post(
        "/nodes/pve1/qemu/9000/clone",
        &[("newid", "402"), ("target", "pve2")],
    );
    assert_eq!(
        r.message(),
        "can't clone VM to node 'pve2' (VM uses local storage)\n"
    );
    // qcow2 requested on lvmthin silently falls back to raw.
    let upid = api
        .post(
            "/nodes/pve1/qemu/9000/clone",
            &[
                ("newid", "403"),
                ("full", "1"),
                ("format", "qcow2"),
                ("storage", "local-lvm"),
                ("name", "w1"),
            ],
        )
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(
        api.config("pve1", 403)["scsi0"],
        "local-lvm:vm-403-disk-1,iothread=1,size=32G"
    );
    // Injected clone failure leaves no VM.
    sim.inject(pvesim::Fault::FailTasks {
        kind: "qmclone".into(),
        vmid: None,
        count: 1,
        message: "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout".into(),
    })
    .unwrap();
    let upid = api
        .post("/nodes/pve1/qemu/9000/clone", &[("newid", "404")])
        .upid();
    assert!(api.exit(&upid).contains("got timeout"));
    assert_eq!(api.get("/nodes/pve1/qemu/404/config", &[]).status, 500);
}

#[test]
fn lock_clone_is_on_the_new_vm_during_the_task() {
    let sim = start_with(realtime());
    let api = Api::root(&sim);
    let upid = api
        .post(
            "/nodes/pve1/qemu/9000/clone",
            &[("newid", "410"), ("full", "1")],
        )
        .upid();
    let c = api.config("pve1", 410);
    assert_eq!(c["lock"], "clone");
    assert_eq!(c["description"], " qmclone temporary file");
    assert_eq!(
        c.as_object().unwrap().len(),
        3,
        "only lock, the temporary file's description and digest: {c}"
    );
    sim.advance(Duration::from_secs(60));
    assert_eq!(api.exit(&upid), "OK");
}

#[test]
fn resize_grows_and_refuses_shrink_and_cdrom_inside_the_task() {
    let sim = start();
    let api = Api::root(&sim);
    let resize = |disk: &str, size: &str| {
        api.put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", disk), ("size", size)],
        )
        .upid()
    };
    let upid = resize("scsi0", "+10G");
    assert!(upid.contains(":resize:100:"));
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(
        api.config("pve1", 100)["scsi0"],
        "local-lvm:vm-100-disk-0,size=30G"
    );
    // qemu-server `resize_vm` runs `$updatefn` inside `fork_worker('resize')`: the request gets
    // its UPID and the task fails with the check's text.
    assert_eq!(
        api.exit(&resize("scsi0", "10G")),
        "shrinking disks is not supported"
    );
    // VM 100 runs: a new IDE drive would wait in [PENDING] for a restart
    // (`vmconfig_update_disk`), a SCSI one hot-plugs.
    api.put(
        "/nodes/pve1/qemu/100/config",
        &[("scsi3", "local:iso/agent.x86_64.iso,media=cdrom")],
    )
    .ok();
    assert_eq!(
        api.exit(&resize("scsi3", "+1G")),
        "you can't resize a cdrom"
    );
    assert_eq!(
        api.exit(&resize("scsi5", "+1G")),
        "disk 'scsi5' does not exist"
    );
    let upid = api
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "+1G"), ("digest", "0000")],
        )
        .upid();
    assert!(
        api.exit(&upid).starts_with("checksum mis"),
        "{}",
        api.exit(&upid)
    );
    // The same size is no change: the task succeeds and writes nothing.
    assert_eq!(api.exit(&resize("scsi0", "30G")), "OK");
    // pve-common's disk-size pattern: `1.` and `.5` are refused by the schema (400), up front.
    for bad in ["1.", ".5G", "1g"] {
        let r = api.put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", bad)],
        );
        assert_eq!(r.status, 400, "{bad}: {}", r.message());
    }
}

#[test]
fn destroy_checks_protection_and_frees_disks() {
    let sim = start();
    let api = Api::root(&sim);
    api.put("/nodes/pve2/qemu/101/config", &[("protection", "1")])
        .ok();
    let r = api.delete("/nodes/pve2/qemu/101", &[]);
    assert_eq!(
        r.message(),
        "can't remove VM 101 - protection mode enabled\n"
    );
    api.put("/nodes/pve2/qemu/101/config", &[("delete", "protection")])
        .ok();
    let upid = api
        .delete(
            "/nodes/pve2/qemu/101",
            &[("purge", "1"), ("destroy-unreferenced-disks", "1")],
        )
        .upid();
    assert!(upid.contains(":qmdestroy:101:"));
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(api.get("/nodes/pve2/qemu/101/config", &[]).status, 500);
    let vols = api
        .get("/nodes/pve2/storage/local-lvm/content", &[])
        .ok()
        .clone();
    assert_eq!(vols, json!([]));
}

#[test]
fn ha_managed_vms_use_ha_tasks_and_need_purge() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = api
        .post("/nodes/pve2/qemu", &[("vmid", "500"), ("ha-managed", "1")])
        .upid();
    assert_eq!(api.exit(&upid), "OK");
    let upid = api.post("/nodes/pve2/qemu/500/status/start", &[]).upid();
    assert!(upid.contains(":hastart:500:"), "{upid}");
    assert_eq!(api.exit(&upid), "OK");
    let cur = api
        .get("/nodes/pve2/qemu/500/status/current", &[])
        .ok()
        .clone();
    assert_eq!(cur["ha"]["managed"], 1);
    assert_eq!(cur["status"], "running");
    let res = api
        .get("/cluster/resources", &[("type", "vm")])
        .ok()
        .clone();
    let vm = res
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["vmid"] == 500)
        .unwrap();
    assert_eq!(vm["hastate"], "started");
    let upid = api.post("/nodes/pve2/qemu/500/status/stop", &[]).upid();
    assert!(upid.contains(":hastop:500:"));
    assert_eq!(api.exit(&upid), "OK");
    let r = api.delete("/nodes/pve2/qemu/500", &[]);
    assert_eq!(
        r.message(),
        "unable to remove VM 500 - used in HA resources and purge parameter not set.\n"
    );
}

#[test]
fn template_conversion() {
    let sim = start();
    let api = Api::root(&sim);
    let r = api.post("/nodes/pve1/qemu/9000/template", &[]);
    assert_eq!(r.message(), "you can't convert a template to a template\n");
    let r = api.post("/nodes/pve1/qemu/100/template", &[]);
    assert_eq!(
        r.message(),
        "you can't convert a VM to template if VM is running\n"
    );
    let upid = api.post("/nodes/pve2/qemu/101/template", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
    assert_eq!(api.config("pve2", 101)["template"], 1);
}

#[test]
fn tasks_keep_running_for_several_polls_at_realistic_scale() {
    let sim = start_with(realtime());
    let api = Api::root(&sim);
    let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
    for _ in 0..3 {
        let t = api.task(&upid);
        assert_eq!(t["status"], "running");
        assert!(t.get("exitstatus").is_none());
    }
    let active = api
        .get("/nodes/pve2/tasks", &[("source", "active")])
        .ok()
        .clone();
    assert_eq!(active.as_array().unwrap().len(), 1);
    sim.advance(Duration::from_secs(5));
    assert_eq!(api.exit(&upid), "OK");
    let list = api
        .get("/nodes/pve2/tasks", &[("vmid", "101")])
        .ok()
        .clone();
    assert_eq!(list[0]["status"], "OK");
    assert_eq!(list[0]["upid"], upid.as_str());
}

#[test]
fn parallel_clones_hit_the_storage_lock() {
    let sim = start_with(Options {
        max_parallel_clones_per_storage: 2,
        ..realtime()
    });
    let api = Api::root(&sim);
    let ups: Vec<String> = (0..3)
        .map(|i| {
            let id = (420 + i).to_string();
            api.post(
                "/nodes/pve1/qemu/9000/clone",
                &[("newid", &id), ("full", "1")],
            )
            .upid()
        })
        .collect();
    sim.advance(Duration::from_secs(120));
    assert_eq!(api.exit(&ups[0]), "OK");
    assert_eq!(api.exit(&ups[1]), "OK");
    assert_eq!(
        api.exit(&ups[2]),
        "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
    );
    assert!(sim.vm_config(422).is_none(), "a failed clone leaves no VM");
}

#[test]
fn agent_reports_link_local_first() {
    let sim = start_with(Options {
        agent_delay: 10.0,
        agent_ip_delay: 20.0,
        ..realtime()
    });
    let api = Api::root(&sim);
    let stop = api.post("/nodes/pve1/qemu/100/status/stop", &[]).upid();
    sim.advance(Duration::from_secs(2));
    assert_eq!(api.exit(&stop), "OK");
    let start = api.post("/nodes/pve1/qemu/100/status/start", &[]).upid();
    sim.advance(Duration::from_secs(15));
    assert_eq!(api.exit(&start), "OK");
    let early = api
        .get("/nodes/pve1/qemu/100/agent/network-get-interfaces", &[])
        .ok()
        .to_string();
    assert!(
        early.contains("fe80::") && !early.contains("10.0.0.100"),
        "{early}"
    );
    sim.advance(Duration::from_secs(20));
    let later = api
        .get("/nodes/pve1/qemu/100/agent/network-get-interfaces", &[])
        .ok()
        .to_string();
    assert!(later.contains("10.0.0.100"), "{later}");
}

#[test]
fn create_with_start_runs_the_vm_and_failed_autostart_is_a_warning() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = create(&api, &[("vmid", "240"), ("memory", "1024"), ("start", "1")]);
    assert_eq!(api.exit(&upid), "OK");
    let cur = api
        .get("/nodes/pve1/qemu/240/status/current", &[])
        .ok()
        .clone();
    assert_eq!(cur["status"], "running");
    // 200 GiB on a 128 GiB node: created, but the autostart fails → WARNINGS.
    let upid = create(
        &api,
        &[("vmid", "241"), ("memory", "204800"), ("start", "1")],
    );
    assert_eq!(api.exit(&upid), "WARNINGS: 1");
    assert!(api
        .task_log(&upid)
        .iter()
        .any(|l| l.starts_with("WARN: start failed")));
    assert_eq!(api.task_log(&upid).last().unwrap(), "TASK WARNINGS: 1");
    assert_eq!(
        api.get("/nodes/pve1/qemu/241/status/current", &[]).ok()["status"],
        "stopped"
    );
}

#[test]
fn task_log_pages_and_reports_total() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = create(
        &api,
        &[
            ("vmid", "250"),
            ("scsi0", "local-lvm:1"),
            ("scsi1", "local-lvm:1"),
            ("efidisk0", "local-lvm:1"),
        ],
    );
    let path = format!("/nodes/pve1/tasks/{}/log", enc(&upid));
    let all = api.get(&path, &[]);
    assert_eq!(all.body["total"], 4, "{:?}", all.body);
    let lines = all.ok().as_array().unwrap().clone();
    assert_eq!(lines[0]["n"], 1);
    assert!(lines[0]["t"]
        .as_str()
        .unwrap()
        .starts_with("efidisk0: successfully created disk"));
    assert_eq!(lines[3]["t"], "TASK OK");
    let page = api.get(&path, &[("start", "1"), ("limit", "2")]);
    let page = page.ok().as_array().unwrap().clone();
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["n"], 2);
    let tasks = api.get("/nodes/pve1/tasks", &[("typefilter", "qmcreate")]);
    assert_eq!(tasks.body["total"], 1);
}

#[test]
fn missing_iso_fails_create_in_the_task_and_update_synchronously() {
    let sim = start();
    let api = Api::root(&sim);
    let upid = create(
        &api,
        &[
            ("vmid", "260"),
            ("ide2", "local:iso/missing.iso,media=cdrom"),
        ],
    );
    assert_eq!(
        api.exit(&upid),
        "unable to create VM 260 - volume local:iso/missing.iso does not exist"
    );
    assert!(sim.vm_config(260).is_none());
    let r = api.put(
        "/nodes/pve2/qemu/101/config",
        &[("ide2", "local:iso/missing.iso,media=cdrom")],
    );
    assert_eq!(r.message(), "volume local:iso/missing.iso does not exist\n");
    // Ejecting is always fine.
    api.put(
        "/nodes/pve2/qemu/101/config",
        &[("ide2", "none,media=cdrom")],
    )
    .ok();
}

/// qemu-server's root-only config (`check_hostpci_perm`, `check_usb_perm`, the serial checks,
/// `$check_vm_modify_config_perm`'s catch-all): refused to every token, root's included, with
/// upstream's text; a root@pam session may; mapped devices only need the privileges.
#[test]
fn raw_devices_and_unlisted_keys_are_root_sessions_only() {
    let sim = start();
    let token = Api::root(&sim);
    let refused = [
        (
            "hostpci0",
            "0000:01:00.0,pcie=1",
            "only root can set 'hostpci0' config for non-mapped devices\n",
        ),
        (
            "usb0",
            "host=1-2",
            "only root can set 'usb0' config for real devices\n",
        ),
        (
            "serial0",
            "/dev/ttyS0",
            "only root can modify 'serial0' config for real devices\n",
        ),
        ("args", "-no-reboot", "only root can set 'args' config\n"),
    ];
    for (key, value, msg) in refused {
        let r = token.put("/nodes/pve2/qemu/101/config", &[(key, value)]);
        assert_eq!(r.message(), msg, "{key}");
    }
    assert_eq!(token.config("pve2", 101).get("hostpci0"), None);
    // A VM created with a raw device by a token is refused before anything exists.
    let r = token.post(
        "/nodes/pve2/qemu",
        &[("vmid", "510"), ("hostpci0", "0000:01:00.0")],
    );
    assert_eq!(
        r.message(),
        "only root can set 'hostpci0' config for non-mapped devices\n"
    );
    assert_eq!(
        token
            .get("/nodes/pve2/qemu/510/status/current", &[])
            .message(),
        "Configuration file 'nodes/pve2/qemu-server/510.conf' does not exist\n"
    );
    // Mapped devices and a serial socket need privileges only (root's token has them all).
    for (key, value) in [
        ("hostpci1", "mapping=gpu,pcie=1"),
        ("usb1", "spice"),
        ("serial1", "socket"),
    ] {
        token
            .put("/nodes/pve2/qemu/101/config", &[(key, value)])
            .ok();
    }
    let r = token.put(
        "/nodes/pve2/qemu/101/config",
        &[("hostpci1", "mapping=gpu,romfile=x.rom")],
    );
    assert_eq!(
        r.error("hostpci1"),
        "only root@pam can set 'romfile' option"
    );
    let root = Api::login(&sim, "root@pam", ROOT_PASSWORD).expect("root logs in");
    root.put(
        "/nodes/pve2/qemu/101/config",
        &[("hostpci0", "0000:01:00.0,pcie=1")],
    )
    .ok();
    assert_eq!(root.config("pve2", 101)["hostpci0"], "0000:01:00.0,pcie=1");
}

/// The boot order follows the devices (qemu-server `$update_vm_api`): deleting a disk that is in
/// `order` drops it from the order, a new CD-ROM joins it, and an order that names a missing or
/// deleted device is refused.
#[test]
fn boot_order_follows_deleted_disks_and_new_cdroms() {
    let sim = start();
    let api = Api::root(&sim);
    api.put(
        "/nodes/pve2/qemu/101/config",
        &[("scsi1", "local-lvm:1"), ("boot", "order=scsi0;scsi1;net0")],
    )
    .ok();
    api.put("/nodes/pve2/qemu/101/config", &[("delete", "scsi1")])
        .ok();
    let conf = api.config("pve2", 101);
    assert_eq!(conf["boot"], "order=scsi0;net0", "{conf}");
    api.put(
        "/nodes/pve2/qemu/101/config",
        &[("ide3", "none,media=cdrom")],
    )
    .ok();
    assert_eq!(api.config("pve2", 101)["boot"], "order=scsi0;net0;ide3");
    let r = api.put(
        "/nodes/pve2/qemu/101/config",
        &[("boot", "order=scsi0;sata5")],
    );
    assert_eq!(
        r.message(),
        "invalid bootorder: device 'sata5' does not exist'\n"
    );
    let r = api.put(
        "/nodes/pve2/qemu/101/config",
        &[("boot", "order=scsi0;ide3"), ("delete", "ide3")],
    );
    assert_eq!(
        r.message(),
        "invalid bootorder: device 'ide3' does not exist'\n"
    );
}
