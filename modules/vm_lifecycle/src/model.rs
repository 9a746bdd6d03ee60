//! The words the module thinks in: desired states, observed power, and the operations that move a VM
//! from one to the other. Pure data, no I/O.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// The `state` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Started,
    Stopped,
    Restarted,
    Reset,
    Paused,
    Resumed,
    Status,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Started => "started",
            State::Stopped => "stopped",
            State::Restarted => "restarted",
            State::Reset => "reset",
            State::Paused => "paused",
            State::Resumed => "resumed",
            State::Status => "status",
        }
    }
}

/// The `wait_for` option: how ready a VM must be before its step counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitFor {
    /// Only the power operation itself (and, for HA, the real power state).
    None,
    /// QEMU runs and the guest CPUs execute (`qmpstatus: running`).
    Running,
    /// The QEMU guest agent answers.
    Agent,
    /// The guest agent reports at least one routable address.
    Ip,
}

/// What a VM's power looks like from outside, as one word.
///
/// Proxmox's `status` says `running` for any VM whose QEMU process exists, paused or not; `qmpstatus`
/// says what the guest CPUs do. A paused (or suspended, or crashed-and-halted) guest is not "running"
/// for this module: it serves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    Running,
    Paused,
    Stopped,
    /// The node did not answer (offline, 595) or reported nothing usable.
    Unknown,
}

impl Power {
    /// Classify `status/current`'s `status` and `qmpstatus`.
    pub fn classify(status: &str, qmpstatus: Option<&str>) -> Power {
        match status {
            "stopped" => Power::Stopped,
            "running" => match qmpstatus {
                // Older nodes and some paths omit qmpstatus; then `status` is all we know.
                None | Some("running") | Some("debug") => Power::Running,
                // paused, suspended (S3), prelaunch, inmigrate, postmigrate, io-error, guest-panicked, …:
                // QEMU is up but the guest does not execute.
                Some(_) => Power::Paused,
            },
            _ => Power::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Power::Running => "running",
            Power::Paused => "paused",
            Power::Stopped => "stopped",
            Power::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Power {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One power request: the client's own type, so the engine and the wire agree by construction.
pub use pve_client::power::PowerAction as Op;

/// How the module talks about an operation.
pub trait OpExt {
    /// The word used in results (`actions`) and messages.
    fn verb(&self) -> &'static str;
    /// The past tense, for the per-VM message.
    fn done(&self) -> &'static str;
    /// How long the operation may take beyond the normal task time (the guest's own timeout).
    fn guest_timeout(&self) -> Duration;
}

impl OpExt for Op {
    fn verb(&self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Shutdown {
                force_stop: true, ..
            } => "shutdown (forced after timeout)",
            Op::Shutdown { .. } => "shutdown",
            Op::Stop => "stop",
            Op::Reboot { .. } => "reboot",
            Op::Reset => "reset",
            Op::Suspend => "pause",
            Op::Resume => "resume",
        }
    }

    fn done(&self) -> &'static str {
        match self {
            Op::Start => "started",
            Op::Shutdown {
                force_stop: true, ..
            } => "shut down (forced after the timeout if needed)",
            Op::Shutdown { .. } => "shut down",
            Op::Stop => "stopped hard",
            Op::Reboot { .. } => "rebooted",
            Op::Reset => "reset",
            Op::Suspend => "paused",
            Op::Resume => "resumed",
        }
    }

    fn guest_timeout(&self) -> Duration {
        match self {
            Op::Shutdown { timeout, .. } | Op::Reboot { timeout } => *timeout,
            _ => Duration::ZERO,
        }
    }
}

/// One VM as the cluster listing shows it (`/cluster/resources?type=vm`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inventory {
    pub vmid: u32,
    pub name: String,
    pub node: String,
    /// Lowercased, as Proxmox stores them.
    pub tags: Vec<String>,
    pub template: bool,
    /// The listing's `status` (`unknown` for VMs on an offline node).
    pub status: String,
    /// An LXC container: listed only so that its VMID is refused by name; never a target.
    pub container: bool,
}

impl Inventory {
    pub fn label(&self) -> String {
        label(&self.name, self.vmid)
    }
    pub fn has_tag(&self, tag: &str) -> bool {
        let t = tag.to_ascii_lowercase();
        self.tags.contains(&t)
    }
}

/// `name (vmid)`, or just the vmid for a nameless VM.
pub fn label(name: &str, vmid: u32) -> String {
    if name.is_empty() {
        format!("VM {vmid}")
    } else {
        format!("{name} ({vmid})")
    }
}

/// One VM's live state (`status/current`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    pub status: String,
    pub qmpstatus: Option<String>,
    pub lock: Option<String>,
    pub uptime: u64,
    pub ha_managed: bool,
    /// The HA manager's requested/current state (`started`, `stopped`, `disabled`, …).
    pub ha_state: Option<String>,
    /// The guest agent is enabled in the VM's config.
    pub agent: bool,
}

impl Observed {
    pub fn power(&self) -> Power {
        Power::classify(&self.status, self.qmpstatus.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_is_not_running() {
        assert_eq!(Power::classify("running", Some("running")), Power::Running);
        assert_eq!(Power::classify("running", None), Power::Running);
        assert_eq!(Power::classify("running", Some("paused")), Power::Paused);
        assert_eq!(Power::classify("running", Some("suspended")), Power::Paused);
        assert_eq!(Power::classify("running", Some("prelaunch")), Power::Paused);
        assert_eq!(Power::classify("stopped", None), Power::Stopped);
        assert_eq!(Power::classify("stopped", Some("stopped")), Power::Stopped);
        assert_eq!(Power::classify("unknown", None), Power::Unknown);
    }

    #[test]
    fn tags_compare_case_insensitively() {
        let vm = Inventory {
            tags: vec!["ocp-sno1".into()],
            ..Default::default()
        };
        assert!(vm.has_tag("OCP-sno1"));
        assert!(!vm.has_tag("ocp"));
    }

    #[test]
    fn labels() {
        assert_eq!(label("master-0", 101), "master-0 (101)");
        assert_eq!(label("", 101), "VM 101");
    }
}
