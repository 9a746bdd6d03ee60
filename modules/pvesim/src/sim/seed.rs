//! Building the state from a seed, and the state as a seed again (`--dump-state`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::auth::{builtin_roles, privileges, Access};
use crate::faults::Faults;
use crate::model::{
    parse_size, AclEntry, AclSeed, ByteSize, Ct, CtSeed, FileSeed, NetIfaceSeed, Node, NodeSeed,
    Pool, PoolSeed, RoleSeed, RunState, Seed, Storage, StorageSeed, Token, TokenSeed, User,
    UserSeed, Vm, VmSeed, Volume,
};
use crate::vmconfig::{is_cdrom, is_drive_key, parse_drive, split_volid, storage_default_content};

use super::{unix_now, Options, Sim};

/// Why a seed cannot be loaded (the texts name the seed entry at fault).
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("node {node}: storage {storage}: unknown type '{kind}'")]
    StorageType {
        node: String,
        storage: String,
        kind: String,
    },
    #[error("node {node}: storage {storage}: unknown content type '{content}'")]
    ContentType {
        node: String,
        storage: String,
        content: String,
    },
    #[error("token {userid}!{tokenid}: unknown user")]
    TokenUser { userid: String, tokenid: String },
    #[error("acl on {0}: give exactly one of user/group/token")]
    AclSubject(String),
    #[error("acl on {path}: unknown role {role}")]
    AclRole { path: String, role: String },
    #[error("vm {vmid}: unknown node {node}")]
    VmNode { vmid: u32, node: String },
    #[error("vm {0}: duplicate vmid")]
    DuplicateVmid(u32),
    #[error("vm {vmid}: storage {storage} not on node {node}")]
    VmStorage {
        vmid: u32,
        storage: String,
        node: String,
    },
    #[error("pool {pool}: unknown vm {vmid}")]
    PoolVm { pool: String, vmid: u32 },
    #[error("pool {pool}: vm {vmid} is already in another pool")]
    PoolTaken { pool: String, vmid: u32 },
    #[error(transparent)]
    Version(#[from] super::version::VersionError),
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

fn check_storage_seed(node: &str, s: &StorageSeed) -> Result<(), SeedError> {
    if !STORAGE_TYPES.contains(&s.kind.as_str()) {
        return Err(SeedError::StorageType {
            node: node.to_string(),
            storage: s.id.clone(),
            kind: s.kind.clone(),
        });
    }
    if let Some(c) = s
        .content
        .iter()
        .find(|c| !CONTENT_TYPES.contains(&c.trim()))
    {
        return Err(SeedError::ContentType {
            node: node.to_string(),
            storage: s.id.clone(),
            content: c.clone(),
        });
    }
    Ok(())
}

impl Sim {
    pub fn new(seed: Seed, opts: Options) -> Result<Sim, SeedError> {
        let version = seed.cluster.version.parse()?;
        let mut sim = Sim {
            opts,
            version,
            cluster: seed.cluster.clone(),
            nodes: BTreeMap::new(),
            storages: BTreeMap::new(),
            vms: BTreeMap::new(),
            cts: BTreeMap::new(),
            pools: BTreeMap::new(),
            ha: crate::ha::HaState::default(),
            backups: BTreeMap::new(),
            access: Access {
                roles: builtin_roles(version.generation()),
                known: privileges(version.generation())
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
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

    fn seed(&mut self, seed: Seed) -> Result<(), SeedError> {
        let now = unix_now();
        for n in &seed.nodes {
            self.seed_node(n, now)?;
        }
        self.seed_access(&seed)?;
        for v in seed.vms {
            self.seed_vm(v, now)?;
        }
        for c in seed.cts {
            self.seed_ct(c, now)?;
        }
        self.seed_pools(seed.pools)
    }

    fn seed_node(&mut self, n: &NodeSeed, now: u64) -> Result<(), SeedError> {
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
                network: n
                    .network
                    .clone()
                    .unwrap_or_else(|| default_network(self.nodes.len())),
            },
        );
        Ok(())
    }

    /// Users (root@pam always exists), tokens, roles and ACLs.
    fn seed_access(&mut self, seed: &Seed) -> Result<(), SeedError> {
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
        for t in seed.tokens.iter().cloned() {
            if !self.access.users.contains_key(&t.userid) {
                return Err(SeedError::TokenUser {
                    userid: t.userid,
                    tokenid: t.tokenid,
                });
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
        // pve-access-control `parse_user_config`: "user config - ignore invalid privilege"
        // (a PVE 9 privilege in a PVE 8 seed is dropped, as PVE 8 drops it from user.cfg).
        for r in seed.roles.iter().cloned() {
            let privs = r
                .privs
                .into_iter()
                .filter(|p| self.access.is_privilege(p))
                .collect();
            self.access.roles.insert(r.roleid, privs);
        }
        for a in seed.acl.iter().cloned() {
            let (kind, ugid) = match (a.user, a.group, a.token) {
                (Some(u), None, None) => ("user", u),
                (None, Some(g), None) => ("group", g),
                (None, None, Some(t)) => ("token", t),
                _ => return Err(SeedError::AclSubject(a.path)),
            };
            if !self.access.roles.contains_key(&a.role) {
                return Err(SeedError::AclRole {
                    path: a.path,
                    role: a.role,
                });
            }
            self.access.acl.push(AclEntry {
                path: a.path,
                kind: kind.into(),
                ugid,
                roleid: a.role,
                propagate: a.propagate,
            });
        }
        Ok(())
    }

    fn seed_vm(&mut self, v: VmSeed, now: u64) -> Result<(), SeedError> {
        if !self.nodes.contains_key(&v.node) {
            return Err(SeedError::VmNode {
                vmid: v.vmid,
                node: v.node,
            });
        }
        if self.vms.contains_key(&v.vmid) {
            return Err(SeedError::DuplicateVmid(v.vmid));
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
            let key = self
                .storage_key(&v.node, sid)
                .ok_or_else(|| SeedError::VmStorage {
                    vmid: v.vmid,
                    storage: sid.to_string(),
                    node: v.node.clone(),
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
                snapshots: v.snapshots,
                pid: 0,
            },
        );
        if running {
            let pid = self.alloc_pid();
            if let Some(vm) = self.vms.get_mut(&v.vmid) {
                vm.pid = pid;
            }
        }
        if v.ha {
            // A seeded HA VM is an HA resource requested in the state it runs in.
            let state = if running {
                crate::ha::Requested::Started
            } else {
                crate::ha::Requested::Stopped
            };
            self.ha_add(v.vmid, crate::ha::HaResource::new(state));
        }
        Ok(())
    }

    /// A container: its mount point volumes (`rootfs`, `mpN`) are created as `rootdir` content.
    fn seed_ct(&mut self, c: CtSeed, now: u64) -> Result<(), SeedError> {
        if !self.nodes.contains_key(&c.node) {
            return Err(SeedError::VmNode {
                vmid: c.vmid,
                node: c.node,
            });
        }
        if self.vmid_taken(c.vmid) {
            return Err(SeedError::DuplicateVmid(c.vmid));
        }
        let conf: BTreeMap<String, String> = c
            .config
            .iter()
            .map(|(k, val)| (k.clone(), crate::schema::value_str(val)))
            .collect();
        for (k, val) in &conf {
            if !(k == "rootfs" || is_mp_key(k)) {
                continue;
            }
            let volume = val.split(',').next().unwrap_or_default();
            let Some((sid, name)) = split_volid(volume) else {
                continue;
            };
            let size = val
                .split(',')
                .find_map(|p| p.strip_prefix("size="))
                .and_then(parse_size)
                .unwrap_or(8 << 30);
            let key = self
                .storage_key(&c.node, sid)
                .ok_or_else(|| SeedError::VmStorage {
                    vmid: c.vmid,
                    storage: sid.to_string(),
                    node: c.node.clone(),
                })?;
            let st = self.storages.get_mut(&key).expect("storage_key found it");
            st.volumes.insert(
                name.to_string(),
                Volume {
                    name: name.to_string(),
                    size,
                    format: "raw".into(),
                    content: "rootdir".into(),
                    vmid: Some(c.vmid),
                    ctime: now,
                    parent: None,
                },
            );
        }
        let pid = if c.running { self.alloc_pid() } else { 0 };
        let started_at = c.running.then(|| self.now());
        self.cts.insert(
            c.vmid,
            Ct {
                vmid: c.vmid,
                node: c.node,
                conf,
                running: c.running,
                started_at,
                ips: c.ips,
                pid,
            },
        );
        Ok(())
    }

    fn seed_pools(&mut self, pools: Vec<PoolSeed>) -> Result<(), SeedError> {
        for p in pools {
            if let Some(v) = p.vms.iter().find(|v| !self.vmid_taken(**v)) {
                return Err(SeedError::PoolVm {
                    pool: p.poolid,
                    vmid: *v,
                });
            }
            if let Some(v) = p.vms.iter().find(|v| self.pool_of(**v).is_some()) {
                return Err(SeedError::PoolTaken {
                    pool: p.poolid,
                    vmid: *v,
                });
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
                network: Some(n.network.clone()),
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
                snapshots: v.snapshots.clone(),
            })
            .collect();
        let cts = self
            .cts
            .values()
            .map(|c| CtSeed {
                vmid: c.vmid,
                node: c.node.clone(),
                config: c
                    .conf
                    .iter()
                    .map(|(k, x)| (k.clone(), x.clone().into()))
                    .collect(),
                running: c.running,
                ips: c.ips.clone(),
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
            cts,
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
                        .filter(|v| self.vmid_taken(*v))
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A container mount point key (`mp0` … `mp255`, pve-container `PVE::LXC::Config`'s `MAX_MOUNT_POINTS`).
pub(crate) fn is_mp_key(k: &str) -> bool {
    k.strip_prefix("mp")
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n < 256)
}

/// A fresh install's network (the installer writes `vmbr0` over the first NIC): the `index`-th node gets
/// 192.0.2.(11 + index)/24 with gateway 192.0.2.1.
fn default_network(index: usize) -> Vec<NetIfaceSeed> {
    vec![
        NetIfaceSeed {
            iface: "eno1".into(),
            kind: "eth".into(),
            active: true,
            cidr: None,
            gateway: None,
            bridge_ports: None,
        },
        NetIfaceSeed {
            iface: "vmbr0".into(),
            kind: "bridge".into(),
            active: true,
            cidr: Some(format!("192.0.2.{}/24", 11 + index.min(200))),
            gateway: Some("192.0.2.1".into()),
            bridge_ports: Some("eno1".into()),
        },
    ]
}
