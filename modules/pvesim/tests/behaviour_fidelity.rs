//! Behaviours taken from upstream qemu-server / pve-storage, in PVE 8 and PVE 9 modes: new-disk
//! sizes, the digest-mismatch text, the storage list's format fields, cross-node clones, the
//! config of a clone in progress, hibernation (`lock: suspended`), privileges per release.

mod common;

use common::{raw, start_version, Api, Auth, BOTH_VERSIONS, FULL_TOKEN, ROOT_TOKEN};
use serde_json::json;

fn create(api: &Api, params: &[(&str, &str)]) -> String {
    api.post("/nodes/pve1/qemu", params).upid()
}

#[test]
fn new_disk_sizes_are_rounded_up_to_kib_in_both_versions() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        let upid = create(
            &api,
            &[
                ("vmid", "230"),
                ("scsi0", "local-lvm:0.098"),
                ("scsi1", "local-lvm:10.1"),
                ("scsi2", "nfs-shared:0.09765625"),
            ],
        );
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        let c = api.config("pve1", 230);
        assert_eq!(
            c["scsi0"], "local-lvm:vm-230-disk-0,size=102761K",
            "PVE {v}"
        );
        assert_eq!(
            c["scsi1"], "local-lvm:vm-230-disk-1,size=10590618K",
            "PVE {v}"
        );
        assert_eq!(
            c["scsi2"], "nfs-shared:230/vm-230-disk-0.raw,size=100M",
            "PVE {v}"
        );
        let vols = api
            .get("/nodes/pve1/storage/local-lvm/content", &[("vmid", "230")])
            .ok()
            .clone();
        let sizes: Vec<u64> = vols
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["size"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, vec![102_761 * 1024, 10_590_618 * 1024], "PVE {v}");
        // A disk added later is allocated the same way.
        let r = api.put("/nodes/pve1/qemu/230/config", &[("scsi3", "local-lvm:0.5")]);
        r.ok();
        assert_eq!(
            api.config("pve1", 230)["scsi3"],
            "local-lvm:vm-230-disk-2,size=512M",
            "PVE {v}"
        );
    }
}

/// The text is in the reason phrase in every release, and in the body's `message` from 8.3.4 on.
#[test]
fn digest_mismatch_text_is_the_releases_own() {
    for (v, text, in_body) in [
        (
            "8.2.7",
            "checksum missmatch (file change by other user?)\n",
            false,
        ),
        (
            "8.2.8",
            "checksum mismatch (file change by other user?)\n",
            false,
        ),
        (
            "8.4.1",
            "checksum mismatch (file change by other user?)\n",
            true,
        ),
        (
            "9.2.11",
            "checksum mismatch (file change by other user?)\n",
            true,
        ),
    ] {
        let sim = start_version(v);
        let api = Api::root(&sim);
        let stale = api.config("pve2", 101)["digest"]
            .as_str()
            .unwrap()
            .to_string();
        api.put("/nodes/pve2/qemu/101/config", &[("description", "x")])
            .ok();
        let body_text = if in_body { text } else { "" };
        let r = api.put(
            "/nodes/pve2/qemu/101/config",
            &[("cores", "2"), ("digest", &stale)],
        );
        assert_eq!((r.status, r.message()), (500, body_text), "PVE {v}");
        let r = api.post(
            "/nodes/pve2/qemu/101/config",
            &[("cores", "2"), ("digest", &stale)],
        );
        assert_eq!((r.status, r.message()), (500, body_text), "PVE {v}");
        let form = format!("cores=2&digest={stale}");
        let resp = raw(
            &sim,
            &format!(
                "PUT /api2/json/nodes/pve2/qemu/101/config HTTP/1.1\r\nHost: x\r\n\
                 Authorization: PVEAPIToken={ROOT_TOKEN}\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
                form.len()
            ),
        );
        let status_line = format!("HTTP/1.1 500 {}\r\n", text.trim_end());
        assert!(resp.starts_with(&status_line), "PVE {v}: {resp}");
        assert_eq!(api.config("pve2", 101).get("cores"), None, "PVE {v}");
    }
}

#[test]
fn storage_format_fields_follow_the_release() {
    let list = |v: &str| {
        let sim = start_version(v);
        let api = Api::root(&sim);
        let l = api
            .get("/nodes/pve1/storage", &[("format", "1")])
            .ok()
            .clone();
        let by = |sid: &str| {
            l.as_array()
                .unwrap()
                .iter()
                .find(|s| s["storage"] == sid)
                .unwrap()
                .clone()
        };
        (by("local"), by("local-lvm"))
    };
    let dir_valid = json!([{"raw": 1, "qcow2": 1, "vmdk": 1}, "raw"]);
    // PVE 8: the old pair, and only for plugins that declare formats (not LVM-thin).
    let (dir, thin) = list("8.4.1");
    assert_eq!(dir["format"], dir_valid);
    assert!(
        dir.get("formats").is_none() && thin.get("format").is_none(),
        "{thin}"
    );
    assert!(thin.get("formats").is_none());
    // PVE 9.0: the pair for every storage, still no `formats`.
    let (dir, thin) = list("9.0.10");
    assert_eq!(dir["format"], dir_valid);
    assert_eq!(thin["format"], json!([{"raw": 1}, "raw"]));
    assert!(dir.get("formats").is_none() && thin.get("formats").is_none());
    // PVE 9.1 on: `formats` as well (sorted), the pair kept.
    let (dir, thin) = list("9.2.11");
    assert_eq!(
        dir["formats"],
        json!({"default": "raw", "supported": ["qcow2", "raw", "vmdk"]})
    );
    assert_eq!(dir["format"], dir_valid);
    assert_eq!(
        thin["formats"],
        json!({"default": "raw", "supported": ["raw"]})
    );
    // Without `format=1` neither appears.
    let sim = start_version("9.2.11");
    let l = Api::root(&sim).get("/nodes/pve1/storage", &[]).ok().clone();
    assert!(l
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s.get("format").is_none() && s.get("formats").is_none()));
}

#[test]
fn cross_node_clone_needs_shared_volumes_and_shared_target_storage() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        // Disk on shared storage, the ISO on the node's own `local`.
        let upid = create(
            &api,
            &[
                ("vmid", "250"),
                ("scsi0", "nfs-shared:1"),
                ("ide2", "local:iso/agent.x86_64.iso,media=cdrom"),
            ],
        );
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        let local_vm = "can't clone VM to node 'pve2' (VM uses local storage)\n";
        for extra in [None, Some("nfs-shared")] {
            let mut p = vec![("newid", "251"), ("target", "pve2")];
            if let Some(s) = extra {
                p.push(("storage", s));
            }
            let r = api.post("/nodes/pve1/qemu/250/clone", &p);
            assert_eq!((r.status, r.message()), (500, local_vm), "PVE {v} {p:?}");
        }
        // The template's disks are on local-lvm: a shared target storage does not help.
        let r = api.post(
            "/nodes/pve1/qemu/9000/clone",
            &[
                ("newid", "251"),
                ("target", "pve2"),
                ("full", "1"),
                ("storage", "nfs-shared"),
            ],
        );
        assert_eq!(r.message(), local_vm, "PVE {v}");
        // Without the ISO every volume is shared; a local target storage is still refused.
        api.put(
            "/nodes/pve1/qemu/250/config",
            &[("ide2", "none,media=cdrom")],
        )
        .ok();
        let r = api.post(
            "/nodes/pve1/qemu/250/clone",
            &[
                ("newid", "251"),
                ("target", "pve2"),
                ("storage", "local-lvm"),
            ],
        );
        assert_eq!(
            r.message(),
            "can't clone to non-shared storage 'local-lvm'\n",
            "PVE {v}"
        );
        assert!(sim.vm_config(251).is_none());
        let upid = api
            .post(
                "/nodes/pve1/qemu/250/clone",
                &[
                    ("newid", "251"),
                    ("target", "pve2"),
                    ("storage", "nfs-shared"),
                ],
            )
            .upid();
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        assert!(api.config("pve2", 251)["scsi0"]
            .as_str()
            .unwrap()
            .starts_with("nfs-shared:251/vm-251-disk-0"));
        // `target` naming the source node is no cross-node clone at all.
        let upid = api
            .post(
                "/nodes/pve1/qemu/9000/clone",
                &[("newid", "252"), ("target", "pve1")],
            )
            .upid();
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
    }
}

/// qemu-server `clone_vm`: while `qmclone` runs, the new VM is the temporary config (`lock:
/// clone` and the `# qmclone temporary file` line, read as the description); the name and
/// description asked for appear only when the task ends.
#[test]
fn a_clone_in_progress_is_only_the_locked_temporary_config() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let mut slow = sim.options();
        slow.time_scale = 1.0;
        sim.set_options(slow);
        let api = Api::root(&sim);
        let upid = api
            .post(
                "/nodes/pve1/qemu/9000/clone",
                &[
                    ("newid", "260"),
                    ("full", "1"),
                    ("name", "c260"),
                    ("description", "mine"),
                ],
            )
            .upid();
        let c = api.config("pve1", 260);
        let mut keys: Vec<&String> = c.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["description", "digest", "lock"], "PVE {v}: {c}");
        assert_eq!(
            (c["lock"].as_str(), c["description"].as_str()),
            (Some("clone"), Some(" qmclone temporary file")),
            "PVE {v}"
        );
        let listed = api
            .get("/cluster/resources", &[("type", "vm")])
            .ok()
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["vmid"] == 260)
            .cloned()
            .unwrap();
        assert_eq!(listed["name"], "VM 260", "PVE {v}");
        assert_eq!(listed["lock"], "clone", "PVE {v}");
        sim.advance(std::time::Duration::from_secs(3600));
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        let c = api.config("pve1", 260);
        assert_eq!(
            (c["name"].as_str(), c["description"].as_str(), c.get("lock")),
            (Some("c260"), Some("mine"), None),
            "PVE {v}: {c}"
        );
    }
}

/// qemu-server `vm_suspend` with `todisk`: the state on a new volume, `vmstate`,
/// `runningmachine`, `runningcpu` and `lock: suspended` in the config, the VM stopped; config
/// changes refused by `check_lock`; a start resumes and removes the state; `delete=vmstate`
/// throws it away instead.
#[test]
fn hibernation_locks_the_config_until_a_start_resumes_it() {
    for (v, qemu) in [("8.4.1", "9.2"), ("9.0.10", "10.0"), ("9.2.11", "10.1")] {
        let sim = start_version(v);
        let api = Api::root(&sim);
        let hibernate = || {
            let upid = api
                .post("/nodes/pve1/qemu/100/status/suspend", &[("todisk", "1")])
                .upid();
            assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        };
        let state_volumes = || {
            api.get("/nodes/pve1/storage/local-lvm/content", &[("vmid", "100")])
                .ok()
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["volid"].as_str().unwrap().contains("-state-suspend-"))
                .map(|c| (c["volid"].as_str().unwrap().to_string(), c["size"].clone()))
                .collect::<Vec<_>>()
        };
        hibernate();
        let c = api.config("pve1", 100);
        assert_eq!(c["lock"], "suspended", "PVE {v}");
        let state = c["vmstate"].as_str().unwrap().to_string();
        assert!(
            state.starts_with("local-lvm:vm-100-state-suspend-20"),
            "PVE {v}: {state}"
        );
        assert_eq!(
            c["runningmachine"],
            format!("pc-i440fx-{qemu}+pve0"),
            "PVE {v}"
        );
        assert!(
            c["runningcpu"].as_str().unwrap().starts_with("kvm64,"),
            "PVE {v}"
        );
        assert_eq!(
            state_volumes(),
            [(state.clone(), json!(4596u64 << 20))],
            "PVE {v}"
        );
        let st = api.get("/nodes/pve1/qemu/100/status/current", &[]);
        assert_eq!(st.ok()["status"], "stopped", "PVE {v}");
        let r = api.put("/nodes/pve1/qemu/100/config", &[("cores", "4")]);
        assert_eq!(
            (r.status, r.message()),
            (500, "VM is locked (suspended)\n"),
            "PVE {v}"
        );
        // A start resumes from the state and removes it.
        let upid = api.post("/nodes/pve1/qemu/100/status/start", &[]).upid();
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        assert!(api
            .task_log(&upid)
            .contains(&"Resumed VM, removing state".to_string()));
        let st = api.get("/nodes/pve1/qemu/100/status/current", &[]);
        assert_eq!(st.ok()["status"], "running", "PVE {v}");
        let c = api.config("pve1", 100);
        for k in ["lock", "vmstate", "runningmachine", "runningcpu"] {
            assert!(c.get(k).is_none(), "PVE {v}: {k} in {c}");
        }
        assert!(state_volumes().is_empty(), "PVE {v}");
        // `delete=vmstate` discards the state and the lock; then changes are accepted again.
        hibernate();
        api.put("/nodes/pve1/qemu/100/config", &[("delete", "vmstate")])
            .ok();
        let c = api.config("pve1", 100);
        assert!(
            c.get("lock").is_none() && c.get("runningcpu").is_none(),
            "PVE {v}: {c}"
        );
        assert!(state_volumes().is_empty(), "PVE {v}");
        api.put("/nodes/pve1/qemu/100/config", &[("cores", "4")])
            .ok();
        // `destroy_vm` takes a hibernated VM, its state volume with it.
        let upid = api.post("/nodes/pve1/qemu/100/status/start", &[]).upid();
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        hibernate();
        let upid = api.delete("/nodes/pve1/qemu/100", &[]).upid();
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        assert!(state_volumes().is_empty(), "PVE {v}");
    }
}

/// pve-access-control `$privgroups`: PVE 8 has `VM.Monitor` and no `VM.GuestAgent.*` (nor
/// `VM.Replicate`), PVE 9 the reverse; the built-in roles follow, a role naming the other
/// release's privilege is refused at parameter verification (`verify_privname` behind the
/// `pve-priv-list` format), a seeded one drops it
/// (`parse_user_config`), and the guest agent needs `VM.Monitor` on PVE 8.
#[test]
fn privileges_are_the_releases_own() {
    for (v, own, other) in [
        ("8.4.1", "VM.Monitor", "VM.GuestAgent.Audit"),
        ("9.2.11", "VM.GuestAgent.Audit", "VM.Monitor"),
    ] {
        let sim = start_version(v);
        let api = Api::root(&sim);
        let roles = api.get("/access/roles", &[]).ok().clone();
        let privs = |id: &str| -> Vec<String> {
            roles
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["roleid"] == id)
                .unwrap()["privs"]
                .as_str()
                .unwrap()
                .split(',')
                .map(str::to_string)
                .collect()
        };
        let admin = privs("PVEVMAdmin");
        assert!(admin.contains(&own.to_string()), "PVE {v}: {admin:?}");
        assert!(!admin.contains(&other.to_string()), "PVE {v}: {admin:?}");
        let auditor = privs("PVEAuditor");
        assert_eq!(
            auditor.contains(&"VM.GuestAgent.Audit".to_string()),
            v.starts_with('9'),
            "PVE {v}: {auditor:?}"
        );
        assert_eq!(
            privs("Administrator").contains(&"VM.Replicate".to_string()),
            v.starts_with('9'),
            "PVE {v}"
        );
        // Refused by parameter verification (the `pve-priv-list` format), not by the handler.
        let r = api.post("/access/roles", &[("roleid", "Other"), ("privs", other)]);
        assert_eq!(
            (r.status, r.error("privs").to_string()),
            (400, format!("invalid format - invalid privilege '{other}'")),
            "PVE {v}"
        );
        let r = api.put("/access/roles/ProxShiftProvisioner", &[("privs", other)]);
        assert_eq!(r.status, 400, "PVE {v}: {:?}", r.body);
        api.post("/access/roles", &[("roleid", "Own"), ("privs", own)])
            .ok();
        // The lab's provisioner role is seeded with VM.GuestAgent.Audit: PVE 8 drops it.
        let seeded = privs("ProxShiftProvisioner");
        assert_eq!(
            seeded.contains(&"VM.GuestAgent.Audit".to_string()),
            v.starts_with('9'),
            "PVE {v}: {seeded:?}"
        );
        // ansible@pve (the `full` token) pings VM 100's agent only with the release's privilege.
        let mut ansible = Api::root(&sim);
        ansible.auth = Auth::Token(FULL_TOKEN.into());
        let ping = || ansible.post("/nodes/pve1/qemu/100/agent/ping", &[]).status;
        if v.starts_with('8') {
            assert_eq!(ping(), 403, "PVE {v}");
            api.put(
                "/access/roles/ProxShiftProvisioner",
                &[("privs", "VM.Monitor"), ("append", "1")],
            )
            .ok();
        }
        assert_eq!(ping(), 200, "PVE {v}");
    }
}

/// The lab playing `version`, with a qcow2 cloud image in `local`'s `import` content.
fn with_cloud_image(version: &str) -> pvesim::SimHandle {
    let mut seed = pvesim::Seed::lab();
    seed.cluster.version = version.into();
    assert!(seed.add_file("pve1", "local", "import/rhcos.x86_64.qcow2", 16 << 30));
    common::start_seed(seed)
}

/// qemu-server `create_disks` with `import-from`: `<storage>:0` only, from an `images` or
/// `import` volume, the new disk the source's size; a missing source fails the worker.
#[test]
fn import_from_as_create_disks_does_it() {
    for v in BOTH_VERSIONS {
        let sim = with_cloud_image(v);
        let api = Api::root(&sim);
        let upid = create(
            &api,
            &[
                ("vmid", "240"),
                (
                    "scsi0",
                    "local-lvm:0,import-from=local:import/rhcos.x86_64.qcow2",
                ),
            ],
        );
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        assert_eq!(
            api.config("pve1", 240)["scsi0"],
            "local-lvm:vm-240-disk-0,size=16G",
            "PVE {v}"
        );
        let r = api.post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "241"),
                (
                    "scsi0",
                    "local-lvm:32,import-from=local:import/rhcos.x86_64.qcow2",
                ),
            ],
        );
        assert_eq!(r.status, 400, "PVE {v}");
        assert!(
            r.error("scsi0").contains("requires special syntax"),
            "PVE {v}"
        );
        let r = api.post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "241"),
                (
                    "scsi0",
                    "local-lvm:0,import-from=local:iso/agent.x86_64.iso",
                ),
            ],
        );
        assert_eq!(
            r.error("scsi0"),
            "local:iso/agent.x86_64.iso has wrong type 'iso' - needs to be 'images' or 'import'",
            "PVE {v}"
        );
        let upid = create(
            &api,
            &[
                ("vmid", "242"),
                ("scsi0", "local-lvm:0,import-from=local:import/gone.qcow2"),
            ],
        );
        assert_eq!(
            api.exit(&upid),
            "unable to create VM 242 - cannot import from 'local:import/gone.qcow2' - could not get size of local:import/gone.qcow2",
            "PVE {v}"
        );
    }
}

/// qemu-server `create_disks` for `<storage>:cloudinit`: `vm-<vmid>-cloudinit` as a CD-ROM
/// (qcow2 in the VM's folder on a file storage), 4 MiB; destroyed with the VM.
#[test]
fn cloudinit_drive_as_create_disks_makes_it() {
    for v in BOTH_VERSIONS {
        let sim = start_version(v);
        let api = Api::root(&sim);
        let upid = create(
            &api,
            &[
                ("vmid", "250"),
                ("ide0", "local-lvm:cloudinit"),
                ("ciuser", "core"),
                ("sshkeys", "ssh-ed25519%20AAAAC3Nz%20a%40b"),
            ],
        );
        assert_eq!(api.exit(&upid), "OK", "PVE {v}");
        let c = api.config("pve1", 250);
        assert_eq!(
            c["ide0"], "local-lvm:vm-250-cloudinit,media=cdrom",
            "PVE {v}"
        );
        assert_eq!(c["sshkeys"], "ssh-ed25519%20AAAAC3Nz%20a%40b", "PVE {v}");
        api.put(
            "/nodes/pve1/qemu/250/config",
            &[("ide1", "nfs-shared:cloudinit")],
        )
        .ok();
        assert_eq!(
            api.config("pve1", 250)["ide1"],
            "nfs-shared:250/vm-250-cloudinit.qcow2,media=cdrom",
            "PVE {v}"
        );
        let upid = api.delete("/nodes/pve1/qemu/250", &[]).upid();
        assert_eq!(api.exit(&upid), "OK");
        let left = api
            .get("/nodes/pve1/storage/local-lvm/content", &[("vmid", "250")])
            .ok()
            .clone();
        assert_eq!(
            left,
            json!([]),
            "PVE {v}: the cloud-init volume goes with the VM"
        );
    }
}
