//! The simulated cluster's state, clock and lookups. What each API operation checks and does
//! lives in `crate::ops`; here are the pieces they share, one file each: `seed` (seed and dump),
//! `worker` (tasks and their completion), `volumes` (allocation), `locks` (config locks) and
//! `version` (the PVE release played, which operations match on).

mod locks;
mod seed;
pub mod version;
mod volumes;
mod worker;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::auth::Access;
use crate::error::{no_such_vm, ReplyResult};
use crate::faults::{Fault, FaultError, Faults};
use crate::model::{ClusterSeed, Ct, Node, Pool, Storage, Vm};
use crate::tasks::Task;
use crate::vmconfig::{parse_net, print_net, random_mac, render, sha1_hex};

pub use seed::SeedError;
pub use version::{Generation, PveVersion};
pub use worker::Spawn;

/// Behaviour switches (CLI flags, `PUT /_pvesim/options`, `SimHandle::set_options`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Multiplies every task duration, lock timeout and agent delay; 0 = instant.
    pub time_scale: f64,
    /// `true`: error bodies carry `message` where the release does (`Sim::error_message_in_body`:
    /// pve-manager ≥ 8.3.4); `false`: `{"data":null}` only, whatever the release.
    pub error_message: bool,
    /// Delay before every 401 answer, in milliseconds (PVE: ~3000).
    pub auth_failure_delay_ms: u64,
    /// Fail `qmstart` when the node's running VMs would exceed its memory.
    pub check_memory_on_start: bool,
    /// Seconds (before scaling) between a VM start and its guest agent answering.
    pub agent_delay: f64,
    /// Config file lock timeout in seconds (before scaling).
    pub lock_timeout: f64,
    pub mac_prefix: String,
    /// Cluster quorum; without it every write fails with `cluster not ready - no quorum?`.
    pub quorate: bool,
    /// Seconds (before scaling) after the agent comes up during which it reports only
    /// link-local IPv6 addresses (DHCP/SLAAC not done yet).
    pub agent_ip_delay: f64,
    /// More concurrent clones onto one storage than this fail with PVE's storage lock
    /// timeout (0 = unlimited).
    pub max_parallel_clones_per_storage: u32,
    /// Seconds (before scaling; at least one) between the HA manager noticing a node offline
    /// and fencing it, after which its HA services are recovered elsewhere (PVE: about two
    /// minutes, the lost node's watchdog expiring and its lock being taken over).
    pub ha_fence_delay: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            time_scale: 0.0,
            error_message: true,
            auth_failure_delay_ms: 0,
            check_memory_on_start: true,
            agent_delay: 20.0,
            lock_timeout: 10.0,
            mac_prefix: "BC:24:11".into(),
            quorate: true,
            agent_ip_delay: 0.0,
            max_parallel_clones_per_storage: 0,
            ha_fence_delay: 120.0,
        }
    }
}

/// One recorded API request (secrets redacted).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestRecord {
    pub seq: u64,
    pub method: String,
    /// API path without `/api2/json`, e.g. `/nodes/pve1/qemu`.
    pub path: String,
    pub params: BTreeMap<String, String>,
    /// Authenticated id (`user@realm` or `user@realm!token`), if any.
    pub user: Option<String>,
    pub status: u16,
    /// Deliberate delay before the answer was sent, in milliseconds: an injected `latency`
    /// fault plus the 401 delay (`auth_failure_delay_ms`).
    #[serde(default)]
    pub delay_ms: u64,
    /// How often the request was parked waiting for a VM's config file lock (held by a
    /// worker or a `hold_file_lock` fault) before it was answered.
    #[serde(default)]
    pub lock_waits: u32,
}

impl RequestRecord {
    /// POST/PUT/DELETE — what check mode must never send.
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }
}

pub const REDACTED: &str = "**redacted**";
const SECRET_PARAMS: &[&str] = &[
    "password",
    "cipassword",
    "otp",
    "tfa-challenge",
    "new-password",
];

pub fn redact(params: &mut BTreeMap<String, String>) {
    for k in SECRET_PARAMS {
        if let Some(v) = params.get_mut(*k) {
            *v = REDACTED.into();
        }
    }
}

pub struct Sim {
    pub opts: Options,
    /// The PVE release played (from the seed's `cluster.version`).
    pub version: PveVersion,
    pub cluster: ClusterSeed,
    pub nodes: BTreeMap<String, Node>,
    /// Storage instances keyed by `node/id`, or `*/id` for shared ones.
    pub storages: BTreeMap<String, Storage>,
    pub vms: BTreeMap<u32, Vm>,
    /// LXC containers; a VMID is either a VM's or a container's (`check_vmid_unused`).
    pub cts: BTreeMap<u32, Ct>,
    /// Resource pools by id. Members of a VM that no longer exists are ignored on read and dropped
    /// when its vmid is used again.
    pub pools: BTreeMap<String, Pool>,
    /// HA resources, rules, groups and the CRM's view (`crate::ha`).
    pub ha: crate::ha::HaState,
    /// What each backup volume saved (`ops::vzdump`), by volid; a deleted volume's entry is never
    /// read again (every read checks the volume first).
    pub backups: BTreeMap<String, crate::ops::vzdump::Backup>,
    pub access: Access,
    pub tasks: Vec<Task>,
    task_index: HashMap<String, usize>,
    pub faults: Faults,
    pub requests: Vec<RequestRecord>,
    next_seq: u64,
    next_pid: u32,
    clock_offset: Duration,
    epoch: Instant,
    /// While a task's effect runs: its end time, so timestamps (start, agent readiness)
    /// are those of the task, not of the later request that noticed it finished.
    effect_at: Option<Instant>,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Sim {
    /// Whether a JSON error body carries `message` besides `data: null`. pve-http-server commit
    /// 9a2112e ("fix #6503: return api handler errors in the json body",
    /// `PVE::APIServer::Formatter::Standard::prepare_response_data`) added it in
    /// libpve-http-server-perl 5.2.0 (2025-01-28); pve-manager 8.3.4 (2025-02-18) is the first
    /// release after it, so older releases answer `{"data":null}` only. A node upgraded without
    /// that package is what `error_message: false` (`--old-errors`) plays.
    pub fn error_message_in_body(&self) -> bool {
        self.opts.error_message && self.version.at_least(8, 3, 4)
    }

    /// The pool an existing VM or container belongs to.
    pub fn pool_of(&self, vmid: u32) -> Option<&str> {
        if !self.vms.contains_key(&vmid) && !self.cts.contains_key(&vmid) {
            return None;
        }
        self.pools
            .iter()
            .find(|(_, p)| p.vms.contains(&vmid))
            .map(|(id, _)| id.as_str())
    }

    /// Make `vmid` a member of `pool` only (or of none): a new VM must not inherit the membership
    /// of an earlier VM with the same id.
    pub fn set_pool(&mut self, vmid: u32, pool: Option<&str>) {
        for p in self.pools.values_mut() {
            p.vms.remove(&vmid);
        }
        if let Some(p) = pool.and_then(|id| self.pools.get_mut(id)) {
            p.vms.insert(vmid);
        }
    }

    // -- clock ---------------------------------------------------------------

    /// Simulated now (real time plus `advance`d offset).
    pub fn now(&self) -> Instant {
        Instant::now() + self.clock_offset
    }
    /// The time a task effect happens at (see `effect_at`).
    pub(crate) fn effect_now(&self) -> Instant {
        self.effect_at.unwrap_or_else(|| self.now())
    }
    pub fn unix_now(&self) -> u64 {
        unix_now() + self.clock_offset.as_secs()
    }
    pub fn advance(&mut self, d: Duration) {
        self.clock_offset += d;
        self.tick();
    }
    pub fn uptime_secs(&self, since: Option<Instant>) -> u64 {
        since
            .map(|s| self.now().saturating_duration_since(s).as_secs())
            .unwrap_or(0)
    }
    pub fn scaled(&self, secs: f64) -> Duration {
        Duration::from_secs_f64((secs * self.opts.time_scale).max(0.0))
    }
    pub(crate) fn alloc_pid(&mut self) -> u32 {
        self.next_pid += 7;
        self.next_pid
    }
    pub fn started_secs(&self) -> u64 {
        self.epoch.elapsed().as_secs()
    }

    // -- requests ------------------------------------------------------------

    pub fn record(&mut self, mut rec: RequestRecord) {
        rec.seq = self.next_seq;
        self.next_seq += 1;
        redact(&mut rec.params);
        self.requests.push(rec);
    }

    // -- lookups -------------------------------------------------------------

    pub fn storage_key(&self, node: &str, sid: &str) -> Option<String> {
        let n = self.nodes.get(node)?;
        if !n.storages.iter().any(|s| s == sid) {
            return None;
        }
        let local = format!("{node}/{sid}");
        if self.storages.contains_key(&local) {
            return Some(local);
        }
        let shared = format!("*/{sid}");
        self.storages.contains_key(&shared).then_some(shared)
    }
    pub fn storage(&self, node: &str, sid: &str) -> Option<&Storage> {
        self.storages.get(&self.storage_key(node, sid)?)
    }
    pub fn storage_mut(&mut self, node: &str, sid: &str) -> Option<&mut Storage> {
        let k = self.storage_key(node, sid)?;
        self.storages.get_mut(&k)
    }

    /// A VM on `node`; a VM elsewhere or missing gives PVE's "does not exist" 500.
    pub fn vm(&self, node: &str, vmid: u32) -> ReplyResult<&Vm> {
        self.vms
            .get(&vmid)
            .filter(|v| v.node == node)
            .ok_or_else(|| no_such_vm(node, vmid))
    }
    pub fn vm_mut(&mut self, node: &str, vmid: u32) -> ReplyResult<&mut Vm> {
        self.vms
            .get_mut(&vmid)
            .filter(|v| v.node == node)
            .ok_or_else(|| no_such_vm(node, vmid))
    }

    /// A container on `node`; elsewhere or missing: `PVE::AbstractConfig::load_config`'s error
    /// for `nodes/<node>/lxc/<vmid>.conf`.
    pub fn ct(&self, node: &str, vmid: u32) -> ReplyResult<&Ct> {
        self.cts
            .get(&vmid)
            .filter(|c| c.node == node)
            .ok_or_else(|| {
                crate::error::ErrorReply::die(format!(
                    "Configuration file 'nodes/{node}/lxc/{vmid}.conf' does not exist"
                ))
            })
    }

    /// pve-cluster `PVE::Cluster::check_vmid_unused`: VMIDs are one space for VMs and
    /// containers; a taken one gives `VM <vmid> already exists on node '<node>'` (`CT` for a
    /// container).
    pub fn check_vmid_unused(&self, vmid: u32) -> Result<(), String> {
        let (kind, node) = match (self.vms.get(&vmid), self.cts.get(&vmid)) {
            (Some(vm), _) => ("VM", &vm.node),
            (None, Some(ct)) => ("CT", &ct.node),
            (None, None) => return Ok(()),
        };
        Err(format!("{kind} {vmid} already exists on node '{node}'"))
    }

    /// Whether a VM or a container holds `vmid`.
    pub fn vmid_taken(&self, vmid: u32) -> bool {
        self.vms.contains_key(&vmid) || self.cts.contains_key(&vmid)
    }

    pub fn digest(&self, vm: &Vm) -> String {
        sha1_hex(&render(&vm.conf, &vm.pending, &vm.pending_delete))
    }

    /// Applies an injected state fault.
    pub fn apply_fault(&mut self, f: Fault) -> Result<(), FaultError> {
        match f {
            Fault::NodeOffline { node, offline } => {
                let n = self.nodes.get_mut(&node).ok_or(FaultError::NoNode(node))?;
                n.online = !offline;
            }
            Fault::StaleLock { vmid, lock } => {
                let vm = self.vms.get_mut(&vmid).ok_or(FaultError::NoVm(vmid))?;
                vm.conf.insert("lock".into(), lock);
            }
            Fault::HoldFileLock { vmid, seconds } => {
                let until = self.now() + Duration::from_secs_f64(seconds.max(0.0));
                let vm = self.vms.get_mut(&vmid).ok_or(FaultError::NoVm(vmid))?;
                vm.flock_until = Some(until);
            }
            Fault::FillStorage {
                node,
                storage,
                free,
            } => {
                let st =
                    self.storage_mut(&node, &storage)
                        .ok_or_else(|| FaultError::NoStorage {
                            node: node.clone(),
                            storage: storage.clone(),
                        })?;
                let vols: u64 = st.volumes.values().map(|v| v.size).sum();
                st.other_used = st.total.saturating_sub(vols).saturating_sub(free);
            }
            other => self.faults.armed.push(other),
        }
        Ok(())
    }

    /// Generates MACs for NICs without one and normalises NIC strings.
    pub fn normalize_net(&self, value: &str) -> String {
        let mut n = parse_net(value);
        if n.get("macaddr").is_none() {
            n.set("macaddr", random_mac(&self.opts.mac_prefix));
        }
        print_net(&n)
    }
}
