//! `POST /nodes/{node}/lxc` — pve-container's `create_vm` (`src/PVE/API2/LXC.pm`): the VMID
//! check, pool and permission checks, the template and storage checks, then the `vzcreate`
//! worker that allocates the root volume and writes the config. Restores are not simulated.

use std::collections::BTreeMap;

use crate::auth::Principal;
use crate::error::{ErrorReply, ReplyResult};
use crate::model::{format_size, Ct, Volume};
use crate::sim::{Sim, Spawn};
use crate::tasks::{Action, TaskResult};
use crate::vmconfig::{normalize_tags, random_mac, split_volid};

use super::{existing_pool, vm_path};

/// A create request as parsed by the handler.
pub struct CreateCt {
    pub node: String,
    pub vmid: u32,
    pub ostemplate: String,
    /// `storage` (default `local`): where `rootfs` goes when it is only a size or not given.
    pub storage: String,
    pub pool: Option<String>,
    pub start: bool,
    pub restore: bool,
    /// Config keys as given (`hostname`, `memory`, `rootfs`, `net0`, …).
    pub keys: BTreeMap<String, String>,
}

/// Checks the request, reserves the VMID with an empty config and starts `vzcreate`.
pub fn start(sim: &mut Sim, who: &Principal, req: CreateCt) -> ReplyResult<String> {
    let CreateCt {
        node,
        vmid,
        ostemplate,
        storage,
        pool,
        start,
        restore,
        mut keys,
    } = req;
    if restore {
        return Err(ErrorReply::die(
            "pvesim: restoring a container is not simulated",
        ));
    }
    // `PVE::Cluster::check_vmid_unused($vmid)` before anything else.
    sim.check_vmid_unused(vmid).map_err(ErrorReply::die)?;
    let pool = existing_pool(sim, pool)?;
    let pool_ok = pool
        .as_ref()
        .is_some_and(|p| sim.access.has(who, &format!("/pool/{p}"), "VM.Allocate"));
    if !pool_ok {
        sim.access
            .require(who, &vm_path(vmid), &["VM.Allocate"], false)?;
    }
    // `check_volume_access` on the template.
    if !sim.volume_exists(&node, &ostemplate) {
        return Err(ErrorReply::die(format!(
            "volume '{ostemplate}' does not exist"
        )));
    }
    // `rootfs` as a bare size gets the default storage; none at all is `$storage:4` (4 GiB).
    let rootfs = match keys.remove("rootfs") {
        Some(r) if r.parse::<f64>().is_ok() => format!("{storage}:{r}"),
        Some(r) => r,
        None => format!("{storage}:4"),
    };
    let sid = rootfs.split(':').next().unwrap_or_default().to_string();
    // `$check_and_activate_storage`.
    let st = sim
        .storage(&node, &sid)
        .ok_or_else(|| ErrorReply::die(format!("storage '{sid}' does not exist")))?;
    if !st.content.contains("rootdir") {
        return Err(ErrorReply::param(
            "storage",
            format!("storage '{sid}' does not support container directories"),
        ));
    }
    sim.access.require(
        who,
        &format!("/storage/{sid}"),
        &["Datastore.AllocateSpace"],
        false,
    )?;
    keys.insert("rootfs".into(), rootfs);
    sim.cts.insert(
        vmid,
        Ct {
            vmid,
            node: node.clone(),
            conf: BTreeMap::new(),
            running: false,
            started_at: None,
            ips: BTreeMap::new(),
            pid: 0,
        },
    );
    Ok(sim.spawn(
        who,
        Spawn {
            node,
            kind: "vzcreate".to_string(),
            id: vmid.to_string(),
            action: Action::CreateCt {
                vmid,
                keys,
                ostemplate,
                pool,
                start,
            },
            base_secs: 2.0,
            flock: None,
            fail: None,
        },
    ))
}

/// The `vzcreate` worker: allocates the root volume (`create_disks`), writes the config with
/// upstream's defaults (`hostname` `CT<vmid>`, `memory` 512, `swap` 512, a `hwaddr` per NIC from
/// `update_pct_config`), adds the container to its pool and starts it when asked. A failure
/// removes the container again.
pub fn finish(
    sim: &mut Sim,
    vmid: u32,
    mut keys: BTreeMap<String, String>,
    ostemplate: &str,
    pool: Option<&str>,
    start: bool,
) -> TaskResult {
    let node = sim.cts.get(&vmid).ok_or("CT vanished")?.node.clone();
    let rootfs = keys.remove("rootfs").unwrap_or_default();
    let rootfs = match allocate_rootfs(sim, &node, vmid, &rootfs) {
        Ok(r) => r,
        Err(e) => {
            sim.cts.remove(&vmid);
            return Err(format!("unable to create CT {vmid} - {e}").into());
        }
    };
    keys.insert("rootfs".into(), rootfs);
    for (k, v) in keys.iter_mut() {
        if k.starts_with("net") && !v.split(',').any(|p| p.starts_with("hwaddr=")) {
            *v = format!("{v},hwaddr={}", random_mac(&sim.opts.mac_prefix));
        }
    }
    if let Some(t) = keys.get("tags").cloned() {
        keys.insert("tags".into(), normalize_tags(&t));
    }
    keys.entry("hostname".into())
        .or_insert_with(|| format!("CT{vmid}"));
    keys.entry("memory".into()).or_insert_with(|| "512".into());
    keys.entry("swap".into()).or_insert_with(|| "512".into());
    keys.entry("arch".into()).or_insert_with(|| "amd64".into());
    keys.entry("ostype".into())
        .or_insert_with(|| ostype_of(ostemplate));
    sim.set_pool(vmid, pool);
    let now = sim.effect_now();
    let pid = if start { sim.alloc_pid() } else { 0 };
    let ct = sim.cts.get_mut(&vmid).ok_or("CT vanished")?;
    ct.conf = keys;
    if start {
        ct.running = true;
        ct.started_at = Some(now);
        ct.pid = pid;
    }
    Ok(0)
}

/// The OS type `PVE::LXC::Setup` detects, guessed from the template's file name
/// (`debian-12-standard_…` → `debian`); `unmanaged` when it names no known one.
fn ostype_of(ostemplate: &str) -> String {
    const KNOWN: &[&str] = &[
        "debian",
        "ubuntu",
        "centos",
        "fedora",
        "opensuse",
        "archlinux",
        "alpine",
        "gentoo",
        "nixos",
        "devuan",
        "almalinux",
        "rockylinux",
    ];
    let file = ostemplate.rsplit('/').next().unwrap_or_default();
    let first = file.split(['-', '_']).next().unwrap_or_default();
    KNOWN
        .iter()
        .find(|k| **k == first)
        .map(|k| k.to_string())
        .unwrap_or_else(|| "unmanaged".into())
}

/// `STORAGE:SIZE_GIB` → a new `vm-<vmid>-disk-N` (`subvol-…` on ZFS, a directory's
/// `<vmid>/vm-…raw` file) volume; an existing volume is taken as it is.
fn allocate_rootfs(sim: &mut Sim, node: &str, vmid: u32, spec: &str) -> Result<String, String> {
    let (volume, rest) = spec.split_once(',').unwrap_or((spec, ""));
    let (sid, size) = match split_volid(volume) {
        Some((sid, size)) => (sid.to_string(), size.to_string()),
        None => return Err(format!("invalid rootfs '{spec}'")),
    };
    let Ok(gib) = size.parse::<f64>() else {
        return Ok(spec.to_string()); // an existing volume
    };
    let bytes = (gib * (1u64 << 30) as f64) as u64;
    let st = sim
        .storage_mut(node, &sid)
        .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
    if bytes > st.avail() {
        return Err(format!("storage '{sid}': not enough space for {size}G"));
    }
    let n = (0..)
        .find(|i| {
            !st.volumes
                .keys()
                .any(|k| k.contains(&format!("-{vmid}-disk-{i}")))
        })
        .unwrap_or(0);
    let name = match st.kind.as_str() {
        "zfspool" => format!("subvol-{vmid}-disk-{n}"),
        _ if st.is_file_based() => format!("{vmid}/vm-{vmid}-disk-{n}.raw"),
        _ => format!("vm-{vmid}-disk-{n}"),
    };
    st.volumes.insert(
        name.clone(),
        Volume {
            name: name.clone(),
            size: bytes,
            format: if st.kind == "zfspool" {
                "subvol"
            } else {
                "raw"
            }
            .into(),
            content: "rootdir".into(),
            vmid: Some(vmid),
            ctime: 0,
            parent: None,
        },
    );
    let tail = if rest.is_empty() {
        String::new()
    } else {
        format!(",{rest}")
    };
    Ok(format!("{sid}:{name}{tail},size={}", format_size(bytes)))
}
