//! `proxshift.openshift.cluster_nodes`: day-2 work on a cluster's Nodes.
//!
//! - `approved`: approve the pending kubelet CSRs of exactly the named nodes (client CSRs from the
//!   bootstrap identity, serving CSRs from the node itself with only its own names and addresses;
//!   [`csr::decide`]); a CSR that claims one of them but fails a check fails the run, nothing approved.
//! - `ready`: wait until the named nodes are `Ready` (approving their CSRs meanwhile with
//!   `approve_csrs`).
//! - `drained`: cordon, then list and evict every pod but DaemonSet and mirror pods through the Eviction
//!   subresource, retrying while a PodDisruptionBudget refuses (429) until `drain_timeout`; then the
//!   node is uncordoned again and the result names the blocked pods and their budgets. On a node whose
//!   kubelet is unreachable, an evicted pod still `Terminating` `skip_wait_for_delete_timeout` seconds
//!   after its grace period is not waited for (`left_terminating`), as Cluster API's drain does.
//! - `absent`: `drained`, then delete the Node object.
//! - `cordoned` / `uncordoned`: mark the nodes unschedulable or schedulable again (`oc adm cordon` /
//!   `uncordon`), the first and last steps of OpenShift's graceful shutdown and restart.
//! - `shutdown_check`: read only; whether the cluster may stay down `shutdown_max_days` days before the
//!   kubelet CA expires ([`shutdown::judge`]), and which of the named nodes are not Ready now.
//! - `remediation_plan`: read only; which of the named nodes are unhealthy and what to do with each
//!   (reset, replace, or held back by `max_unhealthy`, etcd quorum, one control-plane node at a time),
//!   MachineHealthCheck semantics ([`remediation::plan`]). `playbooks/remediate.yaml` acts on it.

pub mod csr;
pub mod nodes;
pub mod pods;
pub mod remediation;
pub mod shutdown;

use std::collections::BTreeMap;
use std::time::Duration;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use kube_client::connect::cluster_opts;
use kube_client::ClusterOptions;
use nodes::{unix_now, NodesError, Run};
use serde::Deserialize;
use serde_json::{json, Value};

/// The module's options; the documentation stub `plugins/modules/cluster_nodes.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("state").required().choices(&[
            "approved",
            "ready",
            "drained",
            "absent",
            "remediation_plan",
            "cordoned",
            "uncordoned",
            "shutdown_check",
        ]),
        Opt::list("nodes", Type::Str).required(),
        Opt::dict("addresses").default(json!({})),
        Opt::bool("approve_csrs").default(false),
        Opt::str("bootstrap_username").default(csr::DEFAULT_BOOTSTRAP_USER),
        Opt::list("bootstrap_groups", Type::Str).default(json!([csr::DEFAULT_BOOTSTRAP_GROUP])),
        Opt::int("timeout").default(600),
        Opt::int("drain_timeout").default(300),
        Opt::int("skip_wait_for_delete_timeout").default(1),
        Opt::int("poll_interval").default(5),
        Opt::bool("allow_control_plane").default(false),
        Opt::int("unhealthy_timeout").default(300),
        Opt::int("node_startup_timeout").default(600),
        Opt::str("max_unhealthy").default("40%"),
        Opt::dict("vm_states").default(json!({})),
        Opt::dict("vm_uptimes").default(json!({})),
        Opt::bool("rejoin").default(false),
        Opt::dict("resets").default(json!({})),
        Opt::list("control_plane", Type::Str).default(json!([])),
        Opt::int("shutdown_max_days").default(30),
    ])
    .with(cluster_opts())
    .required_one_of(&["kubeconfig", "api_url"])
}

#[derive(Deserialize)]
struct Options {
    state: String,
    nodes: Vec<String>,
    addresses: BTreeMap<String, Value>,
    approve_csrs: bool,
    bootstrap_username: String,
    bootstrap_groups: Vec<String>,
    timeout: i64,
    drain_timeout: i64,
    skip_wait_for_delete_timeout: i64,
    poll_interval: i64,
    allow_control_plane: bool,
    unhealthy_timeout: i64,
    node_startup_timeout: i64,
    max_unhealthy: String,
    vm_states: BTreeMap<String, Value>,
    vm_uptimes: BTreeMap<String, Value>,
    rejoin: bool,
    resets: BTreeMap<String, Value>,
    control_plane: Vec<String>,
    shutdown_max_days: i64,
    #[serde(flatten)]
    cluster: ClusterOptions,
}

/// `addresses` as node → list of SANs, every key one of `nodes`.
fn expected(o: &Options) -> Result<csr::Expected, Failure> {
    if o.nodes.is_empty() || o.nodes.iter().any(|n| n.trim().is_empty()) {
        return Err(Failure::new(
            "nodes must list at least one node name, none of them empty",
        ));
    }
    let mut nodes: BTreeMap<String, Vec<String>> =
        o.nodes.iter().map(|n| (n.clone(), Vec::new())).collect();
    for (name, v) in &o.addresses {
        let Some(slot) = nodes.get_mut(name) else {
            return Err(Failure::new(format!(
                "addresses: {name} is not one of nodes ({})",
                o.nodes.join(", ")
            )));
        };
        let list: Option<Vec<String>> = match v {
            Value::String(s) => Some(vec![s.clone()]),
            Value::Array(a) => a.iter().map(|x| x.as_str().map(str::to_string)).collect(),
            _ => None,
        };
        *slot = list.ok_or_else(|| {
            Failure::new(format!(
                "addresses.{name} must be a list of IP addresses or host names"
            ))
        })?;
    }
    if o.bootstrap_username.trim().is_empty() {
        return Err(Failure::new("bootstrap_username must not be empty"));
    }
    let now = unix_now();
    let started = uptimes(o)?
        .into_iter()
        .map(|(n, up)| (n, now - up as i64))
        .collect();
    Ok(csr::Expected {
        nodes,
        bootstrap_user: o.bootstrap_username.clone(),
        bootstrap_groups: o.bootstrap_groups.clone(),
        started,
        rejoin: o.rejoin,
    })
}

/// `vm_uptimes` as node → seconds, every key one of `nodes`.
fn uptimes(o: &Options) -> Result<BTreeMap<String, u64>, Failure> {
    let mut out = BTreeMap::new();
    for (name, v) in &o.vm_uptimes {
        if !o.nodes.contains(name) {
            return Err(Failure::new(format!(
                "vm_uptimes: {name} is not one of nodes ({})",
                o.nodes.join(", ")
            )));
        }
        let up = v.as_u64().ok_or_else(|| {
            Failure::new(format!(
                "vm_uptimes.{name} must be the seconds since the node's VM started (vm_lifecycle's uptime)"
            ))
        })?;
        out.insert(name.clone(), up);
    }
    Ok(out)
}

fn seconds(name: &str, v: i64, min: i64) -> Result<Duration, Failure> {
    if v < min {
        return Err(Failure::new(format!(
            "{name} must be at least {min} (seconds)"
        )));
    }
    Ok(Duration::from_secs(v as u64))
}

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let exp = expected(&o)?;
    let timeout = seconds("timeout", o.timeout, 0)?;
    let drain_timeout = seconds("drain_timeout", o.drain_timeout, 0)?;
    let interval = seconds("poll_interval", o.poll_interval, 1)?;
    let skip_wait = seconds(
        "skip_wait_for_delete_timeout",
        o.skip_wait_for_delete_timeout,
        0,
    )?;
    if o.approve_csrs && o.state != "ready" {
        m.warn("approve_csrs has an effect only with state=ready (state=approved always approves)");
    }
    let client = kube_client::connect("cluster", &o.cluster.params())
        .map_err(|e| Failure::new(e.to_string()))?
        .into_client_for(m);
    let mut r = Run::new(client, m.check_mode, interval, exp);
    r.allow_control_plane = o.allow_control_plane;
    r.skip_wait_for_delete = skip_wait.as_secs();
    match o.state.as_str() {
        "remediation_plan" => return remediation_plan(&r, &o),
        "shutdown_check" => return shutdown_check(m, &r, &o),
        "cordoned" | "uncordoned" => return cordon(m, &r, &o),
        _ => {}
    }
    let result = match o.state.as_str() {
        "approved" => r.approve_pass().map(|_| Vec::new()),
        "ready" => r.wait_ready(&o.nodes, timeout, o.approve_csrs),
        _ => drain_or_remove(m, &mut r, &o, drain_timeout),
    };
    let approved = r.approved.clone();
    let unexpected: Vec<Value> = r.unexpected.values().cloned().collect();
    let skipped: Vec<Value> = r.skipped.values().cloned().collect();
    match result {
        Ok(nodes) => {
            let changed = !approved.is_empty() || nodes.iter().any(node_changed);
            Ok(Outcome::new(changed)
                .msg(summary(
                    &o.state,
                    &approved,
                    &nodes,
                    unexpected.len(),
                    m.check_mode,
                ))
                .with("approved", Value::Array(approved))
                .with("unexpected_csrs", Value::Array(unexpected))
                .with("skipped_csrs", Value::Array(skipped))
                .with("nodes", Value::Array(nodes)))
        }
        Err(e) => Err(failure(e, approved, unexpected).with("skipped_csrs", Value::Array(skipped))),
    }
}

/// `remediation_plan`: the nodes' health from the API, the VMs' power states and earlier resets from
/// the options, then [`remediation::plan`]. Reads only, so never `changed`.
fn remediation_plan(r: &Run, o: &Options) -> Result<Outcome, Failure> {
    use remediation::{plan, resets_ago, MaxUnhealthy, Timeouts};
    let max = MaxUnhealthy::parse(&o.max_unhealthy).map_err(|e| Failure::new(e.to_string()))?;
    let timeouts = Timeouts {
        unhealthy: seconds("unhealthy_timeout", o.unhealthy_timeout, 0)?.as_secs(),
        startup: seconds("node_startup_timeout", o.node_startup_timeout, 0)?.as_secs(),
    };
    let uptimes = uptimes(o)?;
    let mut resets = BTreeMap::new();
    for (name, v) in &o.resets {
        let t = v.as_i64().ok_or_else(|| {
            Failure::new(format!(
                "resets.{name} must be the Unix time (seconds) of the node's last reset"
            ))
        })?;
        resets.insert(name.clone(), t);
    }
    let now = unix_now();
    let ago = resets_ago(&resets, now);
    let mut health = r
        .health(&o.nodes, &o.control_plane, now)
        .map_err(|e| failure(e, Vec::new(), Vec::new()))?;
    for h in &mut health {
        h.vm_running = o
            .vm_states
            .get(&h.name)
            .and_then(Value::as_str)
            .map(|s| s == "running");
        h.reset_ago = ago.get(&h.name).copied();
        h.vm_uptime = uptimes.get(&h.name).copied();
    }
    let p = plan(&health, timeouts, max);
    let names = |a: remediation::Action| {
        p.actions()
            .filter(|(_, x)| *x == a)
            .map(|(n, _)| n.to_string())
            .collect::<Vec<String>>()
    };
    let (reset, replace) = (
        names(remediation::Action::Reset),
        names(remediation::Action::Replace),
    );
    let joining = if p.starting.is_empty() {
        String::new()
    } else {
        format!(
            "; still joining (node_startup_timeout {}s, left alone): {}",
            timeouts.startup,
            p.starting.join(", ")
        )
    };
    let msg = if p.unhealthy.is_empty() {
        format!(
            "{} of {} nodes healthy{joining}",
            o.nodes.len() - p.pending.len() - p.starting.len(),
            o.nodes.len()
        )
    } else {
        let mut s = format!("{} unhealthy", p.unhealthy.len());
        if !reset.is_empty() {
            s.push_str(&format!("; reset: {}", reset.join(", ")));
        }
        if !replace.is_empty() {
            s.push_str(&format!("; replace: {}", replace.join(", ")));
        }
        let held: Vec<String> = p
            .unhealthy
            .iter()
            .filter_map(|v| v.held.as_ref().map(|h| format!("{} held: {h}", v.name)))
            .collect();
        if let Some(sc) = &p.short_circuit {
            s.push_str(&format!("; {sc}"));
        } else if !held.is_empty() {
            s.push_str(&format!("; {}", held.join("; ")));
        }
        s.push_str(&joining);
        s
    };
    Ok(Outcome::new(false)
        .msg(msg)
        .with("reset", json!(reset))
        .with("replace", json!(replace))
        .with("unhealthy", json!(p.unhealthy))
        .with("pending", json!(p.pending))
        .with("starting", json!(p.starting))
        .with("short_circuit", json!(p.short_circuit)))
}

/// `shutdown_check`: the kubelet CA against `shutdown_max_days` ([`shutdown::judge`]) and the nodes'
/// Ready condition now (a node not Ready before a shutdown is not made Ready by a restart). Reads only.
fn shutdown_check(m: &mut Module, r: &Run, o: &Options) -> Result<Outcome, Failure> {
    let days = u64::try_from(o.shutdown_max_days)
        .map_err(|_| Failure::new("shutdown_max_days must be 0 or more (days)"))?;
    let secret = r
        .kubelet_signer()
        .map_err(|e| failure(e, Vec::new(), Vec::new()))?;
    let judged = shutdown::judge(secret.as_ref(), unix_now(), days);
    let health = r
        .health(&o.nodes, &[], unix_now())
        .map_err(|e| failure(e, Vec::new(), Vec::new()))?;
    let not_ready: Vec<String> = health
        .iter()
        .filter(|h| h.ready != remediation::Ready::True)
        .map(|h| h.name.clone())
        .collect();
    if !not_ready.is_empty() {
        m.warn(format!(
            "not Ready before the shutdown: {}; a restart does not make them Ready",
            not_ready.join(", ")
        ));
    }
    let msg = match &judged.refusal {
        Some(why) => format!("a shutdown of {days} days is refused: {why}"),
        None => format!(
            "the cluster may stay down {days} days: the kubelet CA expires at {} ({} days from now); restart it before then",
            judged.not_after.as_deref().unwrap_or_default(),
            judged.days_left.unwrap_or_default()
        ),
    };
    let mut out = Outcome::new(false)
        .msg(msg)
        .with("not_ready", json!(not_ready))
        .with("shutdown_max_days", json!(days));
    if let Value::Object(facts) = judged.to_json() {
        for (k, v) in facts {
            out = out.with(&k, v);
        }
    }
    Ok(out)
}

/// `cordoned` / `uncordoned`: every named node marked unschedulable or schedulable.
fn cordon(m: &mut Module, r: &Run, o: &Options) -> Result<Outcome, Failure> {
    let on = o.state == "cordoned";
    let nodes = r
        .set_schedulable_all(&o.nodes, on)
        .map_err(|e| failure(e, Vec::new(), Vec::new()))?;
    let changed: Vec<&str> = nodes
        .iter()
        .filter(|n| n["changed"] == json!(true))
        .filter_map(|n| n["name"].as_str())
        .collect();
    for n in &nodes {
        let header = format!("Node {}", n["name"].as_str().unwrap_or_default());
        m.add_diff(
            json!({"unschedulable": n["cordoned_before"]}),
            json!({"unschedulable": n["cordoned"]}),
            &header,
            &header,
        );
    }
    let verb = if on { "cordoned" } else { "uncordoned" };
    let would = if m.check_mode { "would be " } else { "" };
    let msg = if changed.is_empty() {
        format!("nothing to do: the nodes are {verb}")
    } else {
        format!("{} {would}{verb}", changed.join(", "))
    };
    Ok(Outcome::new(!changed.is_empty())
        .msg(msg)
        .with("nodes", Value::Array(nodes)))
}

/// Drain (and with `absent` delete) each node in turn; stop at the first that fails.
fn drain_or_remove(
    m: &mut Module,
    r: &mut Run,
    o: &Options,
    timeout: Duration,
) -> Result<Vec<Value>, NodesError> {
    let mut out = Vec::new();
    for name in &o.nodes {
        let report = if o.state == "absent" {
            match r.remove(name, timeout)? {
                Some(rep) => rep,
                None => json!({"name": name, "absent": true, "deleted": false}),
            }
        } else {
            r.drain(name, timeout)?
        };
        let header = format!("Node {name}");
        let evict = report.get("evict").cloned().unwrap_or(json!([]));
        let existed = report.get("absent").is_none();
        m.add_diff(
            json!({"exists": existed, "cordoned": existed && report["cordon"] == json!(false), "pods": evict}),
            json!({"exists": existed && report["deleted"] != json!(true), "cordoned": existed, "pods": []}),
            &header,
            &header,
        );
        out.push(report);
    }
    Ok(out)
}

fn node_changed(n: &Value) -> bool {
    n["cordon"] == json!(true)
        || n["deleted"] == json!(true)
        || n["evict"].as_array().is_some_and(|a| !a.is_empty())
}

fn summary(
    state: &str,
    approved: &[Value],
    nodes: &[Value],
    unexpected: usize,
    check: bool,
) -> String {
    let would = if check { "would be " } else { "" };
    let mut s = match state {
        "approved" | "ready" if !approved.is_empty() => {
            format!("{} CSRs {would}approved", approved.len())
        }
        "approved" => "no pending CSR of the named nodes".into(),
        _ => String::new(),
    };
    let part = |s: &mut String, t: String| {
        if !s.is_empty() {
            s.push_str("; ");
        }
        s.push_str(&t);
    };
    match state {
        "ready" if check => part(
            &mut s,
            format!(
                "{} of {} nodes Ready",
                nodes.iter().filter(|n| n["ready"] == json!(true)).count(),
                nodes.len()
            ),
        ),
        "ready" => part(&mut s, format!("{} nodes Ready", nodes.len())),
        "drained" | "absent" => {
            let changed: Vec<&str> = nodes
                .iter()
                .filter(|n| node_changed(n))
                .filter_map(|n| n["name"].as_str())
                .collect();
            let verb = if state == "absent" {
                "drained and deleted"
            } else {
                "drained"
            };
            part(
                &mut s,
                if changed.is_empty() {
                    format!(
                        "nothing to do: the nodes are {}",
                        if state == "absent" {
                            "absent"
                        } else {
                            "drained"
                        }
                    )
                } else {
                    format!("{} {would}{verb}", changed.join(", "))
                },
            )
        }
        _ => {}
    }
    if unexpected > 0 {
        part(&mut s, format!("{unexpected} pending CSRs are not for the named nodes and were left alone (unexpected_csrs)"));
    }
    s
}

fn failure(e: NodesError, approved: Vec<Value>, unexpected: Vec<Value>) -> Failure {
    let mut f = Failure::new(e.to_string())
        .changed(!approved.is_empty())
        .with("approved", Value::Array(approved))
        .with("unexpected_csrs", Value::Array(unexpected));
    match e {
        NodesError::Refused(list) => f = f.with("refused_csrs", json!(list)),
        NodesError::Blocked {
            blocked, evicted, ..
        } => {
            let changed = f.changed || !evicted.is_empty();
            f = f
                .changed(changed)
                .with("blocked", json!(blocked))
                .with("evicted", json!(evicted))
        }
        _ => {}
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(&argument_spec(), "openshift", "cluster_nodes");
    }

    fn opts(v: Value) -> Options {
        serde_json::from_value(v).expect("options")
    }

    fn base() -> Value {
        json!({"state": "approved", "nodes": ["w1", "w2"], "addresses": {}, "approve_csrs": false,
            "bootstrap_username": csr::DEFAULT_BOOTSTRAP_USER, "bootstrap_groups": [],
            "timeout": 1, "drain_timeout": 1, "skip_wait_for_delete_timeout": 300, "poll_interval": 1, "allow_control_plane": false,
            "unhealthy_timeout": 300, "node_startup_timeout": 600, "max_unhealthy": "40%", "vm_states": {}, "vm_uptimes": {}, "rejoin": false, "resets": {}, "control_plane": [], "shutdown_max_days": 30,
            "kubeconfig": null, "context": null, "api_url": "https://x", "api_key": null,
            "ca_cert": null, "validate_certs": true})
    }

    #[test]
    fn addresses_must_name_listed_nodes() {
        let mut v = base();
        v["addresses"] = json!({"w1": ["192.0.2.1"], "w2": "192.0.2.2"});
        let e = expected(&opts(v.clone())).expect("valid");
        assert_eq!(e.nodes["w2"], ["192.0.2.2"]);
        v["addresses"] = json!({"w3": ["192.0.2.3"]});
        let f = expected(&opts(v.clone())).expect_err("w3 is not a node");
        assert!(f.msg.starts_with("addresses: w3"), "{}", f.msg);
        v["addresses"] = json!({"w1": 5});
        assert!(expected(&opts(v))
            .expect_err("bad")
            .msg
            .contains("addresses.w1"));
    }

    #[test]
    fn empty_node_names_are_refused() {
        let mut v = base();
        v["nodes"] = json!(["w1", " "]);
        assert!(expected(&opts(v))
            .expect_err("bad")
            .msg
            .starts_with("nodes "));
    }
}
