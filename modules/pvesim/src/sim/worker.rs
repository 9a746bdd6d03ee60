//! Worker tasks: starting them (with the config file lock), finishing them when their time
//! has come, and handing each finished task to its operation's effect in `crate::ops`.

use crate::auth::Principal;
use crate::tasks::{encode_upid, Action, Task, TaskError, TaskResult};

use super::Sim;
use crate::ops;

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
impl Sim {
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
        let begin = match flock {
            Some(vmid) => self.take_flock(vmid, now, &mut dur, &mut fail),
            None => now,
        };
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
        self.ha_tick();
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
                Err(TaskError(msg))
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
            Err(TaskError(e)) => e,
        });
        t.warnings = 0;
        let ends_at = self.tasks[i].ends_at;
        self.release_flock(&action, ends_at);
    }

    /// A failed create/clone leaves no VM behind, a failed upload no spooled file.
    fn cleanup_failed(&mut self, action: &Action) {
        match action {
            Action::Create { vmid, .. } => {
                self.vms.remove(vmid);
            }
            Action::Clone { newid, .. } => {
                self.vms.remove(newid);
            }
            Action::CreateCt { vmid, .. } => {
                self.cts.remove(vmid);
            }
            // A snapshot worker that failed unlocks the config (pve-guest-common `snapshot_create`'s cleanup
            // through `snapshot_delete` with `force`; `snapshot_delete`, `snapshot_rollback` end unlocked).
            Action::Snapshot { vmid, op } => {
                let (_, own) = op.kind_and_lock();
                if let Some(v) = self.vms.get_mut(vmid).filter(|v| v.lock() == Some(own)) {
                    v.conf.remove("lock");
                }
            }
            // vzdump's `cleanup` unlocks every guest it locked.
            Action::Backup(job) => {
                for vmid in &job.vmids {
                    if let Some(v) = self
                        .vms
                        .get_mut(vmid)
                        .filter(|v| v.lock() == Some("backup"))
                    {
                        v.conf.remove("lock");
                    }
                }
            }
            // pve-storage's `upload` worker unlinks its temporary file when it fails too.
            Action::Upload(upload) => upload.spooled.remove(),
            _ => {}
        }
    }

    /// Runs a task's effect (its operation's `finish`); Ok(warnings) or the task error.
    fn run_action(&mut self, action: &Action, log: &mut Vec<String>) -> TaskResult {
        match action.clone() {
            Action::None => Ok(0),
            Action::Create { vmid, start } => ops::create::finish(self, vmid, start, log),
            Action::Clone {
                src,
                newid,
                full,
                storage,
                format,
                ..
            } => ops::clone::finish(self, src, newid, full, storage, format, log),
            Action::Config { vmid, changes } => ops::config::finish(self, vmid, &changes, log),
            Action::Resize(req) => ops::resize::finish(self, &req),
            Action::Destroy { vmid, unreferenced } => {
                ops::destroy::finish(self, vmid, unreferenced, log)
            }
            Action::Template { vmid } => ops::template::finish(self, vmid),
            Action::Snapshot { vmid, op } => ops::snapshot::finish(self, vmid, &op, log),
            Action::Upload(upload) => ops::upload::finish(self, upload, log),
            Action::DeleteVolume(v) => ops::volume::finish(self, v, log),
            Action::Backup(job) => ops::vzdump::finish(self, &job, log),
            Action::Restore { vmid, start } => ops::vzdump::restore_finish(self, vmid, start, log),
            Action::Start { vmid } => ops::power::start_vm(self, vmid, log),
            Action::Stop { vmid } => {
                ops::power::power_off(self, vmid);
                Ok(0)
            }
            Action::Shutdown { vmid, force } => ops::power::finish_shutdown(self, vmid, force, log),
            Action::Reboot { vmid } => ops::power::finish_reboot(self, vmid, log),
            Action::Reset { vmid } => ops::power::finish_reset(self, vmid),
            Action::Pause { vmid, todisk } => ops::power::finish_pause(self, vmid, todisk),
            Action::Resume { vmid } => ops::power::finish_resume(self, vmid),
            Action::Ha { vmid, start } => ops::power::finish_ha(self, vmid, start, log),
            Action::CreateCt {
                vmid,
                keys,
                ostemplate,
                pool,
                start,
            } => ops::create_ct::finish(self, vmid, keys, &ostemplate, pool.as_deref(), start),
        }
    }
}
