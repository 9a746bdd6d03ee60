//! Tasks: every mutating VM call returns a UPID, and success is the task's `exitstatus`, not the
//! HTTP status. Waiting uses `proxshift_http::wait_for`; a task is always queried on the node its
//! UPID names.

use std::str::FromStr;
use std::time::Duration;

use proxshift_http::{wait_for, Poll, WaitError};
use serde_json::Value;

use crate::client::{Client, Params};
use crate::error::{Error, TaskError};

/// How many log lines a failure or timeout carries.
pub const LOG_TAIL_LINES: usize = 15;

/// A decoded UPID: `UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upid {
    pub raw: String,
    pub node: String,
    pub kind: String,
    pub id: String,
    pub user: String,
}

impl FromStr for Upid {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::invalid(format!("'{s}' is not a Proxmox task id (UPID)"));
        let parts: Vec<&str> = s.split(':').collect();
        // "UPID", node, pid, pstart, starttime, type, id, user, "" (trailing colon)
        if parts.len() != 9 || parts[0] != "UPID" || !parts[8].is_empty() {
            return Err(bad());
        }
        let hex = |p: &str, lens: &[usize]| {
            lens.contains(&p.len()) && p.chars().all(|c| c.is_ascii_hexdigit())
        };
        let node_ok = !parts[1].is_empty()
            && parts[1]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !parts[1].starts_with('-')
            && !parts[1].ends_with('-');
        if !node_ok
            || !hex(parts[2], &[8])
            || !hex(parts[3], &[8, 9])
            || !hex(parts[4], &[8])
            || parts[5].is_empty()
            || parts[7].is_empty()
        {
            return Err(bad());
        }
        Ok(Upid {
            raw: s.to_string(),
            node: parts[1].to_string(),
            kind: parts[5].to_string(),
            id: parts[6].to_string(),
            user: parts[7].to_string(),
        })
    }
}

/// A task that finished successfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    pub upid: String,
    /// `OK` or `WARNINGS: n`.
    pub exitstatus: String,
    /// Log lines of tasks that ended with warnings (empty for `OK`).
    pub warnings: Vec<String>,
}

/// Is an `exitstatus` a success? `OK` and `WARNINGS: n` are (as PVE's own `status_is_error`).
pub fn exitstatus_ok(s: &str) -> bool {
    s == "OK" || s.starts_with("WARNINGS")
}

impl Client {
    /// `GET /nodes/{node}/tasks/{upid}/status`.
    pub fn task_status(&self, upid: &Upid) -> Result<Value, Error> {
        self.get(
            &format!("/nodes/{}/tasks/{}/status", upid.node, upid.raw),
            &Params::new(),
        )
    }

    /// The last `lines` lines of a task log (PVE returns 50 by default; page to the end).
    pub fn task_log_tail(&self, upid: &Upid, lines: usize) -> Result<Vec<String>, Error> {
        let path = format!("/nodes/{}/tasks/{}/log", upid.node, upid.raw);
        let page = |start: u64, limit: usize| {
            self.call_envelope(
                proxshift_http::reqwest::Method::GET,
                &path,
                &Params::new().set("start", start).set("limit", limit),
                None,
            )
        };
        let first = page(0, 500)?;
        let total = first.get("total").and_then(Value::as_u64);
        let env = match total {
            Some(t) if t > 500 => page(t.saturating_sub(lines as u64), lines)?,
            _ => first,
        };
        let mut out: Vec<String> = env
            .get("data")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|l| l.get("t").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if out.len() > lines {
            out.drain(..out.len() - lines);
        }
        Ok(out)
    }

    /// Wait for a task to stop. Failure → [`Error::Task`] with exit status and log tail; out of time →
    /// [`Error::Timeout`] with the last log lines (the task keeps running on the server).
    pub fn wait_task(&self, upid: &str, timeout: Duration) -> Result<TaskOutcome, Error> {
        let u: Upid = upid.parse()?;
        let r = wait_for(timeout, self.poll_interval(), || {
            let st = self.task_status(&u)?;
            if st.get("status").and_then(Value::as_str) == Some("stopped") {
                let exit = st
                    .get("exitstatus")
                    .and_then(Value::as_str)
                    .unwrap_or("unexpected status")
                    .to_string();
                Ok(Poll::Ready(exit))
            } else {
                Ok(Poll::Pending(format!("task {} ({})", u.kind, u.raw)))
            }
        });
        match r {
            Ok(exit) if exitstatus_ok(&exit) => {
                let warnings = if exit == "OK" {
                    Vec::new()
                } else {
                    self.task_log_tail(&u, LOG_TAIL_LINES)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|l| l.contains("WARN"))
                        .collect()
                };
                Ok(TaskOutcome {
                    upid: u.raw,
                    exitstatus: exit,
                    warnings,
                })
            }
            Ok(exit) => Err(Error::Task(TaskError {
                log_tail: self.task_log_tail(&u, LOG_TAIL_LINES).unwrap_or_default(),
                upid: u.raw.clone(),
                node: u.node.clone(),
                kind: u.kind.clone(),
                exitstatus: exit,
            })),
            Err(WaitError::Failed(e)) => Err(e),
            // No stop file here (a Proxmox task runs on whatever this run decides): a timeout only.
            Err(
                WaitError::Timeout { waited, pending }
                | WaitError::Stopped {
                    waited,
                    reason: pending,
                },
            ) => Err(Error::Timeout {
                what: format!("task {} on node {}", u.kind, u.node),
                waited,
                pending,
                log_tail: self.task_log_tail(&u, 5).unwrap_or_default(),
            }),
        }
    }

    /// Start an operation and wait for its task. `start` returns the call's `data`: a UPID, or `null`
    /// for calls that finished synchronously. A task that fails on file/storage lock contention
    /// (`can't lock file … got timeout`; nothing was changed) is started again with backoff.
    pub fn run_task(
        &self,
        timeout: Duration,
        mut start: impl FnMut() -> Result<Value, Error>,
    ) -> Result<Option<TaskOutcome>, Error> {
        self.backoff().retry(
            |_| match start()? {
                Value::String(upid) => self.wait_task(&upid, timeout).map(Some),
                _ => Ok(None),
            },
            Error::is_lock_timeout,
        )
    }

    /// UPIDs of the `kind` tasks still running on `node` (`GET /nodes/{node}/tasks?source=active`),
    /// only those of `id` when given (a task's id is a create's vmid, a clone's *source* vmid).
    pub fn running_tasks(
        &self,
        node: &str,
        kind: &str,
        id: Option<u32>,
    ) -> Result<Vec<String>, Error> {
        let q = Params::new()
            .set("source", "active")
            .set("typefilter", kind)
            .opt("vmid", id);
        let list = self.get(&format!("/nodes/{node}/tasks"), &q)?;
        Ok(list
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("upid").and_then(Value::as_str))
            .map(str::to_string)
            .collect())
    }

    /// Wait until a VM's config lock (`lock: clone`, `create`, `backup`, …) is gone; returns the config.
    pub fn wait_unlocked(
        &self,
        node: &str,
        vmid: u32,
        timeout: Duration,
    ) -> Result<serde_json::Map<String, Value>, Error> {
        let r = wait_for(timeout, self.poll_interval(), || {
            let cfg = self.vm_config(node, vmid, false)?;
            match cfg.get("lock").and_then(Value::as_str) {
                Some(lock) => Ok(Poll::Pending(format!("VM {vmid} is locked ({lock})"))),
                None => Ok(Poll::Ready(cfg)),
            }
        });
        r.map_err(|e| match e {
            WaitError::Failed(e) => e,
            WaitError::Timeout { waited, pending }
            | WaitError::Stopped {
                waited,
                reason: pending,
            } => Error::Timeout {
                what: format!("the lock on VM {vmid} to clear"),
                waited,
                pending,
                log_tail: Vec::new(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upid_round_trip() {
        let u: Upid = "UPID:pve:00001ED0:00035693:66343A23:qmshutdown:100:terraform@pve!provider:"
            .parse()
            .unwrap();
        assert_eq!(u.node, "pve");
        assert_eq!(u.kind, "qmshutdown");
        assert_eq!(u.id, "100");
        assert_eq!(u.user, "terraform@pve!provider");
        let empty_id: Upid = "UPID:pve-2:0000AAAA:000356930:66343A23:imgcopy::root@pam:"
            .parse()
            .unwrap();
        assert_eq!(empty_id.id, "");
        assert_eq!(empty_id.node, "pve-2");
    }

    #[test]
    fn bad_upids_are_refused() {
        for s in [
            "",
            "101",
            "UPID:pve:1ED0:00035693:66343A23:qmstart:100:root@pam:",
            "UPID:pve:00001ED0:00035693:66343A23:qmstart:100:root@pam",
            "UPID:-pve:00001ED0:00035693:66343A23:qmstart:100:root@pam:",
            "UPID:pve:00001ED0:00035693:66343A23::100:root@pam:",
        ] {
            assert!(s.parse::<Upid>().is_err(), "{s}");
        }
    }

    #[test]
    fn exit_statuses() {
        assert!(exitstatus_ok("OK"));
        assert!(exitstatus_ok("WARNINGS: 2"));
        assert!(!exitstatus_ok("unexpected status"));
        assert!(!exitstatus_ok(
            "unable to create VM 101 - unsupported format 'qcow2'"
        ));
    }
}
