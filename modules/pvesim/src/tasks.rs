//! Worker tasks: UPIDs, status, logs and completion times.

use std::time::Instant;

use serde_json::{json, Value};

/// A worker's failure: the text it ends with (`exitstatus`, `TASK ERROR: …` in its log).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TaskError(pub String);

impl From<String> for TaskError {
    fn from(s: String) -> Self {
        TaskError(s)
    }
}

impl From<&str> for TaskError {
    fn from(s: &str) -> Self {
        TaskError(s.to_string())
    }
}

/// A worker's outcome: `Ok(warnings)` or its failure.
pub type TaskResult = Result<u32, TaskError>;

/// One config update as the API received it: staged into `[PENDING]` under the config lock.
#[derive(Debug, Clone, Default)]
pub struct ConfigChanges {
    pub set: std::collections::BTreeMap<String, String>,
    pub delete: Vec<String>,
    pub revert: Vec<String>,
    pub force: bool,
}

/// What a task does when it finishes (applied by `Sim::tick`).
#[derive(Debug, Clone)]
pub enum Action {
    None,
    Create {
        vmid: u32,
        start: bool,
    },
    Clone {
        src: u32,
        newid: u32,
        full: bool,
        storage: Option<String>,
        format: Option<String>,
        /// Storages the clone writes to (for storage-lock contention).
        targets: Vec<String>,
    },
    Config {
        vmid: u32,
        changes: ConfigChanges,
    },
    /// The request as given: `resize_vm` checks it inside the worker.
    Resize(crate::ops::resize::ResizeDisk),
    Destroy {
        vmid: u32,
        unreferenced: bool,
    },
    Start {
        vmid: u32,
    },
    Stop {
        vmid: u32,
    },
    Shutdown {
        vmid: u32,
        force: bool,
    },
    Reboot {
        vmid: u32,
    },
    Reset {
        vmid: u32,
    },
    Pause {
        vmid: u32,
        todisk: bool,
    },
    Resume {
        vmid: u32,
    },
    Template {
        vmid: u32,
    },
    /// `qmsnapshot`, `qmdelsnapshot`, `qmrollback` (`ops::snapshot`).
    Snapshot {
        vmid: u32,
        op: crate::ops::snapshot::SnapshotOp,
    },
    Upload(crate::ops::upload::NewFile),
    /// `imgdel`: a storage volume freed.
    DeleteVolume(crate::ops::volume::FreeVolume),
    /// `vzcreate`: a container's root volume and config (`ops::create_ct::finish`).
    CreateCt {
        vmid: u32,
        keys: std::collections::BTreeMap<String, String>,
        ostemplate: String,
        pool: Option<String>,
        start: bool,
    },
    /// `vzdump`: backups of VMs (`ops::vzdump::finish`).
    Backup(crate::ops::vzdump::BackupJob),
    /// `qmrestore`: a VM made from a backup (`ops::vzdump::restore_finish`).
    Restore {
        vmid: u32,
        start: bool,
    },
    /// HA request: the power change lands a little after the task.
    Ha {
        vmid: u32,
        start: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Task {
    pub upid: String,
    pub node: String,
    pub pid: u32,
    pub pstart: u32,
    pub starttime: u64,
    pub kind: String,
    pub id: String,
    pub user: String,
    pub tokenid: Option<String>,
    pub ends_at: Instant,
    pub endtime: Option<u64>,
    pub exitstatus: Option<String>,
    pub log: Vec<String>,
    pub action: Action,
    /// Injected failure: the task ends with this error instead of running its action.
    pub fail_with: Option<String>,
    pub warnings: u32,
}

impl Task {
    pub fn running(&self) -> bool {
        self.exitstatus.is_none()
    }

    pub fn status_json(&self) -> Value {
        let mut v = json!({
            "upid": self.upid,
            "node": self.node,
            "pid": self.pid,
            "pstart": self.pstart,
            "starttime": self.starttime,
            "type": self.kind,
            "id": self.id,
            "user": self.user,
            "status": if self.running() { "running" } else { "stopped" },
        });
        if let Some(t) = &self.tokenid {
            v["tokenid"] = json!(t);
        }
        if let Some(e) = &self.exitstatus {
            v["exitstatus"] = json!(e);
        }
        v
    }

    pub fn list_json(&self) -> Value {
        let mut v = json!({
            "upid": self.upid,
            "node": self.node,
            "pid": self.pid,
            "pstart": self.pstart,
            "starttime": self.starttime,
            "type": self.kind,
            "id": self.id,
            "user": self.user,
        });
        if let Some(e) = &self.exitstatus {
            v["status"] = json!(e);
            v["endtime"] = json!(self.endtime.unwrap_or(self.starttime));
        }
        v
    }

    /// Log lines as the API shows them, including the final `TASK …` line.
    pub fn log_lines(&self) -> Vec<String> {
        let mut lines = self.log.clone();
        match self.exitstatus.as_deref() {
            Some("OK") => lines.push("TASK OK".into()),
            Some(w) if w.starts_with("WARNINGS") => lines.push(format!("TASK {w}")),
            Some(e) => lines.push(format!("TASK ERROR: {e}")),
            None => {}
        }
        if lines.is_empty() {
            lines.push("no content".into());
        }
        lines
    }
}

pub fn encode_upid(
    node: &str,
    pid: u32,
    pstart: u32,
    starttime: u64,
    kind: &str,
    id: &str,
    user: &str,
) -> String {
    format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:")
}

/// Decodes a UPID into (node, type, id, user); `None` if malformed.
pub fn decode_upid(upid: &str) -> Option<(String, String, String, String)> {
    let parts: Vec<&str> = upid.split(':').collect();
    if parts.len() != 9 || parts[0] != "UPID" || !parts[8].is_empty() {
        return None;
    }
    let hex = |s: &str, lens: &[usize]| {
        lens.contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit())
    };
    if parts[1].is_empty()
        || !hex(parts[2], &[8])
        || !hex(parts[3], &[8, 9])
        || !hex(parts[4], &[8])
    {
        return None;
    }
    Some((
        parts[1].to_string(),
        parts[5].to_string(),
        parts[6].to_string(),
        parts[7].to_string(),
    ))
}

/// Realistic base durations (seconds) per task type, before time scaling.
pub fn base_duration(kind: &str) -> f64 {
    match kind {
        "qmcreate" => 2.0,
        "qmclone" => 3.0,
        "qmconfig" => 0.5,
        "resize" => 1.0,
        "qmdestroy" => 1.5,
        "qmstart" => 2.0,
        "qmstop" => 1.0,
        "qmshutdown" => 5.0,
        "qmreboot" => 8.0,
        "qmreset" => 0.5,
        "qmpause" => 0.5,
        "qmsuspend" => 3.0,
        "qmresume" => 0.5,
        "qmtemplate" => 1.0,
        "qmsnapshot" => 2.0,
        "qmdelsnapshot" => 1.0,
        "qmrollback" => 2.0,
        "imgcopy" => 1.0,
        "imgdel" => 0.5,
        "vzdump" => 3.0,
        "qmrestore" => 3.0,
        "hastart" | "hastop" => 0.5,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_upid, encode_upid};

    #[test]
    fn upid_roundtrip() {
        let u = encode_upid(
            "pve1",
            0x1ed0,
            0x35693,
            0x66343a23,
            "qmshutdown",
            "100",
            "t@pve!p",
        );
        assert_eq!(
            u,
            "UPID:pve1:00001ED0:00035693:66343A23:qmshutdown:100:t@pve!p:"
        );
        let (node, kind, id, user) = decode_upid(&u).unwrap();
        assert_eq!(
            (node.as_str(), kind.as_str(), id.as_str(), user.as_str()),
            ("pve1", "qmshutdown", "100", "t@pve!p")
        );
        assert!(decode_upid("UPID:pve1:xyz").is_none());
    }
}
