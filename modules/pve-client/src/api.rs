//! Typed reads and the VM write calls both modules share. Real servers send booleans as `0`/`1` and
//! some integers as strings (`nextid`, `memory`), so the types here accept both.

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::client::{Client, Params};
use crate::error::Error;
use crate::task::TaskOutcome;

/// `0`/`1`, `true`/`false`, `"1"` → bool.
pub fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Bool(b) => b,
        Value::Number(n) => n.as_f64().unwrap_or(0.0) != 0.0,
        Value::String(s) => matches!(s.as_str(), "1" | "true" | "yes" | "on"),
        _ => false,
    })
}

/// A number or a numeric string → u64 (missing/garbage → 0).
pub fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(value_u64(&Value::deserialize(d)?).unwrap_or(0))
}

/// A number or a numeric string as u64.
pub fn value_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// One VM (or container) of `GET /cluster/resources?type=vm`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ClusterVm {
    #[serde(deserialize_with = "lenient_u64")]
    pub vmid: u64,
    #[serde(default)]
    pub name: Option<String>,
    pub node: String,
    /// `qemu` or `lxc`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub template: bool,
    /// `;`-separated, as PVE stores them.
    #[serde(default)]
    pub tags: Option<String>,
    #[serde(default)]
    pub lock: Option<String>,
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub maxmem: u64,
    #[serde(default)]
    pub hastate: Option<String>,
}

impl ClusterVm {
    pub fn tag_list(&self) -> Vec<String> {
        self.tags
            .as_deref()
            .unwrap_or("")
            .split([';', ',', ' '])
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// One entry of `GET /nodes`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct NodeInfo {
    pub node: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub maxmem: u64,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub mem: u64,
}

impl NodeInfo {
    pub fn online(&self) -> bool {
        self.status.as_deref() == Some("online")
    }
}

/// `GET /nodes/{node}/storage` entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct StorageInfo {
    pub storage: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Comma-separated content types (`images,iso`).
    #[serde(default)]
    pub content: String,
    #[serde(default = "yes", deserialize_with = "lenient_bool")]
    pub enabled: bool,
    #[serde(default = "yes", deserialize_with = "lenient_bool")]
    pub active: bool,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub shared: bool,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub total: u64,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub used: u64,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub avail: u64,
    /// With `format=1` on PVE 9.1 and later: `{"default":"raw","supported":["raw","qcow2"]}`.
    /// Read both forms with [`StorageInfo::format_info`].
    #[serde(default)]
    pub formats: Option<StorageFormats>,
    /// With `format=1` on PVE 8 and 9.0 (deprecated, still sent by 9.1+): `format:
    /// [{"raw":1,"qcow2":1}, "raw"]` — pve-storage `storage_info`. PVE 8 sends it only for
    /// storage types that declare formats (not LVM, LVM-thin, RBD, iSCSI).
    #[serde(default, rename = "format", deserialize_with = "legacy_formats")]
    pub legacy_format: Option<StorageFormats>,
}

/// pve-storage's `[{FORMAT: 1, …}, DEFAULT]` pair (anything else: none).
fn legacy_formats<'de, D: Deserializer<'de>>(d: D) -> Result<Option<StorageFormats>, D::Error> {
    let v = Value::deserialize(d)?;
    let Some([valid, default]) = v.as_array().map(Vec::as_slice) else {
        return Ok(None);
    };
    let Some(valid) = valid.as_object() else {
        return Ok(None);
    };
    let mut supported: Vec<String> = valid
        .iter()
        .filter(|(_, on)| value_u64(on).is_some_and(|n| n != 0) || on.as_bool() == Some(true))
        .map(|(f, _)| f.clone())
        .collect();
    supported.sort();
    Ok(Some(StorageFormats {
        default: default.as_str().map(str::to_string),
        supported,
    }))
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct StorageFormats {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub supported: Vec<String>,
}

impl StorageInfo {
    pub fn has_content(&self, content: &str) -> bool {
        self.content.split(',').any(|c| c.trim() == content)
    }

    /// The storage's formats, whichever form the server sent (`formats` first, else the old
    /// `format` pair); `None` when it sent neither (PVE 8 for LVM and the like).
    pub fn format_info(&self) -> Option<&StorageFormats> {
        self.formats.as_ref().or(self.legacy_format.as_ref())
    }
}

/// `GET /nodes/{node}/storage/{storage}/content` entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Volume {
    pub volid: String,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub size: u64,
    #[serde(default)]
    pub content: Option<String>,
}

/// One entry of `GET …/qemu/{vmid}/pending`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PendingItem {
    pub key: String,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub pending: Option<Value>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub delete: u64,
}

impl PendingItem {
    /// Whether this key has a change waiting for a restart.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some() || self.delete > 0
    }
}

/// Memory of `GET /nodes/{node}/status`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
pub struct NodeMemory {
    #[serde(default, deserialize_with = "lenient_u64")]
    pub total: u64,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub used: u64,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub free: u64,
}

fn vm_path(node: &str, vmid: u32) -> String {
    format!("/nodes/{node}/qemu/{vmid}")
}

/// The API path of a volume: `STORAGE:NAME` → `/nodes/{node}/storage/STORAGE/content/STORAGE%3ANAME`
/// (the whole volume ID as one path segment, `:` and `/` encoded, as pvesh and the GUI send it).
fn volume_path(node: &str, volid: &str) -> Result<String, Error> {
    let storage = match volid.split_once(':') {
        Some((s, name)) if !s.is_empty() && !name.is_empty() => s,
        _ => {
            return Err(Error::invalid(format!(
                "'{volid}' is not a volume ID (STORAGE:NAME, e.g. local:iso/agent.iso)"
            )))
        }
    };
    Ok(format!(
        "/nodes/{node}/storage/{}/content/{}",
        path_segment(storage),
        path_segment(volid)
    ))
}

/// Percent-encode everything but RFC 3986's unreserved characters.
pub(crate) fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Client {
    /// `GET /version` (`version`, `release`, `repoid`).
    pub fn version(&self) -> Result<Value, Error> {
        self.get("/version", &Params::new())
    }

    pub fn nodes(&self) -> Result<Vec<NodeInfo>, Error> {
        self.get_as("/nodes", &Params::new())
    }

    /// `GET /nodes/{node}/network`: the node's interfaces as PVE lists them (`iface`, `type`,
    /// `active`, `address`, `gateway`, …), raw.
    pub fn node_network(&self, node: &str) -> Result<Vec<Value>, Error> {
        self.get_as(&format!("/nodes/{node}/network"), &Params::new())
    }

    pub fn node_memory(&self, node: &str) -> Result<NodeMemory, Error> {
        let v = self.get(&format!("/nodes/{node}/status"), &Params::new())?;
        serde_json::from_value(v.get("memory").cloned().unwrap_or(Value::Null)).map_err(|e| {
            Error::invalid(format!(
                "node '{node}' status has no usable memory figures: {e}"
            ))
        })
    }

    /// Every QEMU VM (templates included) of the cluster: the one call that finds VMs by id or name.
    pub fn cluster_vms(&self) -> Result<Vec<ClusterVm>, Error> {
        Ok(self
            .cluster_guests()?
            .into_iter()
            .filter(|v| v.kind == "qemu")
            .collect())
    }

    /// Every guest of the cluster, QEMU VMs and LXC containers (`kind` `qemu` or `lxc`): one
    /// `/cluster/resources?type=vm`, whose VMIDs are one space for both kinds.
    pub fn cluster_guests(&self) -> Result<Vec<ClusterVm>, Error> {
        self.get_as("/cluster/resources", &Params::new().set("type", "vm"))
    }

    /// An LXC container's config (`GET /nodes/{node}/lxc/{vmid}/config`, pending values applied).
    pub fn ct_config(&self, node: &str, vmid: u32) -> Result<Map<String, Value>, Error> {
        match self.get(&format!("/nodes/{node}/lxc/{vmid}/config"), &Params::new())? {
            Value::Object(m) => Ok(m),
            other => Err(Error::invalid(format!(
                "config of CT {vmid} is not an object: {other}"
            ))),
        }
    }

    /// A running container's interfaces as Proxmox reads them from it
    /// (`GET /nodes/{node}/lxc/{vmid}/interfaces`: `name`, `hwaddr`, `inet`, `inet6`), raw.
    pub fn ct_interfaces(&self, node: &str, vmid: u32) -> Result<Vec<Value>, Error> {
        self.get_as(
            &format!("/nodes/{node}/lxc/{vmid}/interfaces"),
            &Params::new(),
        )
    }

    /// A guest's snapshots (`GET /nodes/{node}/{kind}/{vmid}/snapshot`, `kind` `qemu` or `lxc`): one
    /// entry per snapshot, then `current` (qemu-server's and pve-container's `snapshot_list`), raw.
    pub fn guest_snapshots(&self, node: &str, kind: &str, vmid: u32) -> Result<Vec<Value>, Error> {
        self.get_as(
            &format!("/nodes/{node}/{kind}/{vmid}/snapshot"),
            &Params::new(),
        )
    }

    /// `GET /nodes/{node}/qemu/{vmid}/feature` (`vm_feature`): whether every disk of the VM can
    /// take `feature` (`snapshot`, `clone`, `copy`) as its storages are configured.
    pub fn vm_has_feature(&self, node: &str, vmid: u32, feature: &str) -> Result<bool, Error> {
        #[derive(Deserialize)]
        struct Feature {
            #[serde(rename = "hasFeature", default, deserialize_with = "lenient_bool")]
            has: bool,
        }
        let f: Feature = self.get_as(
            &format!("/nodes/{node}/qemu/{vmid}/feature"),
            &Params::new().set("feature", feature),
        )?;
        Ok(f.has)
    }

    /// Is `vmid` free cluster-wide? (`GET /cluster/nextid?vmid=N`: 400 "already exists" when taken).
    pub fn vmid_is_free(&self, vmid: u32) -> Result<bool, Error> {
        match self.get("/cluster/nextid", &Params::new().set("vmid", vmid)) {
            Ok(_) => Ok(true),
            Err(e) if e.status() == Some(400) && e.is_already_exists() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `GET /cluster/nextid` (a string on real servers, a number in the schema).
    pub fn next_id(&self) -> Result<u32, Error> {
        let v = self.get("/cluster/nextid", &Params::new())?;
        value_u64(&v)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::invalid(format!("/cluster/nextid returned {v}")))
    }

    /// A VM's config: pending values applied (`current=false`) or the running ones (`current=true`).
    pub fn vm_config(
        &self,
        node: &str,
        vmid: u32,
        current: bool,
    ) -> Result<Map<String, Value>, Error> {
        let q = if current {
            Params::new().flag("current", true)
        } else {
            Params::new()
        };
        match self.get(&format!("{}/config", vm_path(node, vmid)), &q)? {
            Value::Object(m) => Ok(m),
            other => Err(Error::invalid(format!(
                "config of VM {vmid} is not an object: {other}"
            ))),
        }
    }

    pub fn vm_pending(&self, node: &str, vmid: u32) -> Result<Vec<PendingItem>, Error> {
        self.get_as(&format!("{}/pending", vm_path(node, vmid)), &Params::new())
    }

    /// `GET …/status/current`.
    pub fn vm_status(&self, node: &str, vmid: u32) -> Result<Value, Error> {
        self.get(
            &format!("{}/status/current", vm_path(node, vmid)),
            &Params::new(),
        )
    }

    pub fn storages(&self, node: &str) -> Result<Vec<StorageInfo>, Error> {
        self.get_as(
            &format!("/nodes/{node}/storage"),
            &Params::new().flag("format", true),
        )
    }

    pub fn storage_content(
        &self,
        node: &str,
        storage: &str,
        content: Option<&str>,
    ) -> Result<Vec<Volume>, Error> {
        self.get_as(
            &format!("/nodes/{node}/storage/{storage}/content"),
            &Params::new().opt("content", content),
        )
    }

    /// Delete a storage volume and wait for its `imgdel` task: `DELETE
    /// /nodes/{node}/storage/{storage}/content/{volume}` (pve-storage `PVE/API2/Storage/Content.pm`,
    /// `delete`). PVE ≥ 6.0 answers with the task's UPID; a server without the worker (older) or a
    /// call with `delay` that finished in time answers `null` — [`Client::run_task`] takes both
    /// (`Ok(None)` for `null`). A volume that is not there is not an error on PVE: `free_image` warns
    /// and the task ends `WARNINGS: 1` (a success), so a repeated delete is harmless; callers that
    /// report `changed` list the storage's content first ([`Client::storage_content`]). What PVE
    /// refuses comes back typed: a missing storage is [`Error::is_not_found`], a missing
    /// `Datastore.Allocate` a 403 ([`Error::status`]), a failed worker [`Error::Task`].
    pub fn delete_volume(
        &self,
        node: &str,
        volid: &str,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        let path = volume_path(node, volid)?;
        self.run_task(timeout, || self.delete(&path, &Params::new()))
    }

    /// `POST /nodes/{node}/qemu` and wait for `qmcreate`. Not sent again after a gateway error
    /// ([`Client::post_once`]).
    pub fn create_vm(
        &self,
        node: &str,
        params: &Params,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        self.run_task(timeout, || {
            self.post_once(&format!("/nodes/{node}/qemu"), params)
        })
    }

    /// `POST …/{vmid}/clone` and wait for `qmclone`. Not sent again after a gateway error
    /// ([`Client::post_once`]).
    pub fn clone_vm(
        &self,
        node: &str,
        source: u32,
        params: &Params,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        self.run_task(timeout, || {
            self.post_once(&format!("{}/clone", vm_path(node, source)), params)
        })
    }

    /// Asynchronous `POST …/config` and wait for `qmconfig`.
    pub fn update_config(
        &self,
        node: &str,
        vmid: u32,
        params: &Params,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        self.run_task(timeout, || {
            self.post(&format!("{}/config", vm_path(node, vmid)), params)
        })
    }

    /// Add a VM to a resource pool, or take it out (`PUT /pools/{poolid}`: the form PVE 7 and 8 both
    /// serve; `allow-move` exists only from 8.1, so a move is a removal then an addition).
    pub fn set_pool_member(&self, pool: &str, vmid: u32, member: bool) -> Result<(), Error> {
        let mut p = Params::new().set("vms", vmid);
        if !member {
            p = p.flag("delete", true);
        }
        self.put(&format!("/pools/{pool}"), &p).map(|_| ())
    }

    /// `PUT …/resize` (`size` absolute like `120G`, or `+10G`) and wait for the task.
    pub fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        disk: &str,
        size: &str,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        let p = Params::new().set("disk", disk).set("size", size);
        self.run_task(timeout, || {
            self.put(&format!("{}/resize", vm_path(node, vmid)), &p)
        })
    }

    /// `DELETE /nodes/{node}/qemu/{vmid}` with options in the query string, and wait for `qmdestroy`.
    pub fn destroy_vm(
        &self,
        node: &str,
        vmid: u32,
        purge: bool,
        destroy_unreferenced_disks: bool,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        let q = Params::new()
            .flag("purge", purge)
            .flag("destroy-unreferenced-disks", destroy_unreferenced_disks);
        self.run_task(timeout, || self.delete(&vm_path(node, vmid), &q))
    }

    /// `POST …/status/{action}` (`start`, `stop`, `shutdown`, …) and wait for its task.
    pub fn vm_action(
        &self,
        node: &str,
        vmid: u32,
        action: &str,
        params: &Params,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        self.run_task(timeout, || {
            self.post(&format!("{}/status/{action}", vm_path(node, vmid)), params)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_volume_is_one_path_segment() {
        assert_eq!(
            volume_path("pve1", "local:iso/c1-agent-0123456789ab.iso").unwrap(),
            "/nodes/pve1/storage/local/content/local%3Aiso%2Fc1-agent-0123456789ab.iso"
        );
        assert_eq!(
            volume_path("pve1", "my store:iso/a b.iso").unwrap(),
            "/nodes/pve1/storage/my%20store/content/my%20store%3Aiso%2Fa%20b.iso"
        );
        for bad in ["iso/a.iso", ":iso/a.iso", "local:", ""] {
            let e = volume_path("pve1", bad).unwrap_err();
            assert!(matches!(e, Error::Invalid(_)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn real_server_typing_is_accepted() {
        let vms: Vec<ClusterVm> = serde_json::from_value(json!([
            {"id":"qemu/101","type":"qemu","vmid":101,"node":"pve1","name":"m0","template":0,"tags":"ocp;proxshift","maxmem":17179869184u64,"status":"running"},
            {"id":"qemu/900","type":"qemu","vmid":"900","node":"pve2","template":1,"extra":"ignored"}
        ]))
        .unwrap();
        assert_eq!(vms[0].tag_list(), vec!["ocp", "proxshift"]);
        assert!(vms[1].template && vms[1].vmid == 900 && vms[1].name.is_none());
        let st: StorageInfo = serde_json::from_value(json!({
            "storage":"local-lvm","type":"lvmthin","content":"images,rootdir","avail":"1000","shared":0,
            "formats":{"default":"raw","supported":["raw"]}
        }))
        .unwrap();
        assert!(st.enabled && st.active && !st.shared && st.avail == 1000);
        assert!(st.has_content("images") && !st.has_content("iso"));
        assert_eq!(st.format_info().unwrap().supported, vec!["raw"]);
        // PVE 8 / 9.0: the old pair only.
        let st: StorageInfo = serde_json::from_value(json!({
            "storage":"local","type":"dir","format":[{"raw":1,"qcow2":1,"vmdk":1},"raw"]
        }))
        .unwrap();
        let f = st.format_info().unwrap();
        assert_eq!(f.supported, vec!["qcow2", "raw", "vmdk"]);
        assert_eq!(f.default.as_deref(), Some("raw"));
        // PVE 8 sends nothing for LVM; garbage is no formats either.
        for extra in [json!({}), json!({"format": "raw"}), json!({"format": [1]})] {
            let mut v = json!({"storage":"vg","type":"lvm"});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let st: StorageInfo = serde_json::from_value(v).unwrap();
            assert!(st.format_info().is_none(), "{st:?}");
        }
        let p: Vec<PendingItem> = serde_json::from_value(json!([
            {"key":"cores","value":2,"pending":4},{"key":"net1","delete":1},{"key":"name","value":"a"}
        ]))
        .unwrap();
        assert_eq!(p.iter().filter(|i| i.is_pending()).count(), 2);
        assert_eq!(value_u64(&json!("101")), Some(101));
    }
}
