//! Config changes on a running VM, as qemu-server's `vmconfig_hotplug_pending` makes them
//! (`PVE/QemuServer.pm`), in PVE 8 and PVE 9 modes: what hot-plugs, what waits in `[PENDING]`
//! for the next start, and what a failed hot-plug leaves behind.

mod common;

use common::{start_version, Api, BOTH_VERSIONS};
use pvesim::Fault;
use serde_json::Value;

/// `(applied value, pending value)` of `key` from `GET …/pending`.
fn pending_of(api: &Api, node: &str, vmid: u32, key: &str) -> (Value, Value) {
    let all = api
        .get(&format!("/nodes/{node}/qemu/{vmid}/pending"), &[])
        .ok()
        .clone();
    let e = all
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == key)
        .cloned()
        .unwrap_or_default();
    (e["value"].clone(), e["pending"].clone())
}

fn current(api: &Api, node: &str, vmid: u32) -> Value {
    api.get(
        &format!("/nodes/{node}/qemu/{vmid}/config"),
        &[("current", "1")],
    )
    .ok()
    .clone()
}

/// `POST …/config` and the exit status of its `qmconfig` task.
fn post_config(api: &Api, node: &str, vmid: u32, params: &[(&str, &str)]) -> String {
    let upid = api
        .post(&format!("/nodes/{node}/qemu/{vmid}/config"), params)
        .upid();
    api.exit(&upid)
}

/// VM 101 (stopped on pve2) with `hotplug` and `cores` set, then started.
fn running_101(api: &Api, hotplug: &str) {
    api.put(
        "/nodes/pve2/qemu/101/config",
        &[("hotplug", hotplug), ("cores", "2"), ("ostype", "l26")],
    )
    .ok();
    let upid = api.post("/nodes/pve2/qemu/101/status/start", &[]).upid();
    assert_eq!(api.exit(&upid), "OK");
}

#[test]
fn hotplug_one_means_network_disk_usb() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        running_101(&api, "1");
        assert_eq!(
            post_config(
                &api,
                "pve2",
                101,
                &[
                    ("net1", "virtio,bridge=vmbr1"),
                    ("scsi1", "local-lvm:1"),
                    ("vcpus", "1"),
                    ("memory", "2048"),
                ]
            ),
            "OK",
            "PVE {v}"
        );
        let c = current(&api, "pve2", 101);
        assert!(c["net1"].is_string(), "PVE {v}: network hot-plugs: {c}");
        assert!(c["scsi1"].is_string(), "PVE {v}: disk hot-plugs: {c}");
        assert!(c.get("vcpus").is_none(), "PVE {v}: '1' has no cpu: {c}");
        assert_eq!(pending_of(&api, "pve2", 101, "vcpus").1, 1, "PVE {v}");
        assert_eq!(
            pending_of(&api, "pve2", 101, "memory").1,
            "2048",
            "PVE {v}: '1' has no memory"
        );
    }
}

#[test]
fn cores_is_not_hot_pluggable_vcpus_is_with_cpu() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        running_101(&api, "network,disk,cpu");
        assert_eq!(
            post_config(&api, "pve2", 101, &[("cores", "4"), ("vcpus", "1")]),
            "OK",
            "PVE {v}"
        );
        let c = current(&api, "pve2", 101);
        assert_eq!(c["cores"], 2, "PVE {v}: cores waits for a restart");
        assert_eq!(c["vcpus"], 1, "PVE {v}: vcpus hot-plugs with cpu");
        assert_eq!(pending_of(&api, "pve2", 101, "cores").1, 4, "PVE {v}");
    }
}

#[test]
fn drive_option_changes_on_a_running_vm_stay_pending() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        let disk = "local-lvm:vm-100-disk-0,size=20G";
        assert_eq!(
            post_config(
                &api,
                "pve1",
                100,
                &[("scsi0", "local-lvm:vm-100-disk-0,iothread=1,ssd=1,size=20G")]
            ),
            "OK",
            "PVE {v}"
        );
        assert_eq!(current(&api, "pve1", 100)["scsi0"], disk, "PVE {v}");
        let (_, pending) = pending_of(&api, "pve1", 100, "scsi0");
        assert!(
            pending.as_str().unwrap().contains("iothread=1"),
            "PVE {v}: {pending}"
        );
        // A serial number is not among the cold options: it is written at once.
        assert_eq!(
            post_config(
                &api,
                "pve1",
                100,
                &[("scsi0", "local-lvm:vm-100-disk-0,serial=root,size=20G")]
            ),
            "OK",
            "PVE {v}"
        );
        assert_eq!(
            current(&api, "pve1", 100)["scsi0"],
            "local-lvm:vm-100-disk-0,serial=root,size=20G",
            "PVE {v}"
        );
    }
}

#[test]
fn a_failed_hot_plug_fails_the_task_and_stays_pending() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        // More vcpus than the applied sockets × cores (cores stays pending): qemu_cpu_hotplug dies.
        running_101(&api, "network,disk,cpu");
        let upid = api
            .post(
                "/nodes/pve2/qemu/101/config",
                &[("cores", "4"), ("vcpus", "4"), ("name", "spare2")],
            )
            .upid();
        assert_eq!(
            api.exit(&upid),
            "400 Parameter verification failed. vcpus: hotplug problem - you can't add more vcpus than maxcpus",
            "PVE {v}"
        );
        assert_eq!(pending_of(&api, "pve2", 101, "vcpus").1, 4, "PVE {v}");
        assert_eq!(current(&api, "pve2", 101)["name"], "spare2", "PVE {v}");
        // A device_add that fails (fault), through the synchronous PUT: a 400 naming the key.
        sim.inject(Fault::HotplugError {
            vmid: Some(100),
            key: "net1".into(),
            message: "device_add failed".into(),
            count: 1,
        })
        .unwrap();
        let r = api.put(
            "/nodes/pve1/qemu/100/config",
            &[("net1", "virtio,bridge=vmbr1")],
        );
        assert_eq!(r.status, 400, "PVE {v}");
        assert_eq!(
            r.error("net1"),
            "hotplug problem - device_add failed",
            "PVE {v}"
        );
        assert!(current(&api, "pve1", 100).get("net1").is_none());
        assert!(pending_of(&api, "pve1", 100, "net1").1.is_string());
        // The next start applies it.
        let upid = api.post("/nodes/pve1/qemu/100/status/reboot", &[]).upid();
        assert_eq!(api.exit(&upid), "OK");
        assert!(current(&api, "pve1", 100)["net1"].is_string(), "PVE {v}");
    }
}

#[test]
fn a_new_disk_on_a_running_vm_is_allocated_at_once() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        // sata does not hot-plug: the disk waits in [PENDING], but as a real volume.
        assert_eq!(
            post_config(&api, "pve1", 100, &[("sata1", "local-lvm:2")]),
            "OK",
            "PVE {v}"
        );
        assert!(current(&api, "pve1", 100).get("sata1").is_none());
        assert_eq!(
            pending_of(&api, "pve1", 100, "sata1").1,
            "local-lvm:vm-100-disk-1,size=2G",
            "PVE {v}"
        );
        let vols = api
            .get("/nodes/pve1/storage/local-lvm/content", &[("vmid", "100")])
            .ok()
            .clone();
        assert_eq!(vols.as_array().unwrap().len(), 2, "PVE {v}: {vols}");
        // Replacing the pending request keeps the first volume as unused.
        api.put("/nodes/pve1/qemu/100/config", &[("sata1", "local-lvm:3")])
            .ok();
        let c = api.config("pve1", 100);
        assert_eq!(c["sata1"], "local-lvm:vm-100-disk-2,size=3G", "PVE {v}");
        assert_eq!(c["unused0"], "local-lvm:vm-100-disk-1", "PVE {v}");
    }
}
