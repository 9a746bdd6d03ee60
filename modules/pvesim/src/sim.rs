//! The simulated cluster: state, clock, tasks and what they do.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::auth::{builtin_roles, Access, Principal};
use crate::error::{flock_timeout, locked, no_such_vm, ApiError, ApiResult};
use crate::faults::{Fault, Faults};
use crate::model::*;
use crate::tasks::{encode_upid, Action, Task};
use crate::vmconfig::*;

/// Behaviour switches (CLI flags, `PUT /_pvesim/options`, `SimHandle::set_options`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Multiplies every task duration, lock timeout and agent delay; 0 = instant.
    pub time_scale: f64,
    /// `true`: error bodies carry `message` (PVE ≥ 8.3); `false`: `{"data":null}` only.
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

/// A worker task to start.
pub struct Spawn {
    pub node: String,
    /// Task type (`qmcreate`, `qmstart`, …).
    pub kind: String,
    /// Task id, usually the vmid.
    pub id: String,
    pub action: Action,
    /// Duration in seconds before time scaling.
    pub base_secs: f64,
    /// The VM whose config file lock the worker holds while it runs.
    pub flock: Option<u32>,
    /// Fail with this error (after the lock timeout) instead of running.
    pub fail: Option<String>,
}

pub struct Sim {
    pub opts: Options,
    pub cluster: ClusterSeed,
    pub nodes: BTreeMap<String, Node>,
    /// Storage instances keyed by `node/id`, or `*/id` for shared ones.
    pub storages: BTreeMap<String, Storage>,
    pub vms: BTreeMap<u32, Vm>,
    /// Resource pools by id. Members of a VM that no longer exists are ignored on read and dropped
    /// when its vmid is used again.
    pub pools: BTreeMap<String, Pool>,
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

const STORAGE_TYPES: &[&str] = &[
    "dir",
    "lvmthin",
    "lvm",
    "nfs",
    "cifs",
    "zfspool",
    "zfs",
    "btrfs",
    "rbd",
    "cephfs",
    "iscsi",
    "iscsidirect",
    "glusterfs",
    "pbs",
    "esxi",
];
const CONTENT_TYPES: &[&str] = &[
    "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
];

fn check_storage_seed(node: &str, s: &StorageSeed) -> Result<(), String> {
    if !STORAGE_TYPES.contains(&s.kind.as_str()) {
        return Err(format!(
            "node {node}: storage {}: unknown type '{}'",
            s.id, s.kind
        ));
    }
    if let Some(c) = s
        .content
        .iter()
        .find(|c| !CONTENT_TYPES.contains(&c.trim()))
    {
        return Err(format!(
            "node {node}: storage {}: unknown content type '{c}'",
            s.id
        ));
    }
    Ok(())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Sim {
    pub fn new(seed: Seed, opts: Options) -> Result<Sim, String> {
        let mut sim = Sim {
            opts,
            cluster: seed.cluster.clone(),
            nodes: BTreeMap::new(),
            storages: BTreeMap::new(),
            vms: BTreeMap::new(),
            pools: BTreeMap::new(),
            access: Access {
                roles: builtin_roles(),
                key: crate::vmconfig::uuid_v4(),
                ..Default::default()
            },
            tasks: Vec::new(),
            task_index: HashMap::new(),
            faults: Faults::default(),
            requests: Vec::new(),
            next_seq: 1,
            next_pid: 0x1000,
            clock_offset: Duration::ZERO,
            epoch: Instant::now(),
            effect_at: None,
        };
        sim.access.builtin = sim.access.roles.keys().cloned().collect();
        sim.seed(seed)?;
        Ok(sim)
    }

    fn seed(&mut self, seed: Seed) -> Result<(), String> {
        let now = unix_now();
        for n in &seed.nodes {
            let mut ids = Vec::new();
            for s in &n.storages {
                check_storage_seed(&n.name, s)?;
                ids.push(s.id.clone());
                let shared = s.shared.unwrap_or(matches!(
                    s.kind.as_str(),
                    "nfs" | "cifs" | "rbd" | "cephfs" | "glusterfs"
                ));
                let key = if shared {
                    format!("*/{}", s.id)
                } else {
                    format!("{}/{}", n.name, s.id)
                };
                if self.storages.contains_key(&key) {
                    continue; // shared storage listed by several nodes
                }
                let content: BTreeSet<String> = if s.content.is_empty() {
                    storage_default_content(&s.kind)
                        .iter()
                        .map(|c| c.to_string())
                        .collect()
                } else {
                    s.content.iter().map(|c| c.trim().to_string()).collect()
                };
                let mut st = Storage {
                    id: s.id.clone(),
                    kind: s.kind.clone(),
                    content,
                    shared,
                    enabled: s.enabled,
                    total: s.size.0,
                    other_used: 0,
                    volumes: BTreeMap::new(),
                };
                for f in &s.files {
                    let content = f.name.split('/').next().unwrap_or("iso").to_string();
                    let format = if content == "iso" {
                        "iso".to_string()
                    } else {
                        f.name.rsplit('.').next().unwrap_or("raw").to_string()
                    };
                    st.volumes.insert(
                        f.name.clone(),
                        Volume {
                            name: f.name.clone(),
                            size: f.size.0,
                            format,
                            content,
                            vmid: None,
                            ctime: now,
                            parent: None,
                        },
                    );
                }
                if let Some(free) = s.free {
                    st.other_used = st.total.saturating_sub(free.0).saturating_sub(st.used());
                }
                self.storages.insert(key, st);
            }
            self.nodes.insert(
                n.name.clone(),
                Node {
                    name: n.name.clone(),
                    online: n.online,
                    cpus: n.cpus,
                    maxmem: n.maxmem.0,
                    storages: ids,
                },
            );
        }
        // root@pam always exists.
        let mut users = seed.users.clone();
        if !users.iter().any(|u| u.userid == "root@pam") {
            users.push(UserSeed {
                userid: "root@pam".into(),
                password: None,
                enable: true,
                groups: vec![],
                expire: 0,
            });
        }
        for u in users {
            self.access.users.insert(
                u.userid.clone(),
                User {
                    userid: u.userid,
                    password: u.password,
                    enable: u.enable,
                    groups: u.groups,
                    expire: u.expire,
                },
            );
        }
        for t in seed.tokens {
            if !self.access.users.contains_key(&t.userid) {
                return Err(format!("token {}!{}: unknown user", t.userid, t.tokenid));
            }
            let tok = Token {
                userid: t.userid,
                tokenid: t.tokenid,
                secret: t.secret,
                privsep: t.privsep,
                expire: t.expire,
                comment: t.comment,
            };
            self.access.tokens.insert(tok.full_id(), tok);
        }
        for r in seed.roles {
            self.access
                .roles
                .insert(r.roleid, r.privs.into_iter().collect());
        }
        for a in seed.acl {
            let (kind, ugid) = match (a.user, a.group, a.token) {
                (Some(u), None, None) => ("user", u),
                (None, Some(g), None) => ("group", g),
                (None, None, Some(t)) => ("token", t),
                _ => {
                    return Err(format!(
                        "acl on {}: give exactly one of user/group/token",
                        a.path
                    ))
                }
            };
            if !self.access.roles.contains_key(&a.role) {
                return Err(format!("acl on {}: unknown role {}", a.path, a.role));
            }
            self.access.acl.push(AclEntry {
                path: a.path,
                kind: kind.into(),
                ugid,
                roleid: a.role,
                propagate: a.propagate,
            });
        }
        for v in seed.vms {
            if !self.nodes.contains_key(&v.node) {
                return Err(format!("vm {}: unknown node {}", v.vmid, v.node));
            }
            if self.vms.contains_key(&v.vmid) {
                return Err(format!("vm {}: duplicate vmid", v.vmid));
            }
            let conf: BTreeMap<String, String> = v
                .config
                .iter()
                .map(|(k, val)| (k.clone(), crate::schema::value_str(val)))
                .collect();
            // Create the volumes the config references.
            for (k, val) in &conf {
                if !is_drive_key(k) {
                    continue;
                }
                let d = parse_drive(k, val);
                if is_cdrom(&d) {
                    continue;
                }
                let Some((sid, name)) = d.get("file").and_then(split_volid) else {
                    continue;
                };
                let size = d.get("size").and_then(parse_size).unwrap_or(
                    if k == "efidisk0" || k == "tpmstate0" {
                        4 << 20
                    } else {
                        32 << 30
                    },
                );
                let key = self.storage_key(&v.node, sid).ok_or_else(|| {
                    format!("vm {}: storage {sid} not on node {}", v.vmid, v.node)
                })?;
                let st = self.storages.get_mut(&key).unwrap();
                let format = name
                    .rsplit_once('.')
                    .map(|(_, e)| e.to_string())
                    .unwrap_or_else(|| "raw".into());
                st.volumes.insert(
                    name.to_string(),
                    Volume {
                        name: name.to_string(),
                        size,
                        format,
                        content: "images".into(),
                        vmid: Some(v.vmid),
                        ctime: now,
                        parent: None,
                    },
                );
            }
            let running = v.running;
            self.vms.insert(
                v.vmid,
                Vm {
                    vmid: v.vmid,
                    node: v.node,
                    conf,
                    pending: BTreeMap::new(),
                    pending_delete: BTreeMap::new(),
                    staged: BTreeMap::new(),
                    state: if running {
                        RunState::Running
                    } else {
                        RunState::Stopped
                    },
                    started_at: running.then(|| self.now()),
                    agent_ready_at: running.then(|| self.now()),
                    agent_delay: v.agent_delay,
                    agent_ips: v.agent_ips,
                    ignore_shutdown: v.ignore_shutdown,
                    ha: v.ha,
                    flock_until: None,
                    pid: 0,
                },
            );
            if running {
                let pid = self.alloc_pid();
                self.vms.get_mut(&v.vmid).unwrap().pid = pid;
            }
        }
        for p in seed.pools {
            if let Some(v) = p.vms.iter().find(|v| !self.vms.contains_key(v)) {
                return Err(format!("pool {}: unknown vm {v}", p.poolid));
            }
            if let Some(v) = p.vms.iter().find(|v| self.pool_of(**v).is_some()) {
                return Err(format!(
                    "pool {}: vm {v} is already in another pool",
                    p.poolid
                ));
            }
            self.pools.insert(
                p.poolid,
                Pool {
                    comment: p.comment,
                    vms: p.vms.into_iter().collect(),
                },
            );
        }
        Ok(())
    }

    /// The pool an existing VM belongs to.
    pub fn pool_of(&self, vmid: u32) -> Option<&str> {
        if !self.vms.contains_key(&vmid) {
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

    /// The current state as a seed (for `--dump-state` and `GET /_pvesim/state`).
    pub fn dump(&self) -> Seed {
        let mut nodes = Vec::new();
        for n in self.nodes.values() {
            let storages = n
                .storages
                .iter()
                .filter_map(|sid| {
                    let st = self.storages.get(&self.storage_key(&n.name, sid)?)?;
                    Some(StorageSeed {
                        id: st.id.clone(),
                        kind: st.kind.clone(),
                        content: st.content.iter().cloned().collect(),
                        size: ByteSize(st.total),
                        free: Some(ByteSize(st.avail())),
                        shared: Some(st.shared),
                        enabled: st.enabled,
                        files: st
                            .volumes
                            .values()
                            .filter(|v| v.vmid.is_none())
                            .map(|v| FileSeed {
                                name: v.name.clone(),
                                size: ByteSize(v.size),
                            })
                            .collect(),
                    })
                })
                .collect();
            nodes.push(NodeSeed {
                name: n.name.clone(),
                online: n.online,
                cpus: n.cpus,
                maxmem: ByteSize(n.maxmem),
                storages,
            });
        }
        let vms = self
            .vms
            .values()
            .map(|v| VmSeed {
                vmid: v.vmid,
                node: v.node.clone(),
                config: v
                    .conf
                    .iter()
                    .map(|(k, x)| (k.clone(), x.clone().into()))
                    .collect(),
                running: v.running(),
                agent_ips: v.agent_ips.clone(),
                agent_delay: v.agent_delay,
                ignore_shutdown: v.ignore_shutdown,
                ha: v.ha,
            })
            .collect();
        let acl = self
            .access
            .acl
            .iter()
            .map(|a| AclSeed {
                path: a.path.clone(),
                role: a.roleid.clone(),
                user: (a.kind == "user").then(|| a.ugid.clone()),
                group: (a.kind == "group").then(|| a.ugid.clone()),
                token: (a.kind == "token").then(|| a.ugid.clone()),
                propagate: a.propagate,
            })
            .collect();
        Seed {
            cluster: self.cluster.clone(),
            nodes,
            vms,
            users: self
                .access
                .users
                .values()
                .map(|u| UserSeed {
                    userid: u.userid.clone(),
                    password: u.password.clone(),
                    enable: u.enable,
                    groups: u.groups.clone(),
                    expire: u.expire,
                })
                .collect(),
            tokens: self
                .access
                .tokens
                .values()
                .map(|t| TokenSeed {
                    userid: t.userid.clone(),
                    tokenid: t.tokenid.clone(),
                    secret: t.secret.clone(),
                    privsep: t.privsep,
                    expire: t.expire,
                    comment: t.comment.clone(),
                })
                .collect(),
            roles: self
                .access
                .roles
                .iter()
                .filter(|(k, _)| !self.access.builtin.contains(*k))
                .map(|(k, p)| RoleSeed {
                    roleid: k.clone(),
                    privs: p.iter().cloned().collect(),
                })
                .collect(),
            acl,
            pools: self
                .pools
                .iter()
                .map(|(id, p)| PoolSeed {
                    poolid: id.clone(),
                    comment: p.comment.clone(),
                    vms: p
                        .vms
                        .iter()
                        .copied()
                        .filter(|v| self.vms.contains_key(v))
                        .collect(),
                })
                .collect(),
        }
    }

    // -- clock ---------------------------------------------------------------

    /// Simulated now (real time plus `advance`d offset).
    pub fn now(&self) -> Instant {
        Instant::now() + self.clock_offset
    }
    /// The time a task effect happens at (see `effect_at`).
    fn effect_now(&self) -> Instant {
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
    fn alloc_pid(&mut self) -> u32 {
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
    pub fn vm(&self, node: &str, vmid: u32) -> ApiResult<&Vm> {
        self.vms
            .get(&vmid)
            .filter(|v| v.node == node)
            .ok_or_else(|| no_such_vm(node, vmid))
    }
    pub fn vm_mut(&mut self, node: &str, vmid: u32) -> ApiResult<&mut Vm> {
        self.vms
            .get_mut(&vmid)
            .filter(|v| v.node == node)
            .ok_or_else(|| no_such_vm(node, vmid))
    }

    pub fn digest(&self, vm: &Vm) -> String {
        sha1_hex(&render(&vm.conf, &vm.pending, &vm.pending_delete))
    }

    pub fn lock_timeout(&self) -> Duration {
        self.scaled(self.opts.lock_timeout)
    }

    /// Fails while another worker holds the VM's config file lock. `busy_until` tells the
    /// server to wait and retry: until the holder is done, or until the (scaled) lock
    /// timeout has passed, after which the retry fails with PVE's `got timeout`.
    pub fn check_flock(&self, vmid: u32, waited_since: Instant) -> ApiResult<()> {
        let now = self.now();
        let Some(until) = self
            .vms
            .get(&vmid)
            .and_then(|v| v.flock_until)
            .filter(|u| *u > now)
        else {
            return Ok(());
        };
        let deadline = waited_since + self.lock_timeout();
        let mut busy = ApiError::die(flock_timeout(vmid));
        if until <= deadline {
            busy.busy_until = Some(until);
            return Err(busy);
        }
        if now < deadline {
            busy.busy_until = Some(deadline);
        }
        Err(busy)
    }

    pub fn check_lock(vm: &Vm, skiplock: bool) -> ApiResult<()> {
        match vm.lock() {
            Some(l) if !skiplock => Err(ApiError::die(locked(l))),
            _ => Ok(()),
        }
    }

    pub fn require_quorum(&self) -> ApiResult<()> {
        if self.opts.quorate {
            Ok(())
        } else {
            Err(ApiError::die("cluster not ready - no quorum?"))
        }
    }

    // -- tasks -----------------------------------------------------------------

    /// Starts a worker task and returns its UPID.
    pub fn spawn(&mut self, who: &Principal, spec: Spawn) -> String {
        let Spawn {
            node,
            kind,
            id,
            action,
            base_secs,
            flock,
            fail: early_fail,
        } = spec;
        let (node, kind, id) = (node.as_str(), kind.as_str(), id.as_str());
        let now = self.now();
        let mut dur = self.scaled(base_secs);
        let vmid = id.parse().ok();
        let mut fail = self.faults.take_task_failure(kind, vmid);
        if early_fail.is_some() {
            fail = early_fail;
            dur = self.lock_timeout();
        }
        let mut begin = now;
        if let Some(vmid) = flock {
            let timeout = self.lock_timeout();
            if let Some(vm) = self.vms.get_mut(&vmid) {
                if let Some(until) = vm.flock_until.filter(|u| *u > now) {
                    if until - now > timeout {
                        fail = Some(flock_timeout(vmid));
                        dur = timeout;
                    } else {
                        begin = until;
                    }
                }
                if fail.is_none() || begin > now {
                    vm.flock_until = Some(begin + dur);
                }
            }
        }
        let pid = self.alloc_pid();
        let starttime = self.unix_now();
        let upid = encode_upid(
            node,
            pid,
            0x100000 + pid,
            starttime,
            kind,
            id,
            &who.auth_id(),
        );
        let task = Task {
            upid: upid.clone(),
            node: node.to_string(),
            pid,
            pstart: 0x100000 + pid,
            starttime,
            kind: kind.to_string(),
            id: id.to_string(),
            user: who.userid.clone(),
            tokenid: who.tokenid.clone(),
            ends_at: begin + dur,
            endtime: None,
            exitstatus: None,
            log: Vec::new(),
            action,
            fail_with: fail,
            warnings: 0,
        };
        self.task_index.insert(upid.clone(), self.tasks.len());
        self.tasks.push(task);
        self.tick();
        upid
    }

    pub fn task(&self, upid: &str) -> Option<&Task> {
        self.task_index.get(upid).map(|i| &self.tasks[*i])
    }

    /// Finishes every task whose time has come, in end-time order.
    pub fn tick(&mut self) {
        loop {
            let now = self.now();
            let next = self
                .tasks
                .iter()
                .enumerate()
                .filter(|(_, t)| t.running() && t.ends_at <= now)
                .min_by_key(|(_, t)| t.ends_at)
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            self.finish(i);
        }
    }

    /// Stops a running task (`DELETE /nodes/{node}/tasks/{upid}`).
    pub fn abort_task(&mut self, upid: &str) -> bool {
        let Some(&i) = self.task_index.get(upid) else {
            return false;
        };
        if !self.tasks[i].running() {
            return true;
        }
        self.tasks[i].fail_with = Some("received interrupt".into());
        self.tasks[i].ends_at = self.now();
        self.tick();
        true
    }

    fn finish(&mut self, i: usize) {
        let action = self.tasks[i].action.clone();
        let injected = self.tasks[i].fail_with.clone();
        self.effect_at = Some(self.tasks[i].ends_at);
        let mut log = Vec::new();
        let result = match injected {
            Some(msg) => {
                self.cleanup_failed(&action);
                Err(msg)
            }
            None => self.run_action(&action, &mut log),
        };
        self.effect_at = None;
        let late = self.now().saturating_duration_since(self.tasks[i].ends_at);
        let end = self.unix_now().saturating_sub(late.as_secs());
        let t = &mut self.tasks[i];
        t.log.extend(log);
        t.endtime = Some(end);
        t.exitstatus = Some(match result {
            Ok(0) => "OK".to_string(),
            Ok(n) => format!("WARNINGS: {n}"),
            Err(e) => e,
        });
        t.warnings = 0;
        // Release the file lock this worker held.
        let vmid = match &action {
            Action::Create { vmid, .. }
            | Action::Config { vmid, .. }
            | Action::Resize { vmid, .. }
            | Action::Destroy { vmid, .. }
            | Action::Start { vmid }
            | Action::Stop { vmid }
            | Action::Shutdown { vmid, .. }
            | Action::Reboot { vmid }
            | Action::Reset { vmid }
            | Action::Pause { vmid, .. }
            | Action::Resume { vmid }
            | Action::Template { vmid }
            | Action::Ha { vmid, .. } => Some(*vmid),
            Action::Clone { newid, .. } => Some(*newid),
            _ => None,
        };
        let ends_at = self.tasks[i].ends_at;
        if let Some(vm) = vmid.and_then(|id| self.vms.get_mut(&id)) {
            if vm.flock_until == Some(ends_at) {
                vm.flock_until = None;
            }
        }
    }

    /// A failed create/clone leaves no VM behind.
    fn cleanup_failed(&mut self, action: &Action) {
        match action {
            Action::Create { vmid, .. } => {
                self.vms.remove(vmid);
            }
            Action::Clone { newid, .. } => {
                self.vms.remove(newid);
            }
            _ => {}
        }
    }

    /// Runs a task's effect; Ok(warnings) or the task error.
    fn run_action(&mut self, action: &Action, log: &mut Vec<String>) -> Result<u32, String> {
        match action.clone() {
            Action::None => Ok(0),
            Action::Create { vmid, start } => self.finish_create(vmid, start, log),
            Action::Clone {
                src,
                newid,
                full,
                storage,
                format,
                ..
            } => self.finish_clone(src, newid, full, storage, format, log),
            Action::Config { vmid, changes } => {
                // The worker holds the config lock: stage the update, then apply what can be.
                self.vms
                    .get_mut(&vmid)
                    .ok_or_else(|| {
                        format!("Configuration file 'qemu-server/{vmid}.conf' does not exist")
                    })?
                    .stage(&changes);
                self.apply_pending(vmid, false, log)?;
                Ok(0)
            }
            Action::Resize { vmid, disk, size } => self.finish_resize(vmid, &disk, size, log),
            Action::Destroy { vmid, unreferenced } => self.finish_destroy(vmid, unreferenced, log),
            Action::Start { vmid } => self.do_start(vmid, log),
            Action::Stop { vmid } => {
                self.power_off(vmid);
                Ok(0)
            }
            Action::Shutdown { vmid, force } => {
                let vm = self.vms.get(&vmid).ok_or("VM vanished")?;
                if !vm.running() {
                    return Ok(0);
                }
                if vm.ignore_shutdown {
                    if !force {
                        return Err("VM quit/powerdown failed - got timeout".into());
                    }
                    log.push("VM still running - terminating now with SIGTERM".into());
                }
                self.power_off(vmid);
                Ok(0)
            }
            Action::Reboot { vmid } => {
                let vm = self.vms.get(&vmid).ok_or("VM vanished")?;
                if vm.ignore_shutdown {
                    return Err("VM quit/powerdown failed - got timeout".into());
                }
                self.power_off(vmid);
                self.do_start(vmid, log)
            }
            Action::Reset { vmid } => {
                let delay = self.agent_delay_of(vmid);
                let now = self.effect_now();
                let vm = self.vms.get_mut(&vmid).ok_or("VM vanished")?;
                vm.agent_ready_at = Some(now + delay);
                Ok(0)
            }
            Action::Pause { vmid, todisk } => {
                if todisk {
                    self.power_off(vmid);
                    let vm = self.vms.get_mut(&vmid).ok_or("VM vanished")?;
                    vm.conf.insert("lock".into(), "suspended".into());
                } else {
                    let vm = self.vms.get_mut(&vmid).ok_or("VM vanished")?;
                    vm.state = RunState::Paused;
                }
                Ok(0)
            }
            Action::Resume { vmid } => {
                let vm = self.vms.get_mut(&vmid).ok_or("VM vanished")?;
                if vm.state == RunState::Paused {
                    vm.state = RunState::Running;
                }
                Ok(0)
            }
            Action::Template { vmid } => {
                let vm = self.vms.get_mut(&vmid).ok_or("VM vanished")?;
                if vm.running() {
                    return Err("you can't convert a VM to template if VM is running".into());
                }
                if vm.is_template() {
                    return Err("you can't convert a template to a template".into());
                }
                vm.conf.insert("template".into(), "1".into());
                Ok(0)
            }
            Action::Upload {
                node,
                storage,
                name,
                size,
                content,
                checksum_error,
            } => {
                if let Some(e) = checksum_error {
                    return Err(e);
                }
                let now = self.unix_now();
                let st = self
                    .storage_mut(&node, &storage)
                    .ok_or("storage vanished")?;
                let existing = st.volumes.get(&name).map(|v| v.size).unwrap_or(0);
                if size > st.avail() + existing {
                    return Err(format!(
                        "error during upload: write to '{}': No space left on device",
                        name
                    ));
                }
                st.volumes.insert(
                    name.clone(),
                    Volume {
                        name: name.clone(),
                        size,
                        format: if content == "iso" {
                            "iso".into()
                        } else {
                            name.rsplit('.').next().unwrap_or("raw").into()
                        },
                        content,
                        vmid: None,
                        ctime: now,
                        parent: None,
                    },
                );
                log.push(format!("target file: {name}"));
                log.push(format!("file size is: {size}"));
                Ok(0)
            }
            Action::Ha { vmid, start } => {
                log.push(format!(
                    "Requesting HA {} for VM {vmid}",
                    if start { "start" } else { "stop" }
                ));
                if start {
                    let mut l = Vec::new();
                    if self.vms.get(&vmid).map(|v| !v.running()).unwrap_or(false) {
                        let _ = self.do_start(vmid, &mut l);
                    }
                } else {
                    self.power_off(vmid);
                }
                Ok(0)
            }
        }
    }

    fn agent_delay_of(&self, vmid: u32) -> Duration {
        let base = self
            .vms
            .get(&vmid)
            .and_then(|v| v.agent_delay)
            .unwrap_or(self.opts.agent_delay);
        self.scaled(base)
    }

    fn power_off(&mut self, vmid: u32) {
        if let Some(vm) = self.vms.get_mut(&vmid) {
            vm.state = RunState::Stopped;
            vm.started_at = None;
            vm.agent_ready_at = None;
            vm.pid = 0;
        }
    }

    fn do_start(&mut self, vmid: u32, log: &mut Vec<String>) -> Result<u32, String> {
        let vm = self.vms.get(&vmid).ok_or("VM vanished")?;
        if vm.running() {
            return Err(format!("VM {vmid} already running"));
        }
        match vm.lock() {
            Some("suspended") | None => {}
            Some(l) => return Err(locked(l)),
        }
        if vm.is_template() {
            return Err("you can't start a vm if it's a template".into());
        }
        let node = vm.node.clone();
        let want = vm.effective_conf();
        let want_mib = memory_mib(want.get("memory").map(String::as_str));
        if self.opts.check_memory_on_start {
            let used: u64 = self
                .vms
                .values()
                .filter(|v| v.node == node && v.running())
                .map(|v| v.memory_mib() << 20)
                .sum();
            let maxmem = self.nodes.get(&node).map(|n| n.maxmem).unwrap_or(0);
            if used + (want_mib << 20) > maxmem {
                log.push("kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory".into());
                return Err("start failed: QEMU exited with code 1".into());
            }
        }
        self.apply_pending(vmid, true, log)?;
        let delay = self.agent_delay_of(vmid);
        let pid = self.alloc_pid();
        let now = self.effect_now();
        let vm = self.vms.get_mut(&vmid).ok_or("VM vanished")?;
        if vm.lock() == Some("suspended") {
            vm.conf.remove("lock");
            log.push("resuming suspended VM".into());
        }
        vm.state = RunState::Running;
        vm.started_at = Some(now);
        vm.agent_ready_at = Some(now + delay);
        vm.pid = pid;
        Ok(0)
    }

    // -- storage allocation ----------------------------------------------------

    /// Allocates a new volume for `key` from `STORAGE:SIZE`; returns the stored drive string.
    pub fn allocate(
        &mut self,
        node: &str,
        vmid: u32,
        key: &str,
        mut drive: crate::propstr::PropString,
        fallback_format: bool,
    ) -> Result<String, String> {
        let file = drive.get("file").unwrap_or_default().to_string();
        let Some((sid, gib)) = alloc_request(&file) else {
            return Ok(print_drive(&drive));
        };
        let sid = sid.to_string();
        let st = self
            .storage(node, &sid)
            .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
        if !st.content.contains("images") {
            return Err(format!(
                "storage '{sid}' does not support content-type 'images'"
            ));
        }
        let (default_fmt, supported) = storage_formats(&st.kind);
        let fmt = match drive.remove("format") {
            Some(f) if supported.contains(&f.as_str()) => f,
            Some(f) if !fallback_format => {
                return Err(if st.kind == "lvmthin" {
                    format!("unsupported format '{f}' at /usr/share/perl5/PVE/Storage/LvmThinPlugin.pm line 102.")
                } else {
                    format!("unsupported format '{f}'")
                })
            }
            _ => default_fmt.to_string(),
        };
        let import_size = drive.remove("import-from").and_then(|src| {
            let (s, n) = split_volid(&src)?;
            self.storage(node, s)?.volumes.get(n).map(|v| v.size)
        });
        let size = match key {
            "efidisk0" => {
                if drive.get("efitype") == Some("4m") {
                    4 << 20
                } else {
                    128 << 10
                }
            }
            "tpmstate0" => 4 << 20,
            _ => import_size.unwrap_or((gib * (1u64 << 30) as f64) as u64),
        };
        let file_based = st.is_file_based();
        let kind = st.kind.clone();
        let avail = st.avail();
        let n = (0..)
            .find(|i| {
                let base = format!("vm-{vmid}-disk-{i}");
                !st.volumes.keys().any(|k| {
                    k.contains(&base) && (k.ends_with(&base) || k.contains(&format!("{base}.")))
                })
            })
            .unwrap_or(0);
        let name = if file_based {
            format!("{vmid}/vm-{vmid}-disk-{n}.{fmt}")
        } else {
            format!("vm-{vmid}-disk-{n}")
        };
        if size > avail {
            let need = size >> 30;
            return Err(match kind.as_str() {
                "lvmthin" | "lvm" => format!(
                    "lvcreate 'pve/vm-{vmid}-disk-{n}' error:   Volume group \"pve\" has insufficient free space ({} extents): {} required.",
                    avail >> 22,
                    size >> 22
                ),
                "zfspool" => format!("zfs error: cannot create 'rpool/data/vm-{vmid}-disk-{n}': out of space"),
                _ => format!(
                    "unable to create image: qemu-img: {name}: Could not resize file: No space left on device (requested {need}G)"
                ),
            });
        }
        let now = self.unix_now();
        let st = self.storage_mut(node, &sid).unwrap();
        st.volumes.insert(
            name.clone(),
            Volume {
                name: name.clone(),
                size,
                format: fmt,
                content: "images".into(),
                vmid: Some(vmid),
                ctime: now,
                parent: None,
            },
        );
        drive.set("file", format!("{sid}:{name}"));
        drive.set("size", format_size(size));
        Ok(print_drive(&drive))
    }

    /// Frees the volume a drive string references (not CD-ROM media).
    pub fn free_volume(&mut self, node: &str, value: &str, key: &str) {
        let d = parse_drive(key, value);
        if is_cdrom(&d) {
            return;
        }
        if let Some((sid, name)) = d.get("file").and_then(split_volid) {
            let (sid, name) = (sid.to_string(), name.to_string());
            if let Some(st) = self.storage_mut(node, &sid) {
                st.volumes.remove(&name);
            }
        }
    }

    /// Checks that an existing volume (ISO, disk) exists.
    pub fn volume_exists(&self, node: &str, volid: &str) -> bool {
        match split_volid(volid) {
            Some((sid, name)) => self
                .storage(node, sid)
                .map(|s| s.volumes.contains_key(name))
                .unwrap_or(false),
            None => volid == "none" || volid == "cdrom" || volid.starts_with('/'),
        }
    }

    // -- create / clone / destroy / resize --------------------------------------

    fn finish_create(
        &mut self,
        vmid: u32,
        start: bool,
        log: &mut Vec<String>,
    ) -> Result<u32, String> {
        let vm = self.vms.get(&vmid).ok_or("VM vanished")?;
        let node = vm.node.clone();
        let spec = vm.staged.clone();
        let mut conf = BTreeMap::new();
        let mut allocated: Vec<(String, String)> = Vec::new();
        let mut fail = None;
        // BTreeMap order = alphabetical: efidisk0 gets disk-0 before scsi0, like PVE.
        for (k, v) in &spec {
            if is_drive_key(k) {
                let d = parse_drive(k, v);
                if is_cdrom(&d) {
                    let f = d.get("file").unwrap_or("none");
                    if f != "none" && f != "cdrom" && !self.volume_exists(&node, f) {
                        fail = Some(format!("volume {f} does not exist"));
                        break;
                    }
                    conf.insert(k.clone(), print_drive(&d));
                    continue;
                }
                let f = d.get("file").unwrap_or_default().to_string();
                if alloc_request(&f).is_none() && !self.volume_exists(&node, &f) {
                    fail = Some(format!("volume {f} does not exist"));
                    break;
                }
                match self.allocate(&node, vmid, k, d, false) {
                    Ok(s) => {
                        if alloc_request(&f).is_some() {
                            log.push(format!(
                                "{k}: successfully created disk '{}'",
                                s.split(',').next().unwrap_or_default()
                            ));
                            allocated.push((k.clone(), s.clone()));
                        }
                        conf.insert(k.clone(), s);
                    }
                    Err(e) => {
                        fail = Some(e);
                        break;
                    }
                }
            } else {
                conf.insert(k.clone(), v.clone());
            }
        }
        if let Some(e) = fail {
            for (k, s) in allocated {
                self.free_volume(&node, &s, &k);
            }
            self.vms.remove(&vmid);
            return Err(format!("unable to create VM {vmid} - {e}"));
        }
        let ha = conf.remove("ha-managed").map(|v| v == "1").unwrap_or(false);
        let now = self.unix_now();
        conf.entry("smbios1".into())
            .or_insert_with(|| format!("uuid={}", uuid_v4()));
        conf.entry("vmgenid".into()).or_insert_with(uuid_v4);
        conf.insert("meta".into(), format!("creation-qemu=9.2.0,ctime={now}"));
        if !conf.contains_key("boot") {
            let b = default_boot(&conf);
            conf.insert("boot".into(), b);
        }
        if let Some(t) = conf.get("tags").cloned() {
            conf.insert("tags".into(), normalize_tags(&t));
        }
        let vm = self.vms.get_mut(&vmid).unwrap();
        vm.conf = conf;
        vm.staged.clear();
        vm.ha = ha;
        if start {
            let mut l = Vec::new();
            if let Err(e) = self.do_start(vmid, &mut l) {
                log.extend(l);
                log.push(format!("WARN: start failed: {e}"));
                return Ok(1);
            }
        }
        Ok(0)
    }

    fn finish_clone(
        &mut self,
        src: u32,
        newid: u32,
        full: bool,
        storage: Option<String>,
        format: Option<String>,
        log: &mut Vec<String>,
    ) -> Result<u32, String> {
        let fail = |sim: &mut Sim, e: String| {
            sim.vms.remove(&newid);
            Err(format!("clone failed: {e}"))
        };
        let Some(source) = self.vms.get(&src).cloned() else {
            return fail(
                self,
                format!("Configuration file 'nodes/?/qemu-server/{src}.conf' does not exist"),
            );
        };
        let target = self
            .vms
            .get(&newid)
            .map(|v| v.node.clone())
            .ok_or("VM vanished")?;
        let mut conf = BTreeMap::new();
        let mut allocated: Vec<(String, String)> = Vec::new();
        for (k, v) in &source.conf {
            if matches!(
                k.as_str(),
                "lock" | "template" | "meta" | "vmgenid" | "smbios1" | "name"
            ) || k.starts_with("unused")
            {
                continue;
            }
            if is_net_key(k) {
                let mut n = parse_net(v);
                n.set("macaddr", random_mac(&self.opts.mac_prefix));
                conf.insert(k.clone(), print_net(&n));
                continue;
            }
            if is_drive_key(k) {
                let d = parse_drive(k, v);
                if is_cdrom(&d) {
                    conf.insert(k.clone(), v.clone());
                    continue;
                }
                let Some((sid, name)) = d.get("file").and_then(split_volid) else {
                    conf.insert(k.clone(), v.clone());
                    continue;
                };
                let src_size = self
                    .storage(&source.node, sid)
                    .and_then(|s| s.volumes.get(name))
                    .map(|v| v.size)
                    .unwrap_or(0);
                if !full && !source.is_template() {
                    let e = "clone_image only works on base images".to_string();
                    for (k, s) in allocated {
                        self.free_volume(&target, &s, &k);
                    }
                    return fail(self, e);
                }
                let dst = storage.clone().unwrap_or_else(|| sid.to_string());
                let mut nd = d.clone();
                nd.set(
                    "file",
                    format!("{dst}:{}", (src_size as f64) / (1u64 << 30) as f64),
                );
                nd.remove("size");
                if let Some(f) = &format {
                    nd.set("format", f.clone());
                }
                log.push(format!(
                    "create {} clone of drive {k} ({})",
                    if full { "full" } else { "linked" },
                    d.get("file").unwrap_or_default()
                ));
                match self.allocate(&target, newid, k, nd, true) {
                    Ok(s) => {
                        // Keep the source's exact size (allocation rounds through GiB).
                        let mut ps = parse_drive(k, &s);
                        if let Some((nsid, nname)) = ps
                            .get("file")
                            .and_then(split_volid)
                            .map(|(a, b)| (a.to_string(), b.to_string()))
                        {
                            if let Some(st) = self.storage_mut(&target, &nsid) {
                                if let Some(vol) = st.volumes.get_mut(&nname) {
                                    vol.size = src_size;
                                    if !full {
                                        vol.parent = Some(name.to_string());
                                    }
                                }
                            }
                        }
                        ps.set("size", format_size(src_size));
                        let s = print_drive(&ps);
                        allocated.push((k.clone(), s.clone()));
                        conf.insert(k.clone(), s);
                    }
                    Err(e) => {
                        for (k, s) in allocated {
                            self.free_volume(&target, &s, &k);
                        }
                        return fail(self, e);
                    }
                }
                continue;
            }
            conf.insert(k.clone(), v.clone());
        }
        let staged = self
            .vms
            .get(&newid)
            .map(|v| v.staged.clone())
            .unwrap_or_default();
        for (k, v) in staged {
            conf.insert(k, v);
        }
        conf.entry("name".into()).or_insert_with(|| {
            format!(
                "Copy-of-VM-{}",
                source
                    .conf
                    .get("name")
                    .cloned()
                    .unwrap_or_else(|| src.to_string())
            )
        });
        conf.insert("smbios1".into(), format!("uuid={}", uuid_v4()));
        conf.insert("vmgenid".into(), uuid_v4());
        conf.insert(
            "meta".into(),
            format!("creation-qemu=9.2.0,ctime={}", self.unix_now()),
        );
        let vm = self.vms.get_mut(&newid).unwrap();
        vm.conf = conf;
        vm.staged.clear();
        vm.agent_ips = BTreeMap::new();
        Ok(0)
    }

    fn finish_destroy(
        &mut self,
        vmid: u32,
        unreferenced: bool,
        log: &mut Vec<String>,
    ) -> Result<u32, String> {
        let vm = self.vms.get(&vmid).ok_or("VM vanished")?.clone();
        if let Some(l) = vm.lock() {
            if l != "destroyed" {
                return Err(locked(l));
            }
        }
        for (k, v) in vm.conf.iter().chain(vm.pending.iter()) {
            if is_drive_key(k) {
                self.free_volume(&vm.node, v, k);
            }
        }
        if unreferenced {
            let sids = self
                .nodes
                .get(&vm.node)
                .map(|n| n.storages.clone())
                .unwrap_or_default();
            for sid in sids {
                if let Some(st) = self.storage_mut(&vm.node, &sid) {
                    st.volumes.retain(|_, v| v.vmid != Some(vmid));
                }
            }
        }
        log.push(format!("destroying VM {vmid}"));
        self.vms.remove(&vmid);
        Ok(0)
    }

    fn finish_resize(
        &mut self,
        vmid: u32,
        disk: &str,
        size: u64,
        _log: &mut Vec<String>,
    ) -> Result<u32, String> {
        let vm = self.vms.get(&vmid).ok_or("VM vanished")?;
        let node = vm.node.clone();
        let value = vm
            .conf
            .get(disk)
            .cloned()
            .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
        let mut d = parse_drive(disk, &value);
        let (sid, name) = d
            .get("file")
            .and_then(split_volid)
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .ok_or_else(|| format!("disk '{disk}' has no volume"))?;
        let st = self
            .storage_mut(&node, &sid)
            .ok_or_else(|| format!("storage '{sid}' does not exist"))?;
        let cur = st.volumes.get(&name).map(|v| v.size).unwrap_or(0);
        if size > cur && size - cur > st.avail() {
            return Err(format!(
                "error resizing volume '{sid}:{name}': not enough free space on storage '{sid}'"
            ));
        }
        if let Some(v) = st.volumes.get_mut(&name) {
            v.size = size;
        }
        d.set("size", format_size(size));
        let vm = self.vms.get_mut(&vmid).unwrap();
        vm.conf.insert(disk.to_string(), print_drive(&d));
        Ok(0)
    }

    // -- config updates ----------------------------------------------------------

    /// Applies staged `pending` changes: everything when `all` (VM stopped or starting),
    /// otherwise only what applies live on a running VM.
    pub fn apply_pending(
        &mut self,
        vmid: u32,
        all: bool,
        log: &mut Vec<String>,
    ) -> Result<(), String> {
        let vm = self.vms.get(&vmid).ok_or("VM vanished")?.clone();
        let node = vm.node.clone();
        let live_all = all || !vm.running();
        let hotplug = vm.effective_conf().get("hotplug").cloned();
        let mut conf = vm.conf.clone();
        let mut pending = vm.pending.clone();
        let mut pdel = vm.pending_delete.clone();
        // Deletions first.
        for (k, force) in vm.pending_delete.iter() {
            if !(live_all || applies_live(k, hotplug.as_deref())) {
                continue;
            }
            pdel.remove(k);
            if let Some(old) = conf.remove(k) {
                if is_drive_key(k) {
                    let d = parse_drive(k, &old);
                    if k.starts_with("unused") || *force {
                        self.free_volume(&node, &old, k);
                    } else if !is_cdrom(&d) {
                        let slot = (0..256)
                            .map(|i| format!("unused{i}"))
                            .find(|u| !conf.contains_key(u))
                            .unwrap();
                        conf.insert(slot, d.get("file").unwrap_or_default().to_string());
                    }
                }
            }
        }
        for (k, v) in vm.pending.iter() {
            if !(live_all || applies_live(k, hotplug.as_deref())) {
                continue;
            }
            let mut value = v.clone();
            if is_drive_key(k) {
                let d = parse_drive(k, v);
                if !is_cdrom(&d) && alloc_request(d.get("file").unwrap_or_default()).is_some() {
                    value = self.allocate(&node, vmid, k, d, false)?;
                    log.push(format!(
                        "{k}: allocated {}",
                        value.split(',').next().unwrap_or_default()
                    ));
                    // Replacing a disk moves the old volume to unusedN.
                    if let Some(old) = conf.get(k) {
                        let od = parse_drive(k, old);
                        if !is_cdrom(&od) {
                            let slot = (0..256)
                                .map(|i| format!("unused{i}"))
                                .find(|u| !conf.contains_key(u))
                                .unwrap();
                            conf.insert(slot, od.get("file").unwrap_or_default().to_string());
                        }
                    }
                }
            }
            pending.remove(k);
            conf.insert(k.clone(), value);
        }
        let vm = self.vms.get_mut(&vmid).unwrap();
        vm.conf = conf;
        vm.pending = pending;
        vm.pending_delete = pdel;
        Ok(())
    }

    /// Applies an injected state fault.
    pub fn apply_fault(&mut self, f: Fault) -> Result<(), String> {
        match f {
            Fault::NodeOffline { node, offline } => {
                let n = self
                    .nodes
                    .get_mut(&node)
                    .ok_or_else(|| format!("no node '{node}'"))?;
                n.online = !offline;
            }
            Fault::StaleLock { vmid, lock } => {
                let vm = self
                    .vms
                    .get_mut(&vmid)
                    .ok_or_else(|| format!("no VM {vmid}"))?;
                vm.conf.insert("lock".into(), lock);
            }
            Fault::HoldFileLock { vmid, seconds } => {
                let until = self.now() + Duration::from_secs_f64(seconds.max(0.0));
                let vm = self
                    .vms
                    .get_mut(&vmid)
                    .ok_or_else(|| format!("no VM {vmid}"))?;
                vm.flock_until = Some(until);
            }
            Fault::FillStorage {
                node,
                storage,
                free,
            } => {
                let st = self
                    .storage_mut(&node, &storage)
                    .ok_or_else(|| format!("no storage '{storage}' on node '{node}'"))?;
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
