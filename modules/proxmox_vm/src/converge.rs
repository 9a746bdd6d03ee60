//! One VM's way to its desired state: the run-wide context, the per-VM run and its result, and the
//! dispatch to its operation — [`remove`](crate::remove), [`update`](crate::update) or
//! [`create`](crate::create) (which clones too). Which VM is meant and whether it is ours lives in
//! [`identity`](crate::identity). The pure decisions come from `pve_types`; all I/O goes through
//! `pve_client`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use pve_client::{Client, ClusterVm, TaskOutcome};
use pve_types::{config_str, NicValue};
use serde_json::{json, Map, Value};

use crate::error::VmError;
use crate::identity::{label, owned_config};
use crate::options::{Timeouts, VmArgs};

/// Shared by all VMs of one module run.
pub struct Ctx<'a> {
    pub client: &'a Client,
    /// Logged in as root@pam with a password: the only caller Proxmox lets set raw devices.
    pub root_session: bool,
    pub check_mode: bool,
    pub timeouts: Timeouts,
    /// `/cluster/resources` as read at the start: the QEMU VMs.
    pub snapshot: Vec<ClusterVm>,
    /// The LXC containers of the same listing: never touched, their VMIDs refused.
    pub containers: Vec<ClusterVm>,
    /// vmids this run has claimed (so parallel creates never pick the same one).
    pub reserved: Mutex<BTreeSet<u32>>,
    /// Uploaded/verified ISOs by (node-or-shared, storage, filename) → volid; the lock also keeps
    /// parallel VMs from uploading the same ISO twice.
    pub isos: Mutex<HashMap<(String, String, String), String>>,
}

impl Ctx<'_> {
    pub(crate) fn secs(&self, s: u64) -> Duration {
        Duration::from_secs(s)
    }
}

/// Where a VM's plan points.
#[derive(Debug, Clone)]
pub enum Target {
    Existing(ClusterVm),
    New {
        node: String,
        vmid: Option<u32>,
        /// Pre-check findings allowed by `allow_overcommit`.
        warnings: Vec<String>,
    },
    Missing,
}

/// The outcome for one VM.
#[derive(Debug, Clone, Default)]
pub struct VmResult {
    pub changed: bool,
    pub failed: bool,
    pub msg: String,
    pub vmid: Option<u32>,
    pub node: Option<String>,
    pub name: Option<String>,
    pub state: String,
    pub config: Map<String, Value>,
    pub changed_keys: Vec<String>,
    pub reboot_required: bool,
    pub pending_keys: Vec<String>,
    pub task_ids: Vec<String>,
    pub created: bool,
    pub cloned: bool,
    pub deleted: bool,
    pub iso_volid: Option<String>,
    pub iso_uploaded: bool,
    pub warnings: Vec<String>,
    pub before: Map<String, Value>,
    pub after: Map<String, Value>,
}

impl VmResult {
    pub fn mac_addresses(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut keys: Vec<&String> = self
            .config
            .keys()
            .filter(|k| {
                k.strip_prefix("net")
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .collect();
        keys.sort_by_key(|k| k[3..].parse::<u32>().unwrap_or(0));
        for k in keys {
            if let Some(mac) = config_str(&self.config, k)
                .and_then(|v| NicValue::parse(&v).ok())
                .and_then(|n| n.mac)
            {
                m.insert(k.clone(), json!(mac));
            }
        }
        m
    }

    pub fn to_json(&self) -> Map<String, Value> {
        let mut config = self.config.clone();
        config.remove("digest");
        let o = json!({
            "vmid": self.vmid, "node": self.node, "name": self.name, "state": self.state,
            "changed": self.changed, "failed": self.failed, "msg": self.msg,
            "mac_addresses": self.mac_addresses(), "config": config,
            "changed_keys": self.changed_keys, "reboot_required": self.reboot_required,
            "pending_keys": self.pending_keys, "task_ids": self.task_ids,
            "created": self.created, "cloned": self.cloned, "deleted": self.deleted,
            "iso_volid": self.iso_volid, "iso_uploaded": self.iso_uploaded,
        });
        match o {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    pub(crate) fn task(&mut self, t: Option<TaskOutcome>) {
        if let Some(t) = t {
            if t.exitstatus != "OK" {
                self.warnings.push(format!(
                    "task {} ended with {}: {}",
                    t.upid,
                    t.exitstatus,
                    t.warnings.join(" | ")
                ));
            }
            self.task_ids.push(t.upid);
        }
    }
}

/// One VM's run: what is shared, what is asked for, and the result so far. Each operation is a
/// method on it, so none needs the whole context passed piece by piece.
pub(crate) struct VmRun<'r, 'c> {
    pub ctx: &'r Ctx<'c>,
    pub client: &'r Client,
    pub args: &'r VmArgs,
    pub res: VmResult,
}

/// What an existing VM is about to undergo; the refusals say it in these words.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Intent {
    Modify,
    Delete,
}

impl VmRun<'_, '_> {
    /// The config of an existing VM this run may act on: not a template, and ours (or `adopt`).
    pub(crate) fn owned_config_of(
        &mut self,
        vm: &ClusterVm,
        intent: Intent,
    ) -> Result<Map<String, Value>, VmError> {
        let vmid = vm.vmid as u32;
        self.res.vmid = Some(vmid);
        self.res.node = Some(vm.node.clone());
        let (template, refusal, override_) = match intent {
            Intent::Modify => ("manages VMs only", "modify it", "take it over"),
            Intent::Delete => ("does not delete templates", "delete it", "delete it anyway"),
        };
        if vm.template {
            return Err(VmError::Refused(format!(
                "{} is a template; proxmox_vm {template}",
                label(vm)
            )));
        }
        let cfg = self.client.vm_config(&vm.node, vmid, false)?;
        if !owned_config(&cfg, &self.args.owner_tag) && !self.args.adopt {
            return Err(VmError::Refused(format!(
                "{} does not carry the ownership tag '{}': refusing to {refusal} (set adopt: true to {override_})",
                label(vm),
                self.args.owner_tag
            )));
        }
        Ok(cfg)
    }
}

pub fn run_one(ctx: &Ctx, args: &VmArgs, target: &Target) -> VmResult {
    let mut run = VmRun {
        ctx,
        client: ctx.client,
        args,
        res: VmResult {
            name: args.spec.name.clone(),
            state: args.state.clone(),
            ..Default::default()
        },
    };
    let r = match (args.state.as_str(), target) {
        ("absent", Target::Existing(vm)) => run.remove(vm),
        ("absent", _) => {
            run.res.msg = "the VM does not exist".into();
            Ok(())
        }
        (_, Target::Existing(vm)) => run.update_existing(vm),
        (
            _,
            Target::New {
                node,
                vmid,
                warnings,
            },
        ) => {
            run.res.warnings.extend(warnings.iter().cloned());
            run.create(node, *vmid)
        }
        (_, Target::Missing) => Err(VmError::Internal("no target for a present VM")),
    };
    let mut res = run.res;
    if let Err(e) = r {
        res.failed = true;
        res.msg = e.to_string();
    } else if res.msg.is_empty() {
        res.msg = if res.changed {
            if ctx.check_mode {
                "the VM would change".into()
            } else {
                "the VM changed".into()
            }
        } else {
            "the VM is as desired".into()
        };
    }
    res
}
