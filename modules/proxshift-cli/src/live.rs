//! Live VM states for `proxshift clusters`. The lookup sits behind [`VmSource`] so the table logic is
//! tested without a server; [`PveSource`] is the real one, over the shared `pve-client` crate.

use pve_client::{Client, ConnectionOptions};
use serde::Serialize;

use crate::inventory::{Cluster, LiveState, ProxmoxSettings};

/// Why live states or the live layout could not be read; the client's error is kept as the cause
/// (boxed: it is large, and these errors are rare).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Neither the inventory nor the environment names a Proxmox host.
    #[error("no Proxmox host (proxmox_api_host in the inventory or PROXMOX_HOST)")]
    NoHost,
    /// The settings do not make a usable login (no token secret, no password, …).
    #[error(transparent)]
    Settings(Box<pve_client::Error>),
    /// The client could not be set up (URL, TLS, CA file).
    #[error(transparent)]
    Connect(Box<pve_client::Error>),
    /// A read failed.
    #[error("GET {path}: {source}")]
    Get {
        path: String,
        source: Box<pve_client::Error>,
    },
    /// The VM list could not be read.
    #[error(transparent)]
    Vms(Box<pve_client::Error>),
}

/// One VM as the table needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveVm {
    pub vmid: u64,
    pub name: Option<String>,
    pub node: String,
    pub status: Option<String>,
    pub tags: Vec<String>,
}

/// Where live VM states come from.
pub trait VmSource {
    /// Every QEMU VM of the Proxmox cluster.
    fn vms(&self) -> Result<Vec<LiveVm>, LiveError>;
    /// Where from, for messages (`https://pve1:8006`).
    fn describe(&self) -> String;
}

/// The real source: `GET /cluster/resources?type=vm` through `pve-client`.
pub struct PveSource {
    client: Client,
}

impl PveSource {
    pub fn new(opts: &ConnectionOptions) -> Result<Self, LiveError> {
        // A table is not worth retrying for: one attempt, then say why.
        Client::connect(opts)
            .map(|client| PveSource {
                client: client.with_backoff(pve_client::Backoff::none()),
            })
            .map_err(|e| LiveError::Connect(Box::new(e)))
    }
}

impl VmSource for PveSource {
    fn vms(&self) -> Result<Vec<LiveVm>, LiveError> {
        let vms = self
            .client
            .cluster_vms()
            .map_err(|e| LiveError::Vms(Box::new(e)))?;
        Ok(vms
            .into_iter()
            .filter(|v| !v.template)
            .map(|v| LiveVm {
                tags: v.tag_list(),
                vmid: v.vmid,
                name: v.name,
                node: v.node,
                status: v.status,
            })
            .collect())
    }

    fn describe(&self) -> String {
        self.client.base_url().to_string()
    }
}

/// The live cluster's layout for a rehearsal, read with GET requests only (token auth sends nothing
/// else; password auth adds the login `POST /access/ticket`, which changes nothing): the version,
/// nodes, each online node's storages, and every QEMU VM with its config. Returns where it was read
/// from and the layout in `proxmox_layout` form.
pub fn read_layout(opts: &ConnectionOptions) -> Result<(String, serde_json::Value), LiveError> {
    use pve_client::Params;
    use serde_json::Value;
    let client = Client::connect(opts)
        .map_err(|e| LiveError::Connect(Box::new(e)))?
        .with_backoff(pve_client::Backoff::none());
    let get = |path: &str, q: Params| {
        client.get(path, &q).map_err(|e| LiveError::Get {
            path: path.to_string(),
            source: Box::new(e),
        })
    };
    let version = get("/version", Params::new())?;
    let mut nodes = Vec::new();
    for n in get("/nodes", Params::new())?
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = n["node"].as_str().unwrap_or_default();
        let storages = if n["status"].as_str() == Some("online") {
            get(&format!("/nodes/{name}/storage"), Params::new())?
                .as_array()
                .cloned()
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        nodes.push((n.clone(), storages));
    }
    let mut vms = Vec::new();
    for r in get("/cluster/resources", Params::new().set("type", "vm"))?
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"].as_str() == Some("qemu"))
    {
        let path = format!(
            "/nodes/{}/qemu/{}/config",
            r["node"].as_str().unwrap_or_default(),
            r["vmid"]
        );
        // A VM on an offline node still holds its VMID and name; its config is unknown.
        let config = get(&path, Params::new()).unwrap_or(Value::Null);
        vms.push((r.clone(), config));
    }
    Ok((
        client.base_url().to_string(),
        crate::rehearse::seed::layout_from_api(&version, &nodes, &vms),
    ))
}

/// Whether live states were looked up, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveReport {
    /// `ok`, `disabled` (no settings or `--no-live`) or `error`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl LiveReport {
    pub fn disabled(why: impl Into<String>) -> Self {
        LiveReport {
            status: "disabled".into(),
            source: None,
            message: Some(why.into()),
        }
    }
}

/// Connection options from the inventory's site settings, with the modules' environment fallbacks
/// (PROXMOX_HOST, PROXMOX_USER, PROXMOX_PASSWORD, PROXMOX_TOKEN_ID, PROXMOX_TOKEN_SECRET,
/// PROXMOX_VALIDATE_CERTS) for what the inventory leaves out — the same precedence the playbook's
/// module calls have. `Err` says what is missing.
pub fn connection(
    site: &ProxmoxSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ConnectionOptions, LiveError> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let host = site
        .host
        .clone()
        .or_else(|| env("PROXMOX_HOST"))
        .ok_or(LiveError::NoHost)?;
    let mut o = ConnectionOptions::new(host);
    if let Some(p) = site.port {
        o.api_port = p;
    }
    o.api_user = site.user.clone().or_else(|| env("PROXMOX_USER"));
    o.api_password = site.password.clone().or_else(|| env("PROXMOX_PASSWORD"));
    o.api_token_id = site.token_id.clone().or_else(|| env("PROXMOX_TOKEN_ID"));
    o.api_token_secret = site
        .token_secret
        .clone()
        .or_else(|| env("PROXMOX_TOKEN_SECRET"));
    o.validate_certs = site
        .validate_certs
        .or_else(|| {
            env("PROXMOX_VALIDATE_CERTS").map(|v| {
                !matches!(
                    v.to_ascii_lowercase().as_str(),
                    "0" | "false" | "no" | "off"
                )
            })
        })
        .unwrap_or(true);
    o.ca_path = site.ca_path.clone().map(Into::into);
    // A table should not hang on an unreachable host.
    o.api_timeout = 10;
    o.auth().map_err(|e| LiveError::Settings(Box::new(e)))?;
    Ok(o)
}

/// Attach each host's VM state: the VM named like the host, preferring the one with the cluster's
/// ownership tag (and the inventory's VMID when given).
pub fn attach(clusters: &mut [Cluster], vms: &[LiveVm]) {
    for c in clusters.iter_mut() {
        let tag = c.tag();
        for h in c.hosts.iter_mut() {
            let mut same_name: Vec<&LiveVm> = vms
                .iter()
                .filter(|v| v.name.as_deref() == Some(h.name.as_str()))
                .collect();
            same_name.sort_by_key(|v| {
                (
                    !v.tags.contains(&tag),
                    h.vmid.is_some_and(|id| id != v.vmid),
                    v.vmid,
                )
            });
            h.live = Some(match same_name.first() {
                Some(v) => LiveState {
                    state: v.status.clone().unwrap_or_else(|| "unknown".into()),
                    vmid: Some(v.vmid),
                    node: Some(v.node.clone()),
                    owned: v.tags.contains(&tag),
                },
                None => LiveState {
                    state: "absent".into(),
                    vmid: None,
                    node: None,
                    owned: false,
                },
            });
        }
    }
}

/// One cell per cluster: `3 running`, `2 running, 1 stopped`, `absent`, with `(n not owned)`.
pub fn cluster_summary(c: &Cluster) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut unowned = 0;
    for h in &c.hosts {
        let live = h.live.as_ref()?;
        if live.state != "absent" && !live.owned {
            unowned += 1;
        }
        match counts.iter_mut().find(|(s, _)| *s == live.state) {
            Some((_, n)) => *n += 1,
            None => counts.push((live.state.clone(), 1)),
        }
    }
    if counts.is_empty() {
        return Some("-".into());
    }
    let mut s = if counts.len() == 1 && counts[0].0 == "absent" {
        "absent".to_string()
    } else {
        counts
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if unowned > 0 {
        s.push_str(&format!(" ({unowned} not owned)"));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory;

    fn vm(vmid: u64, name: &str, node: &str, status: &str, tags: &[&str]) -> LiveVm {
        LiveVm {
            vmid,
            name: Some(name.into()),
            node: node.into(),
            status: Some(status.into()),
            tags: tags.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A fake source, as the trait allows.
    struct Fixed(Vec<LiveVm>);
    impl VmSource for Fixed {
        fn vms(&self) -> Result<Vec<LiveVm>, LiveError> {
            Ok(self.0.clone())
        }
        fn describe(&self) -> String {
            "fixed".into()
        }
    }

    #[test]
    fn states_are_matched_by_name_and_ownership() {
        let mut inv = inventory::parse(&inventory::tests::example()).unwrap();
        let src = Fixed(vec![
            vm(3100, "lab-sno-0", "pve1", "running", &["proxshift-lab-sno"]),
            // Same name, not ours: must not win over the owned one.
            vm(200, "lab-sno-0", "pve2", "stopped", &[]),
            vm(
                3001,
                "prod-ha-master-0",
                "pve2",
                "stopped",
                &["proxshift-prod-ha"],
            ),
            vm(
                3002,
                "prod-ha-master-1",
                "pve3",
                "running",
                &["proxshift-prod-ha"],
            ),
            vm(77, "prod-ha-master-2", "pve3", "running", &["someone-else"]),
        ]);
        attach(&mut inv.clusters, &src.vms().unwrap());
        let sno = inv.cluster("lab-sno").unwrap();
        let l = sno.hosts[0].live.as_ref().unwrap();
        assert_eq!(
            (l.state.as_str(), l.vmid, l.owned),
            ("running", Some(3100), true)
        );
        assert_eq!(l.node.as_deref(), Some("pve1"));
        assert_eq!(cluster_summary(sno).unwrap(), "1 running");
        let ha = inv.cluster("prod-ha").unwrap();
        assert_eq!(
            cluster_summary(ha).unwrap(),
            "1 stopped, 2 running, 1 absent (1 not owned)"
        );
        let compact = inv.cluster("lab-compact").unwrap();
        assert_eq!(cluster_summary(compact).unwrap(), "absent");
    }

    #[test]
    fn no_live_lookup_no_summary() {
        let inv = inventory::parse(&inventory::tests::example()).unwrap();
        assert_eq!(cluster_summary(inv.cluster("lab-sno").unwrap()), None);
    }

    #[test]
    fn connection_from_inventory_then_environment() {
        let site = ProxmoxSettings {
            host: Some("pve1.lab".into()),
            port: Some(8006),
            user: Some("proxshift@pve".into()),
            token_id: Some("ansible".into()),
            ..Default::default()
        };
        let none = |_: &str| None;
        let e = connection(&site, &none).unwrap_err();
        assert!(matches!(e, LiveError::Settings(_)), "{e:?}");
        assert!(e.to_string().contains("api_token_secret"), "{e}");
        let env = |k: &str| match k {
            "PROXMOX_TOKEN_SECRET" => Some("canary-secret".to_string()),
            "PROXMOX_HOST" => Some("ignored.example".to_string()),
            "PROXMOX_VALIDATE_CERTS" => Some("false".to_string()),
            _ => None,
        };
        let o = connection(&site, &env).unwrap();
        // The inventory's host wins: the table shows the Proxmox the playbook will use.
        assert_eq!(o.base_url().unwrap(), "https://pve1.lab:8006");
        assert_eq!(o.api_token_secret.as_deref(), Some("canary-secret"));
        assert!(!o.validate_certs);
        let e = connection(&ProxmoxSettings::default(), &none).unwrap_err();
        assert!(matches!(e, LiveError::NoHost), "{e:?}");
        assert!(e.to_string().contains("PROXMOX_HOST"), "{e}");
        let o = connection(&ProxmoxSettings::default(), &|k: &str| match k {
            "PROXMOX_HOST" => Some("http://127.0.0.1:9".into()),
            "PROXMOX_TOKEN_ID" => Some("root@pam!t".into()),
            "PROXMOX_TOKEN_SECRET" => Some("s".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(o.base_url().unwrap(), "http://127.0.0.1:9");
        assert!(o.validate_certs);
    }
}
