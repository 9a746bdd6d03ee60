//! Fault injection: the same `Fault` values come from the scenario file, the admin API
//! (`POST /_pvesim/faults`) and `SimHandle::inject`.

use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}

/// One fault. JSON/YAML form: `{"fail_tasks": {"type": "qmclone", "count": 1, "message": "…"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// The next `count` tasks of `type` (e.g. `qmclone`, `qmstart`, `*` for any), optionally
    /// only for `vmid`, end with `TASK ERROR: <message>`.
    FailTasks {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        vmid: Option<u32>,
        #[serde(default = "one")]
        count: u32,
        message: String,
    },
    /// The next `count` requests whose API path (after `/api2/json`) starts with `path`
    /// (and whose method matches, if given) answer `status` with `message`.
    HttpError {
        path: String,
        #[serde(default)]
        method: Option<String>,
        status: u16,
        #[serde(default)]
        message: Option<String>,
        #[serde(default = "one")]
        count: u32,
    },
    /// A reverse proxy in front of PVE (nginx, HAProxy, a load balancer) answers the next
    /// `count` matching requests with `status` (502, 503 or 504) and its own HTML page instead
    /// of PVE's answer. `after_effect: false`: the proxy answers without forwarding (its
    /// upstream is down); `true`: PVE carried the request out and the proxy lost the answer
    /// (an upstream timeout or reset), so a write took effect although the client saw an error.
    ProxyError {
        path: String,
        #[serde(default)]
        method: Option<String>,
        #[serde(default = "bad_gateway")]
        status: u16,
        #[serde(default)]
        after_effect: bool,
        #[serde(default = "one")]
        count: u32,
    },
    /// Adds `ms` milliseconds to every request whose API path starts with `path`
    /// (default: all). `count` 0 = forever.
    Latency {
        #[serde(default)]
        path: Option<String>,
        ms: u64,
        #[serde(default)]
        count: u32,
    },
    /// Node online state (offline: its proxied calls answer 595).
    NodeOffline {
        node: String,
        #[serde(default = "yes")]
        offline: bool,
    },
    /// Leaves a config `lock` on a VM, as a crashed task would.
    StaleLock {
        vmid: u32,
        #[serde(default = "backup")]
        lock: String,
    },
    /// Holds the VM's config file lock (flock) for `seconds` of simulated time.
    HoldFileLock { vmid: u32, seconds: f64 },
    /// Another writer (an HA, backup or admin job) changes the VM's config right after each of
    /// the next `count` `GET …/qemu/{vmid}/config` answers: it sets `key` to `value`, so a write
    /// sent with the `digest` just read fails qemu-server's digest check.
    EditAfterRead {
        vmid: u32,
        key: String,
        value: String,
        #[serde(default = "one")]
        count: u32,
    },
    /// The next `count` hot-plugs of `key` (e.g. `scsi1`, `net1`) into a running VM (optionally
    /// only `vmid`) fail with `message`, as a QMP `device_add` error would: qemu-server's
    /// `vmconfig_hotplug_pending` reports `key: hotplug problem - <message>`, the value stays in
    /// `[PENDING]` and the config task fails.
    HotplugError {
        #[serde(default)]
        vmid: Option<u32>,
        key: String,
        message: String,
        #[serde(default = "one")]
        count: u32,
    },
    /// Leaves only `free` bytes (default 0) on a storage.
    FillStorage {
        node: String,
        storage: String,
        #[serde(default)]
        free: u64,
    },
}

fn bad_gateway() -> u16 {
    502
}
fn yes() -> bool {
    true
}
fn backup() -> String {
    "backup".into()
}

/// A scenario file: a list of faults applied at start.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub faults: Vec<Fault>,
}

/// Why a scenario file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("invalid scenario: {0}")]
    Syntax(#[from] serde_yaml_ng::Error),
    #[error("invalid scenario: {0}")]
    Fault(#[from] serde_json::Error),
}

/// A state fault aimed at something the simulator does not have.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FaultError {
    #[error("no node '{0}'")]
    NoNode(String),
    #[error("no VM {0}")]
    NoVm(u32),
    #[error("no storage '{storage}' on node '{node}'")]
    NoStorage { node: String, storage: String },
}

impl Scenario {
    pub fn from_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Scenario::from_yaml(&text)
    }

    /// YAML or JSON. Goes through a JSON value so faults are plain maps
    /// (`- node_offline: {node: pve3}`), not YAML tags.
    pub fn from_yaml(text: &str) -> Result<Scenario, ScenarioError> {
        let v: serde_json::Value = serde_yaml_ng::from_str(text)?;
        Ok(serde_json::from_value(v)?)
    }
}

/// Armed request/task faults (state faults are applied directly to the state).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Faults {
    pub armed: Vec<Fault>,
}

impl Faults {
    /// Consumes one matching task failure.
    pub fn take_task_failure(&mut self, kind: &str, vmid: Option<u32>) -> Option<String> {
        let idx = self.armed.iter().position(|f| match f {
            Fault::FailTasks {
                kind: k,
                vmid: v,
                count,
                ..
            } => *count > 0 && (k == "*" || k == kind) && (v.is_none() || *v == vmid),
            _ => false,
        })?;
        let msg = match &mut self.armed[idx] {
            Fault::FailTasks { count, message, .. } => {
                *count -= 1;
                message.clone()
            }
            _ => unreachable!(),
        };
        self.gc();
        Some(msg)
    }

    /// Consumes one matching HTTP error.
    pub fn take_http_error(&mut self, method: &str, path: &str) -> Option<(u16, String)> {
        let idx = self.armed.iter().position(|f| match f {
            Fault::HttpError {
                path: p,
                method: m,
                count,
                ..
            } => {
                *count > 0
                    && path.starts_with(p.as_str())
                    && m.as_deref()
                        .map(|m| m.eq_ignore_ascii_case(method))
                        .unwrap_or(true)
            }
            _ => false,
        })?;
        let out = match &mut self.armed[idx] {
            Fault::HttpError {
                status,
                message,
                count,
                ..
            } => {
                *count -= 1;
                (
                    *status,
                    message
                        .clone()
                        .unwrap_or_else(|| format!("injected HTTP {status}")),
                )
            }
            _ => unreachable!(),
        };
        self.gc();
        Some(out)
    }

    /// Consumes one matching proxy error of the given kind (`after_effect`): its status.
    pub fn take_proxy_error(
        &mut self,
        method: &str,
        path: &str,
        after_effect: bool,
    ) -> Option<u16> {
        let out = self.armed.iter_mut().find_map(|f| match f {
            Fault::ProxyError {
                path: p,
                method: m,
                status,
                after_effect: a,
                count,
            } if *count > 0
                && *a == after_effect
                && path.starts_with(p.as_str())
                && m.as_deref().is_none_or(|m| m.eq_ignore_ascii_case(method)) =>
            {
                *count -= 1;
                Some(*status)
            }
            _ => None,
        });
        self.gc();
        out
    }

    /// Consumes one edit armed for a config read of `vmid`: `(key, value)` to set.
    pub fn take_edit_after_read(&mut self, vmid: u32) -> Option<(String, String)> {
        let out = self.armed.iter_mut().find_map(|f| match f {
            Fault::EditAfterRead {
                vmid: v,
                key,
                value,
                count,
            } if *v == vmid && *count > 0 => {
                *count -= 1;
                Some((key.clone(), value.clone()))
            }
            _ => None,
        });
        self.gc();
        out
    }

    /// Consumes one armed hot-plug failure of `key` on `vmid`: its message.
    pub fn take_hotplug_error(&mut self, vmid: u32, key: &str) -> Option<String> {
        let out = self.armed.iter_mut().find_map(|f| match f {
            Fault::HotplugError {
                vmid: v,
                key: k,
                message,
                count,
            } if *count > 0 && k == key && v.is_none_or(|v| v == vmid) => {
                *count -= 1;
                Some(message.clone())
            }
            _ => None,
        });
        self.gc();
        out
    }

    /// Total latency to add for a request (consumes counted latency faults).
    pub fn take_latency(&mut self, path: &str) -> u64 {
        let mut total = 0;
        for f in &mut self.armed {
            if let Fault::Latency { path: p, ms, count } = f {
                let hit = p.as_deref().map(|p| path.starts_with(p)).unwrap_or(true);
                if hit {
                    total += *ms;
                    if *count == 1 {
                        *count = u32::MAX; // mark spent
                    } else if *count > 1 {
                        *count -= 1;
                    }
                }
            }
        }
        self.armed.retain(|f| {
            !matches!(
                f,
                Fault::Latency {
                    count: u32::MAX,
                    ..
                }
            )
        });
        total
    }

    fn gc(&mut self) {
        self.armed.retain(|f| {
            !matches!(
                f,
                Fault::FailTasks { count: 0, .. }
                    | Fault::HttpError { count: 0, .. }
                    | Fault::ProxyError { count: 0, .. }
                    | Fault::EditAfterRead { count: 0, .. }
                    | Fault::HotplugError { count: 0, .. }
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{Fault, Faults, Scenario};

    #[test]
    fn task_failures_are_counted() {
        let mut f = Faults::default();
        f.armed.push(Fault::FailTasks {
            kind: "qmclone".into(),
            vmid: None,
            count: 2,
            message: "boom".into(),
        });
        assert_eq!(f.take_task_failure("qmstart", Some(1)), None);
        assert_eq!(
            f.take_task_failure("qmclone", Some(1)).as_deref(),
            Some("boom")
        );
        assert_eq!(
            f.take_task_failure("qmclone", Some(2)).as_deref(),
            Some("boom")
        );
        assert_eq!(f.take_task_failure("qmclone", Some(3)), None);
        assert!(f.armed.is_empty());
    }

    #[test]
    fn scenario_yaml_parses() {
        let s = Scenario::from_yaml(
            "faults:\n  - fail_tasks: {type: qmstart, message: 'start failed: x'}\n  - http_error: {path: /cluster/nextid, status: 500, count: 2}\n  - node_offline: {node: pve3}\n",
        )
        .unwrap();
        assert_eq!(s.faults.len(), 3);
        let mut f = Faults {
            armed: s.faults.clone(),
        };
        assert_eq!(f.take_http_error("GET", "/cluster/nextid").unwrap().0, 500);
        assert!(f.take_http_error("GET", "/cluster/nextid").is_some());
        assert!(f.take_http_error("GET", "/cluster/nextid").is_none());
    }

    #[test]
    fn latency_count() {
        let mut f = Faults::default();
        f.armed.push(Fault::Latency {
            path: None,
            ms: 5,
            count: 1,
        });
        f.armed.push(Fault::Latency {
            path: Some("/nodes".into()),
            ms: 7,
            count: 0,
        });
        assert_eq!(f.take_latency("/nodes/x"), 12);
        assert_eq!(f.take_latency("/nodes/x"), 7);
        assert_eq!(f.take_latency("/version"), 0);
    }
}
