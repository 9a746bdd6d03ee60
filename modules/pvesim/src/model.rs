//! Seed format (YAML/JSON) and the simulator's runtime state.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::{Deserialize, Deserializer, Serialize};

/// Byte sizes in seeds: an integer (bytes) or a string with a K/M/G/T suffix (binary units).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(ByteSize(n)),
            // A seed (a layout a user wrote, e.g. through `proxshift rehearse`) may spell the unit in
            // lower case or after a space; the number itself follows PVE's rule.
            Raw::S(s) => parse_size(&s.split_whitespace().collect::<String>().to_uppercase())
                .map(ByteSize)
                .ok_or_else(|| serde::de::Error::custom(format!("invalid size '{s}'"))),
        }
    }
}

/// Parses `64G`, `512M`, `1.5T`, `1024` (bytes) into bytes, as pve-common's
/// `PVE::JSONSchema::parse_size` (the `disk-size` format) does: digits, an optional fraction
/// with at least one digit on each side of the '.', an optional uppercase K/M/G/T; the bytes
/// truncated (Perl's `int`). `1.`, `.5`, `1g` and `1 G` are refused, as PVE refuses them.
///
/// pvesim keeps its own size (and property-string) parsing on purpose: the simulator must
/// not share the client's (`pve-types`) assumptions, or a bug there would be mirrored here
/// and no test would see it. It follows qemu-server's behaviour, not our client's.
pub fn parse_size(s: &str) -> Option<u64> {
    let (num, mult): (&str, u64) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        b'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let ok = match num.split_once('.') {
        Some((whole, frac)) => digits(whole) && digits(frac),
        None => digits(num),
    };
    if !ok {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    Some((n * mult as f64) as u64)
}

/// Renders bytes the way qemu-server prints `size=` (largest exact unit).
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        let m = 1u64 << shift;
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{}", bytes / m, unit);
        }
    }
    bytes.to_string()
}

fn yes() -> bool {
    true
}
fn default_cpus() -> u32 {
    16
}
fn default_maxmem() -> ByteSize {
    ByteSize(64 << 30)
}
fn default_realm_user() -> String {
    "root@pam".into()
}

/// The whole seed file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    #[serde(default)]
    pub cluster: ClusterSeed,
    #[serde(default)]
    pub nodes: Vec<NodeSeed>,
    #[serde(default)]
    pub vms: Vec<VmSeed>,
    /// LXC containers (`pct`); their VMIDs share one space with the VMs'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cts: Vec<CtSeed>,
    #[serde(default)]
    pub users: Vec<UserSeed>,
    #[serde(default)]
    pub tokens: Vec<TokenSeed>,
    #[serde(default)]
    pub roles: Vec<RoleSeed>,
    #[serde(default)]
    pub acl: Vec<AclSeed>,
    #[serde(default)]
    pub pools: Vec<PoolSeed>,
}

/// A resource pool and its VM members (a VM is in at most one pool, as on PVE).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSeed {
    pub poolid: String,
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub vms: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSeed {
    #[serde(default = "default_cluster_name")]
    pub name: String,
    /// The PVE release played; `version: 8.3` unquoted (a YAML number) is read as `8.3`.
    #[serde(default = "default_version", deserialize_with = "version_text")]
    pub version: String,
    /// Lowest id `/cluster/nextid` hands out.
    #[serde(default = "default_nextid_lower")]
    pub nextid_lower: u32,
}

fn default_cluster_name() -> String {
    "pvesim".into()
}
/// A seed's `cluster.version` as text: a string as given, a YAML number (`8.3` unquoted) as it
/// prints — a YAML float keeps no trailing zero, so `8.10` would read as `8.1`; no PVE minor
/// has two digits. `PveVersion` then checks the text.
fn version_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        S(String),
        U(u64),
        F(f64),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::S(s) => s,
        Raw::U(n) => n.to_string(),
        Raw::F(x) => x.to_string(),
    })
}

fn default_version() -> String {
    "9.2.11".into()
}
fn default_nextid_lower() -> u32 {
    100
}

impl Default for ClusterSeed {
    fn default() -> Self {
        ClusterSeed {
            name: default_cluster_name(),
            version: default_version(),
            nextid_lower: default_nextid_lower(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSeed {
    pub name: String,
    #[serde(default = "yes")]
    pub online: bool,
    #[serde(default = "default_cpus")]
    pub cpus: u32,
    #[serde(default = "default_maxmem")]
    pub maxmem: ByteSize,
    #[serde(default)]
    pub storages: Vec<StorageSeed>,
    /// The node's network interfaces (`/etc/network/interfaces`); absent: a NIC `eno1` in a bridge
    /// `vmbr0` with an address in 192.0.2.0/24 (TEST-NET-1) by the node's position, as a fresh install has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<NetIfaceSeed>>,
}

/// One interface as `GET /nodes/{node}/network` lists it (pve-manager `PVE/API2/Network.pm`, `index`,
/// from `PVE::INotify::read_etc_network_interfaces`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NetIfaceSeed {
    pub iface: String,
    /// `eth`, `bridge`, `bond`, `vlan`, `alias`, `OVSBridge`, …
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default = "yes")]
    pub active: bool,
    /// IPv4 address in CIDR form (`192.0.2.11/24`), as the interfaces file writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_ports: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSeed {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Content types; defaults per storage type.
    #[serde(default)]
    pub content: Vec<String>,
    pub size: ByteSize,
    /// Free space; defaults to `size` minus the volumes it holds.
    #[serde(default)]
    pub free: Option<ByteSize>,
    /// Shared storages (nfs, rbd, …) are one pool seen by every node that lists them.
    #[serde(default)]
    pub shared: Option<bool>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Existing files (ISOs, templates) on this storage.
    #[serde(default)]
    pub files: Vec<FileSeed>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSeed {
    /// e.g. `iso/agent.x86_64.iso`
    pub name: String,
    #[serde(default = "default_file_size")]
    pub size: ByteSize,
}

fn default_file_size() -> ByteSize {
    ByteSize(1 << 30)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSeed {
    pub vmid: u32,
    pub node: String,
    /// Raw config keys exactly as `GET config` returns them (`scsi0: local-lvm:vm-100-disk-0,size=32G`).
    /// Volumes referenced here are created on their storages automatically.
    #[serde(default)]
    pub config: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub running: bool,
    /// Guest-agent IPs per NIC (`net0: ["10.0.0.5/24"]`) reported by network-get-interfaces.
    #[serde(default)]
    pub agent_ips: BTreeMap<String, Vec<String>>,
    /// Seconds (before time scaling) between start and the agent answering.
    #[serde(default)]
    pub agent_delay: Option<f64>,
    /// The guest ignores ACPI shutdown requests (shutdown times out).
    #[serde(default)]
    pub ignore_shutdown: bool,
    #[serde(default)]
    pub ha: bool,
    /// Snapshot sections by name (`ops::snapshot`), kept in a dump.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshots: BTreeMap<String, BTreeMap<String, String>>,
}

/// An LXC container as `/etc/pve/lxc/<vmid>.conf` holds it (pve-container `PVE::LXC::Config`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtSeed {
    pub vmid: u32,
    pub node: String,
    /// Raw config keys (`hostname`, `memory`, `rootfs: local-lvm:vm-200-disk-0,size=8G`,
    /// `net0: name=eth0,bridge=vmbr0,hwaddr=…,ip=dhcp`); volumes referenced are created.
    #[serde(default)]
    pub config: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub running: bool,
    /// Addresses (CIDR) per NIC key (`net0: ["10.0.0.5/24"]`) that `interfaces` reports while it runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ips: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSeed {
    pub userid: String,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default = "yes")]
    pub enable: bool,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub expire: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSeed {
    #[serde(default = "default_realm_user")]
    pub userid: String,
    pub tokenid: String,
    pub secret: String,
    #[serde(default = "yes")]
    pub privsep: bool,
    #[serde(default)]
    pub expire: u64,
    #[serde(default)]
    pub comment: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleSeed {
    pub roleid: String,
    pub privs: Vec<String>,
}

/// A resource pool: its comment and the VMs in it.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    pub comment: Option<String>,
    pub vms: std::collections::BTreeSet<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclSeed {
    pub path: String,
    pub role: String,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub group: Option<String>,
    /// Full token id `user@realm!name`.
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default = "yes")]
    pub propagate: bool,
}

/// Why a seed file cannot be read (its content is checked by `Sim::new`: `SeedError`).
#[derive(Debug, thiserror::Error)]
pub enum SeedFileError {
    #[error("cannot read seed {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("invalid seed: {0}")]
    Syntax(#[from] serde_yaml_ng::Error),
}

impl Seed {
    pub fn from_yaml(text: &str) -> Result<Seed, SeedFileError> {
        Ok(serde_yaml_ng::from_str(text)?)
    }
    pub fn from_file(path: &std::path::Path) -> Result<Seed, SeedFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| SeedFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        // YAML is a superset of JSON, so one parser serves both.
        Seed::from_yaml(&text)
    }
    /// Puts a file (`import/rhcos.qcow2`, `iso/x.iso`) of `size` bytes on `storage` of `node`;
    /// false when the seed has no such storage.
    pub fn add_file(&mut self, node: &str, storage: &str, name: &str, size: u64) -> bool {
        let st = self
            .nodes
            .iter_mut()
            .filter(|n| n.name == node)
            .flat_map(|n| n.storages.iter_mut())
            .find(|s| s.id == storage);
        match st {
            Some(st) => {
                st.files.push(FileSeed {
                    name: name.to_string(),
                    size: ByteSize(size),
                });
                true
            }
            None => false,
        }
    }

    /// The 3-node lab from `examples/lab.yaml`.
    pub fn lab() -> Seed {
        Seed::from_yaml(include_str!("../examples/lab.yaml")).expect("examples/lab.yaml is valid")
    }
}

// ---------------------------------------------------------------------------
// Runtime state

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub online: bool,
    pub cpus: u32,
    pub maxmem: u64,
    /// Storage ids configured on this node.
    pub storages: Vec<String>,
    pub network: Vec<NetIfaceSeed>,
}

#[derive(Debug, Clone)]
pub struct Volume {
    /// Volume name without the storage prefix (`vm-101-disk-0`, `iso/x.iso`).
    pub name: String,
    pub size: u64,
    pub format: String,
    pub content: String,
    pub vmid: Option<u32>,
    pub ctime: u64,
    pub parent: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Storage {
    pub id: String,
    pub kind: String,
    pub content: BTreeSet<String>,
    pub shared: bool,
    pub enabled: bool,
    pub total: u64,
    /// Space used by things other than tracked volumes (seeded "free" below size).
    pub other_used: u64,
    pub volumes: BTreeMap<String, Volume>,
}

impl Storage {
    pub fn used(&self) -> u64 {
        self.other_used + self.volumes.values().map(|v| v.size).sum::<u64>()
    }
    pub fn avail(&self) -> u64 {
        self.total.saturating_sub(self.used())
    }
    pub fn is_file_based(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "dir" | "nfs" | "cifs" | "cephfs" | "btrfs" | "glusterfs"
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Stopped,
    Running,
    Paused,
}

#[derive(Debug, Clone)]
pub struct Vm {
    pub vmid: u32,
    pub node: String,
    /// The applied config (`current=1` view), keys sorted like the file.
    pub conf: BTreeMap<String, String>,
    /// `[PENDING]` values.
    pub pending: BTreeMap<String, String>,
    /// Keys pending deletion (value: force flag).
    pub pending_delete: BTreeMap<String, bool>,
    /// Parameters of a create/clone in progress, applied when its task finishes.
    pub staged: BTreeMap<String, String>,
    pub state: RunState,
    pub started_at: Option<Instant>,
    pub agent_ready_at: Option<Instant>,
    pub agent_delay: Option<f64>,
    pub agent_ips: BTreeMap<String, Vec<String>>,
    pub ignore_shutdown: bool,
    pub ha: bool,
    /// Config file lock (flock) held until this instant by a running task or a fault.
    pub flock_until: Option<Instant>,
    /// The config's `[snapname]` sections: the config as it was, plus `snaptime`, `description`,
    /// `vmstate` (`ops::snapshot`).
    pub snapshots: BTreeMap<String, BTreeMap<String, String>>,
    pub pid: u32,
}

impl Vm {
    /// Stage a config update into `[PENDING]` (qemu-server does this under the config lock).
    pub fn stage(&mut self, c: &crate::tasks::ConfigChanges) {
        for k in &c.revert {
            self.pending.remove(k);
            self.pending_delete.remove(k);
        }
        for k in &c.delete {
            if k == "lock" {
                self.conf.remove("lock");
                continue;
            }
            self.pending.remove(k);
            if self.conf.contains_key(k) {
                self.pending_delete.insert(k.clone(), c.force);
            }
        }
        for (k, val) in &c.set {
            self.pending_delete.remove(k);
            if self.conf.get(k) == Some(val) {
                self.pending.remove(k); // no-op changes clear themselves
            } else {
                self.pending.insert(k.clone(), val.clone());
            }
        }
    }
}

impl Vm {
    pub fn is_template(&self) -> bool {
        self.conf.get("template").map(|v| v == "1").unwrap_or(false)
    }
    pub fn lock(&self) -> Option<&str> {
        self.conf.get("lock").map(|s| s.as_str())
    }
    pub fn running(&self) -> bool {
        self.state != RunState::Stopped
    }
    /// The pending-applied view (`GET config` default).
    pub fn effective_conf(&self) -> BTreeMap<String, String> {
        let mut c = self.conf.clone();
        for (k, v) in &self.pending {
            c.insert(k.clone(), v.clone());
        }
        for k in self.pending_delete.keys() {
            c.remove(k);
        }
        c
    }
    /// Memory in MiB from the `memory` property string (`[current=]N`).
    pub fn memory_mib(&self) -> u64 {
        memory_mib(self.conf.get("memory").map(|s| s.as_str()))
    }
    pub fn cpus(&self) -> u64 {
        let n = |k: &str, d: u64| self.conf.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
        n("vcpus", n("cores", 1) * n("sockets", 1))
    }
}

/// An LXC container: its config (`PVE::LXC::Config`), power state and the addresses its NICs report.
#[derive(Debug, Clone)]
pub struct Ct {
    pub vmid: u32,
    pub node: String,
    pub conf: BTreeMap<String, String>,
    pub running: bool,
    pub started_at: Option<Instant>,
    pub ips: BTreeMap<String, Vec<String>>,
    pub pid: u32,
}

impl Ct {
    /// `hostname`, else `CT<vmid>` (pve-container `PVE::LXC::vmstatus`).
    pub fn name(&self) -> String {
        self.conf
            .get("hostname")
            .cloned()
            .unwrap_or_else(|| format!("CT{}", self.vmid))
    }
    pub fn is_template(&self) -> bool {
        self.conf.get("template").map(|v| v == "1").unwrap_or(false)
    }
    /// `memory` in MiB (pve-container's default 512).
    pub fn memory_mib(&self) -> u64 {
        self.conf
            .get("memory")
            .and_then(|m| m.parse().ok())
            .unwrap_or(512)
    }
    /// `swap` in MiB (default 512).
    pub fn swap_mib(&self) -> u64 {
        self.conf
            .get("swap")
            .and_then(|m| m.parse().ok())
            .unwrap_or(512)
    }
    /// `cores`, else the node's CPUs (`vmstatus`: `$d->{cpus} = $conf->{cores} || $cpucount`).
    pub fn cpus(&self, node_cpus: u32) -> u64 {
        self.conf
            .get("cores")
            .and_then(|c| c.parse().ok())
            .unwrap_or(node_cpus as u64)
    }
    /// The `size=` of `rootfs`, in bytes.
    pub fn rootfs_size(&self) -> u64 {
        self.conf
            .get("rootfs")
            .and_then(|r| r.split(',').find_map(|p| p.strip_prefix("size=")))
            .and_then(parse_size)
            .unwrap_or(0)
    }
}

pub fn memory_mib(spec: Option<&str>) -> u64 {
    spec.map(|s| s.trim_start_matches("current="))
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(512)
}

#[derive(Debug, Clone)]
pub struct User {
    pub userid: String,
    pub password: Option<String>,
    pub enable: bool,
    pub groups: Vec<String>,
    pub expire: u64,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub userid: String,
    pub tokenid: String,
    pub secret: String,
    pub privsep: bool,
    pub expire: u64,
    pub comment: Option<String>,
}

impl Token {
    pub fn full_id(&self) -> String {
        format!("{}!{}", self.userid, self.tokenid)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AclEntry {
    pub path: String,
    /// `user`, `group` or `token`.
    #[serde(rename = "type")]
    pub kind: String,
    pub ugid: String,
    pub roleid: String,
    pub propagate: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_pve_common_parse_size() {
        assert_eq!(parse_size("64G"), Some(64 << 30));
        assert_eq!(parse_size("1.5T"), Some(3 << 39));
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("0.5K"), Some(512));
        // `^(\d+(\.\d+)?)([KMGT])?$`: both sides of the '.' need a digit, units are uppercase.
        for bad in [
            "1.", ".5", "1.G", ".5G", "1g", "1 G", " 1G", "+1G", "1.5.5", "", "G", "-1",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        // Perl's int(): the fraction of a byte is dropped, not rounded.
        assert_eq!(parse_size("1.9"), Some(1));
    }

    #[test]
    fn seed_sizes_take_any_unit_case_but_pve_numbers() {
        let size = |t: &str| serde_yaml_ng::from_str::<ByteSize>(t).map(|b| b.0).ok();
        assert_eq!(size("128g"), Some(128 << 30));
        assert_eq!(size("\"1.5 T\""), Some(3 << 39));
        assert_eq!(size("1024"), Some(1024));
        assert_eq!(size("\".5G\""), None);
        assert_eq!(size("\"1.G\""), None);
    }

    #[test]
    fn an_unquoted_seed_version_is_read_as_written() {
        let seed: ClusterSeed = serde_yaml_ng::from_str("version: 8.3").unwrap();
        assert_eq!(seed.version, "8.3");
        let seed: ClusterSeed = serde_yaml_ng::from_str("version: \"8.4.1\"").unwrap();
        assert_eq!(seed.version, "8.4.1");
        assert!(seed
            .version
            .parse::<crate::sim::version::PveVersion>()
            .is_ok());
    }
}
