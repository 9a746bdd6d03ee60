//! The config lock (`lock:` in the VM config) and the config *file* lock a worker holds.

use std::time::{Duration, Instant};

use crate::error::{flock_timeout, locked, ErrorReply, ReplyResult};
use crate::model::Vm;
use crate::tasks::Action;

use super::Sim;

impl Sim {
    pub fn lock_timeout(&self) -> Duration {
        self.scaled(self.opts.lock_timeout)
    }

    /// Fails while another worker holds the VM's config file lock. `busy_until` tells the
    /// server to wait and retry: until the holder is done, or until the (scaled) lock
    /// timeout has passed, after which the retry fails with PVE's `got timeout`.
    pub fn check_flock(&self, vmid: u32, waited_since: Instant) -> ReplyResult<()> {
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
        let mut busy = ErrorReply::die(flock_timeout(vmid));
        if until <= deadline {
            busy.busy_until = Some(until);
            return Err(busy);
        }
        if now < deadline {
            busy.busy_until = Some(deadline);
        }
        Err(busy)
    }

    pub fn check_lock(vm: &Vm, skiplock: bool) -> ReplyResult<()> {
        match vm.lock() {
            Some(l) if !skiplock => Err(ErrorReply::die(locked(l))),
            _ => Ok(()),
        }
    }

    pub fn require_quorum(&self) -> ReplyResult<()> {
        if self.opts.quorate {
            Ok(())
        } else {
            Err(ErrorReply::die("cluster not ready - no quorum?"))
        }
    }

    /// A new worker's turn at `vmid`'s config file lock: it starts when the current holder is
    /// done (the returned begin), or — when that is beyond the lock timeout — fails after the
    /// timeout with PVE's `got timeout` (`fail`, `dur`). The lock is then held until it ends.
    pub(super) fn take_flock(
        &mut self,
        vmid: u32,
        now: Instant,
        dur: &mut Duration,
        fail: &mut Option<String>,
    ) -> Instant {
        let timeout = self.lock_timeout();
        let mut begin = now;
        if let Some(vm) = self.vms.get_mut(&vmid) {
            if let Some(until) = vm.flock_until.filter(|u| *u > now) {
                if until - now > timeout {
                    *fail = Some(flock_timeout(vmid));
                    *dur = timeout;
                } else {
                    begin = until;
                }
            }
            if fail.is_none() || begin > now {
                vm.flock_until = Some(begin + *dur);
            }
        }
        begin
    }

    /// Releases the config file lock the worker of `action` held (if it still holds it).
    pub(super) fn release_flock(&mut self, action: &Action, ends_at: Instant) {
        let vmid = match action {
            Action::Create { vmid, .. }
            | Action::Config { vmid, .. }
            | Action::Resize(crate::ops::resize::ResizeDisk { vmid, .. })
            | Action::Destroy { vmid, .. }
            | Action::Start { vmid }
            | Action::Stop { vmid }
            | Action::Shutdown { vmid, .. }
            | Action::Reboot { vmid }
            | Action::Reset { vmid }
            | Action::Pause { vmid, .. }
            | Action::Resume { vmid }
            | Action::Template { vmid }
            | Action::Snapshot { vmid, .. }
            | Action::Restore { vmid, .. }
            | Action::Ha { vmid, .. } => Some(*vmid),
            Action::Clone { newid, .. } => Some(*newid),
            Action::None
            | Action::Upload(_)
            | Action::DeleteVolume(_)
            | Action::Backup(_)
            | Action::CreateCt { .. } => None,
        };
        if let Some(vm) = vmid.and_then(|id| self.vms.get_mut(&id)) {
            if vm.flock_until == Some(ends_at) {
                vm.flock_until = None;
            }
        }
    }
}
