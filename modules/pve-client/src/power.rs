//! Power, live status, guest agent and HA reads for `vm_lifecycle` (§7.4 of the API notes).
//!
//! - [`Client::power_status`] → [`PowerStatus`]: `status/current` typed, with `qmpstatus` (a paused
//!   VM says `status: running`, `qmpstatus: paused`), `lock`, `uptime`, `ha` and `agent`, tolerant of
//!   `0`/`1` booleans and numeric strings.
//! - [`Client::power`]`(node, vmid, &PowerAction, timeout)`: `POST status/<action>` with the right
//!   parameters, then the task wait of [`Client::run_task`].
//! - [`Client::agent_interfaces`] → [`GuestInterface`]s from `agent/network-get-interfaces`;
//!   [`is_agent_unavailable`] tells "agent not (yet) there" from real failures.
//! - [`Client::ha_resource`]: the HA resource of a VM (`/cluster/ha/resources/vm:<vmid>`), if any.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::api::{lenient_bool, lenient_u64};
use crate::client::{Client, Params};
use crate::error::Error;
use crate::task::TaskOutcome;

/// `GET /nodes/{node}/qemu/{vmid}/status/current`, the fields that describe power and health.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
pub struct PowerStatus {
    #[serde(deserialize_with = "lenient_u64", default)]
    pub vmid: u64,
    #[serde(default)]
    pub name: Option<String>,
    /// `running` or `stopped` (the QEMU process exists or not).
    pub status: String,
    /// What the guest CPUs do: `running`, `paused`, `suspended`, `prelaunch`, … (absent when stopped
    /// on some versions).
    #[serde(default)]
    pub qmpstatus: Option<String>,
    #[serde(default)]
    pub lock: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub uptime: u64,
    /// The guest agent is enabled in the config (not: answering).
    #[serde(default, deserialize_with = "lenient_bool")]
    pub agent: bool,
    #[serde(default)]
    pub ha: HaStatus,
    #[serde(default)]
    pub tags: Option<String>,
}

/// `status/current.ha`: `{"managed":0}` or `{"managed":1,"state":"started",…}`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
pub struct HaStatus {
    #[serde(default, deserialize_with = "lenient_bool")]
    pub managed: bool,
    /// The HA manager's requested state (`started`, `stopped`, `disabled`, `ignored`).
    #[serde(default)]
    pub state: Option<String>,
}

/// One power request. Timeouts are the guest's (ACPI) allowance, passed to Proxmox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PowerAction {
    Start,
    /// Hard stop.
    Stop,
    /// ACPI shutdown; `force_stop` makes Proxmox kill the VM when `timeout` passes.
    Shutdown {
        timeout: Duration,
        force_stop: bool,
    },
    Reboot {
        timeout: Duration,
    },
    Reset,
    /// Pause the guest in RAM (`qmpause`).
    Suspend,
    Resume,
}

impl PowerAction {
    pub fn endpoint(&self) -> &'static str {
        match self {
            PowerAction::Start => "start",
            PowerAction::Stop => "stop",
            PowerAction::Shutdown { .. } => "shutdown",
            PowerAction::Reboot { .. } => "reboot",
            PowerAction::Reset => "reset",
            PowerAction::Suspend => "suspend",
            PowerAction::Resume => "resume",
        }
    }

    /// The form parameters Proxmox expects for this action.
    pub fn params(&self) -> Params {
        match self {
            PowerAction::Shutdown {
                timeout,
                force_stop,
            } => Params::new()
                .set("timeout", timeout.as_secs())
                .flag("forceStop", *force_stop),
            PowerAction::Reboot { timeout } => Params::new().set("timeout", timeout.as_secs()),
            _ => Params::new(),
        }
    }
}

/// One guest network interface as the QEMU guest agent reports it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct GuestInterface {
    pub name: String,
    #[serde(rename = "hardware-address", default)]
    pub mac: Option<String>,
    #[serde(rename = "ip-addresses", default)]
    pub addresses: Vec<GuestAddress>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct GuestAddress {
    #[serde(rename = "ip-address")]
    pub ip: String,
    /// `ipv4` or `ipv6`.
    #[serde(rename = "ip-address-type", default)]
    pub family: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub prefix: u64,
}

/// Parse `agent/network-get-interfaces`' data: `{"result": [...]}`.
pub fn parse_interfaces(data: &Value) -> Result<Vec<GuestInterface>, Error> {
    let list = data.get("result").unwrap_or(data);
    serde_json::from_value(list.clone()).map_err(|e| {
        Error::invalid(format!(
            "unexpected answer from agent/network-get-interfaces: {e}"
        ))
    })
}

/// The agent cannot answer (yet): not configured, VM not running, agent not started, or its ping
/// timed out. Waiting may help; these are not failures of the request itself.
pub fn is_agent_unavailable(e: &Error) -> bool {
    let t = e.server_text();
    matches!(e, Error::Api(a) if a.status == 500)
        && [
            "guest agent is not running",
            "No QEMU guest agent configured",
            "not running",
            "got timeout",
        ]
        .iter()
        .any(|p| t.contains(p))
}

/// `/cluster/ha/resources/{sid}`: the HA resource behind a VM (the HA configuration's type).
pub use crate::ha::HaResource;

fn status_path(node: &str, vmid: u32) -> String {
    format!("/nodes/{node}/qemu/{vmid}")
}

impl Client {
    /// The VM's live status, typed.
    pub fn power_status(&self, node: &str, vmid: u32) -> Result<PowerStatus, Error> {
        let v = self.vm_status(node, vmid)?;
        serde_json::from_value(v).map_err(|e| {
            Error::invalid(format!(
                "unexpected answer from {}/status/current: {e}",
                status_path(node, vmid)
            ))
        })
    }

    /// Send a power request and wait up to `timeout` for its task (HA-managed VMs get a quick
    /// `hastart`/`hastop` task; the power change itself follows later — poll [`Self::power_status`]).
    pub fn power(
        &self,
        node: &str,
        vmid: u32,
        action: &PowerAction,
        timeout: Duration,
    ) -> Result<Option<TaskOutcome>, Error> {
        self.vm_action(node, vmid, action.endpoint(), &action.params(), timeout)
    }

    /// The guest's interfaces and addresses from the QEMU guest agent.
    pub fn agent_interfaces(&self, node: &str, vmid: u32) -> Result<Vec<GuestInterface>, Error> {
        let v = self.get(
            &format!("{}/agent/network-get-interfaces", status_path(node, vmid)),
            &Params::new(),
        )?;
        parse_interfaces(&v)
    }

    /// The HA resource `vm:<vmid>`, or `None` when the VM is not HA-managed.
    pub fn ha_resource(&self, vmid: u32) -> Result<Option<HaResource>, Error> {
        match self.get_as::<HaResource>(&format!("/cluster/ha/resources/vm:{vmid}"), &Params::new())
        {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.is_not_found() || e.server_text().contains("no such resource") => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_current_with_real_server_quirks() {
        // Shape of a PVE 9 answer: numbers as strings, 0/1 booleans, unknown keys.
        let s: PowerStatus = serde_json::from_value(json!({
            "vmid": "101", "name": "master-0", "status": "running", "qmpstatus": "paused",
            "uptime": 4711, "agent": 1, "ha": {"managed": 1, "state": "started", "group": "g"},
            "lock": "backup", "blockstat": {}, "ballooninfo": {}, "cpus": 4, "tags": "ocp;proxshift"
        }))
        .unwrap();
        assert_eq!(s.vmid, 101);
        assert_eq!(s.qmpstatus.as_deref(), Some("paused"));
        assert!(s.agent && s.ha.managed);
        assert_eq!(s.ha.state.as_deref(), Some("started"));
        assert_eq!(s.lock.as_deref(), Some("backup"));
        assert_eq!(s.uptime, 4711);

        let s: PowerStatus = serde_json::from_value(json!({
            "vmid": 102, "status": "stopped", "ha": {"managed": 0}, "agent": "0"
        }))
        .unwrap();
        assert_eq!(s.qmpstatus, None);
        assert!(!s.agent && !s.ha.managed);
        let s: PowerStatus = serde_json::from_value(json!({"status": "stopped"})).unwrap();
        assert_eq!(s.ha, HaStatus::default());
    }

    #[test]
    fn action_parameters() {
        let p = PowerAction::Shutdown {
            timeout: Duration::from_secs(90),
            force_stop: true,
        }
        .params();
        assert_eq!(p.get("timeout"), Some("90"));
        assert_eq!(p.get("forceStop"), Some("1"));
        let p = PowerAction::Shutdown {
            timeout: Duration::from_secs(5),
            force_stop: false,
        }
        .params();
        assert_eq!(p.get("forceStop"), Some("0"));
        assert!(PowerAction::Start.params().is_empty());
        assert_eq!(PowerAction::Suspend.endpoint(), "suspend");
        assert_eq!(
            PowerAction::Reboot {
                timeout: Duration::from_secs(7)
            }
            .params()
            .get("timeout"),
            Some("7")
        );
    }

    #[test]
    fn agent_interfaces_parse() {
        let v = json!({"result": [
            {"name": "lo", "hardware-address": "00:00:00:00:00:00",
             "ip-addresses": [{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}]},
            {"name": "ens18", "hardware-address": "bc:24:11:00:00:01",
             "ip-addresses": [{"ip-address": "10.0.0.5", "ip-address-type": "ipv4", "prefix": 24},
                              {"ip-address": "fe80::be24:11ff:fe00:1", "ip-address-type": "ipv6", "prefix": 64}],
             "statistics": {"rx-bytes": 1}},
            {"name": "ens19"}
        ]});
        let ifs = parse_interfaces(&v).unwrap();
        assert_eq!(ifs.len(), 3);
        assert_eq!(ifs[1].addresses[0].ip, "10.0.0.5");
        assert_eq!(ifs[1].mac.as_deref(), Some("bc:24:11:00:00:01"));
        assert!(ifs[2].addresses.is_empty());
        assert!(parse_interfaces(&json!({"result": "x"})).is_err());
    }

    #[test]
    fn agent_unavailability_is_recognised() {
        let api = |status: u16, m: &str| {
            Error::Api(crate::error::ErrorResponse {
                method: "GET".into(),
                path: "/nodes/pve1/qemu/101/agent/network-get-interfaces".into(),
                status,
                message: m.into(),
                errors: Default::default(),
            })
        };
        assert!(is_agent_unavailable(&api(
            500,
            "QEMU guest agent is not running"
        )));
        assert!(is_agent_unavailable(&api(
            500,
            "No QEMU guest agent configured"
        )));
        assert!(is_agent_unavailable(&api(500, "VM 101 is not running")));
        assert!(is_agent_unavailable(&api(
            500,
            "qmp command 'guest-ping' failed - got timeout"
        )));
        assert!(!is_agent_unavailable(&api(403, "Permission check failed")));
        assert!(!is_agent_unavailable(&api(500, "something else")));
    }
}
