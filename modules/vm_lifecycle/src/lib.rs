//! `proxshift.proxmox.vm_lifecycle`: power, readiness and health of a cluster's Proxmox VE VMs.
//!
//! The pieces: [`target`] finds the VMs and splits them into ordered steps, [`decide`] is the per-VM
//! state machine, [`engine`] carries the plan out against a [`engine::Backend`] (Proxmox through
//! `pve_client` in [`pve`], a scripted fake in unit tests).

use std::time::Duration;

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome, Type};
use serde::Deserialize;
use serde_json::{json, Value};

pub mod backend;
pub mod decide;
pub mod engine;
#[cfg(test)]
mod fake;
pub mod model;
pub mod pve;
pub mod report;
pub mod target;

use decide::Rules;
use engine::{Backend, Engine, Settings, VmReport};
use model::{State, WaitFor};
use pve_types::propstring::valid_tag;
use target::{join, Ref, Selector, TargetError};

/// One option value the argument spec cannot check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("{what} must be between 100 and 999999999, got {got}")]
    Vmid { what: String, got: i64 },
    #[error("{name} must be 0 or more seconds, got {got}")]
    Seconds { name: &'static str, got: i64 },
    #[error("vms must name at least one VM")]
    NoVms,
    #[error("tags must name at least one tag")]
    NoTags,
    #[error("tags: '{0}' is not a valid Proxmox tag")]
    Tag(String),
    #[error("remediate applies to state: status only (state is {0})")]
    RemediateNeedsStatus(&'static str),
    #[error("parallel must be 1 or more, got {0}")]
    Parallel(i64),
    #[error("owner_tag '{0}' is not a valid Proxmox tag")]
    OwnerTag(String),
}

/// Every option problem of a task, reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", join(.0))]
pub struct InvalidOptions(pub Vec<OptionError>);

/// The module's options; the documentation stub `plugins/modules/vm_lifecycle.py` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::str("state").required().choices(&[
            "started",
            "stopped",
            "restarted",
            "reset",
            "paused",
            "resumed",
            "status",
        ]),
        Opt::int("vmid"),
        Opt::str("name"),
        Opt::list("vms", Type::Raw),
        Opt::list("tags", Type::Str),
        Opt::list("order", Type::Raw),
        Opt::int("parallel").default(4),
        Opt::int("timeout").default(120),
        Opt::bool("force").default(false),
        Opt::str("wait_for")
            .default("running")
            .choices(&["running", "agent", "ip"]),
        Opt::int("wait_timeout").default(600),
        Opt::int("task_timeout").default(300),
        Opt::bool("remediate").default(false),
        Opt::str("owner_tag").default("proxshift"),
        Opt::bool("ignore_unreachable").default(false),
    ])
    .with(pve_client::connection_options())
    .mutually_exclusive(&["vmid", "vms", "tags"])
    .mutually_exclusive(&["name", "vms", "tags"])
    .required_one_of(&["vmid", "name", "vms", "tags"])
}

/// Typed options (connection options are read by the client separately).
#[derive(Debug, Deserialize)]
pub struct Options {
    pub state: State,
    pub vmid: Option<i64>,
    pub name: Option<String>,
    pub vms: Option<Vec<Value>>,
    pub tags: Option<Vec<String>>,
    pub order: Option<Vec<Value>>,
    pub parallel: i64,
    pub timeout: i64,
    pub force: bool,
    pub wait_for: WaitFor,
    pub wait_timeout: i64,
    pub task_timeout: i64,
    pub remediate: bool,
    pub owner_tag: String,
    pub ignore_unreachable: bool,
}

fn seconds(v: i64, name: &'static str) -> Result<Duration, OptionError> {
    u64::try_from(v)
        .map(Duration::from_secs)
        .map_err(|_| OptionError::Seconds { name, got: v })
}

fn vmid(v: i64, what: &str) -> Result<u32, OptionError> {
    match u32::try_from(v) {
        Ok(id) if (100..=999_999_999).contains(&id) => Ok(id),
        _ => Err(OptionError::Vmid {
            what: what.to_string(),
            got: v,
        }),
    }
}

impl Options {
    /// Check what the spec cannot express and turn the options into a selector and settings.
    pub fn plan(&self, check_mode: bool) -> Result<(Selector, Settings), InvalidOptions> {
        let mut errors = Vec::new();
        let selector = if let Some(vms) = &self.vms {
            let mut refs = Vec::new();
            if vms.is_empty() {
                errors.push(OptionError::NoVms);
            }
            for (i, v) in vms.iter().enumerate() {
                match Ref::parse(v, &format!("vms[{i}]")) {
                    Ok(Ref::Id(id)) => match vmid(id.into(), &format!("vms[{i}]")) {
                        Ok(id) => refs.push(Ref::Id(id)),
                        Err(e) => errors.push(e),
                    },
                    Ok(r) => refs.push(r),
                    Err(e) => errors.push(e.into()),
                }
            }
            Selector::List(refs)
        } else if let Some(tags) = &self.tags {
            if tags.is_empty() {
                errors.push(OptionError::NoTags);
            }
            for t in tags.iter().filter(|t| !valid_tag(t.trim())) {
                errors.push(OptionError::Tag(t.clone()));
            }
            Selector::Tags(tags.iter().map(|t| t.trim().to_ascii_lowercase()).collect())
        } else {
            let id = match self.vmid.map(|v| vmid(v, "vmid")).transpose() {
                Ok(v) => v,
                Err(e) => {
                    errors.push(e);
                    None
                }
            };
            Selector::One {
                vmid: id,
                name: self.name.clone(),
            }
        };
        if self.remediate && self.state != State::Status {
            errors.push(OptionError::RemediateNeedsStatus(self.state.as_str()));
        }
        if self.parallel < 1 {
            errors.push(OptionError::Parallel(self.parallel));
        }
        if !valid_tag(self.owner_tag.trim()) {
            errors.push(OptionError::OwnerTag(self.owner_tag.clone()));
        }
        let mut secs = |v: i64, n: &'static str| {
            seconds(v, n).unwrap_or_else(|e| {
                errors.push(e);
                Duration::ZERO
            })
        };
        let timeout = secs(self.timeout, "timeout");
        let wait_timeout = secs(self.wait_timeout, "wait_timeout");
        let task_timeout = secs(self.task_timeout, "task_timeout");
        if !errors.is_empty() {
            return Err(InvalidOptions(errors));
        }
        Ok((
            selector,
            Settings {
                state: self.state,
                rules: Rules {
                    timeout,
                    force: self.force,
                    remediate: self.remediate,
                },
                wait_for: self.wait_for,
                wait_timeout,
                task_timeout,
                parallel: usize::try_from(self.parallel).unwrap_or(1),
                check_mode,
                owner_tag: self.owner_tag.trim().to_ascii_lowercase(),
                poll: Duration::from_millis(500),
            },
        ))
    }
}

/// The whole module against any backend: resolve, plan, run, report.
pub fn execute<B: Backend>(
    m: &mut Module,
    o: &Options,
    backend: &B,
    poll: Option<Duration>,
) -> Result<Outcome, Failure> {
    let (selector, mut settings) = o
        .plan(m.check_mode)
        .map_err(|e| Failure::new(e.to_string()))?;
    if let Some(p) = poll {
        settings.poll = p;
    }
    let inventory = backend
        .inventory()
        .map_err(|e| Failure::new(format!("cannot list the cluster's VMs: {e}")))?;
    let targets =
        target::resolve(&inventory, &selector).map_err(|e| Failure::new(e.to_string()))?;
    let steps = target::plan_steps(&targets, o.order.as_deref().unwrap_or_default())
        .map_err(|e| Failure::new(e.to_string()))?;
    if targets.is_empty() {
        let tags = o.tags.clone().unwrap_or_default().join(", ");
        m.warn(format!(
            "no VM carries all of the tags [{tags}]; nothing to do"
        ));
    }
    let state = settings.state;
    let ignore_unreachable = o.ignore_unreachable;
    let reports = Engine { backend, settings }.run(&targets, &steps);
    finish(m, state, ignore_unreachable, reports)
}

/// Turn the per-VM reports into the module result: totals, diff, and failure when a VM failed.
fn finish(
    m: &mut Module,
    state: State,
    ignore_unreachable: bool,
    reports: Vec<VmReport>,
) -> Result<Outcome, Failure> {
    let totals = engine::totals(&reports);
    let changed = reports.iter().any(|r| r.changed);
    if changed {
        let (before, after) = engine::power_diff(&reports);
        m.add_diff(before, after, "power state before", "power state after");
    }
    let blocking: Vec<&VmReport> = reports
        .iter()
        .filter(|r| r.failed && !(r.unreachable && ignore_unreachable))
        .collect();
    for r in reports
        .iter()
        .filter(|r| r.unreachable && ignore_unreachable)
    {
        m.warn(format!("{} (ignored: ignore_unreachable)", r.msg));
    }
    let vms = serde_json::to_value(&reports).unwrap_or(Value::Null);
    let totals = serde_json::to_value(&totals).unwrap_or(Value::Null);
    if !blocking.is_empty() {
        let msg = format!(
            "{} of {} VMs failed: {}",
            blocking.len(),
            reports.len(),
            blocking
                .iter()
                .map(|r| r.msg.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
        return Err(Failure::new(msg)
            .changed(changed)
            .with("vms", vms)
            .with("totals", totals)
            .with("state", state.as_str()));
    }
    let verb = if m.check_mode {
        "would change"
    } else {
        "changed"
    };
    let msg = match state {
        State::Status if !changed => {
            let t = engine::totals(&reports);
            format!(
                "{} VMs: {} running, {} paused, {} stopped{}",
                t.vms,
                t.running,
                t.paused,
                t.stopped,
                if t.unreachable > 0 {
                    format!(", {} unreachable", t.unreachable)
                } else {
                    String::new()
                }
            )
        }
        _ => format!(
            "{} VMs: {} {verb}, {} already {}",
            reports.len(),
            reports.iter().filter(|r| r.changed).count(),
            reports.iter().filter(|r| !r.changed && !r.failed).count(),
            if state == State::Status {
                "as expected".to_string()
            } else {
                state.as_str().to_string()
            }
        ),
    };
    Ok(Outcome::new(changed)
        .msg(msg)
        .with("vms", vms)
        .with("totals", totals)
        .with("state", json!(state.as_str())))
}

/// How often the module looks at tasks, power states and the guest agent.
const POLL: Duration = Duration::from_millis(500);

pub fn run(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    let conn: pve_client::ConnectionOptions = m.options()?;
    // Options first: a bad option should not cost a login.
    o.plan(m.check_mode)
        .map_err(|e| Failure::new(e.to_string()))?;
    let client = pve_client::connect_module(m, &conn)
        .map_err(|e| Failure::new(format!("cannot connect to Proxmox: {e}")))?
        .with_poll_interval(POLL);
    execute(m, &o, &client, Some(POLL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::*;

    #[test]
    fn sidecar_matches_spec() {
        module_testkit::assert_sidecar_matches(&super::argument_spec(), "proxmox", "vm_lifecycle");
    }

    fn cluster() -> Fake {
        let mut f = Fake::with(&[
            (101, stopped(false)),
            (102, stopped(false)),
            (103, running(false)),
            (200, stopped(false)),
        ]);
        f.inventory = vec![
            inventory(101, "master-0", "pve1", &["ocp1", "proxshift"]),
            inventory(102, "master-1", "pve2", &["ocp1", "proxshift"]),
            inventory(103, "master-2", "pve1", &["ocp1", "proxshift"]),
            inventory(200, "bystander", "pve1", &["ocp1"]),
        ];
        f
    }

    /// Run the module through the real protocol layer with a fake Proxmox.
    fn module(mut args: Value, fake: &Fake) -> (Value, i32) {
        args["api_host"] = json!("pve.invalid");
        module_testkit::TestModule::new("vm_lifecycle", argument_spec(), run).run_with(&args, |m| {
            let o: Options = m.options()?;
            execute(m, &o, fake, Some(Duration::from_millis(1)))
        })
    }

    #[test]
    fn tags_selector_with_order_and_totals() {
        let fake = cluster();
        let (r, code) = module(
            json!({"state": "started", "tags": ["OCP1"], "order": ["master-1"], "_ansible_diff": true}),
            &fake,
        );
        assert_eq!(code, 0, "{r}");
        assert_eq!(r["changed"], json!(true));
        let names: Vec<&str> = r["vms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["master-1", "master-0", "master-2", "bystander"]);
        assert_eq!(fake.sent()[0], (102, "start".to_string()), "ordered first");
        assert_eq!(r["totals"]["changed"], json!(3));
        assert_eq!(r["totals"]["unchanged"], json!(1));
        assert_eq!(r["diff"]["before"]["master-0 (101)"], json!("stopped"));
        assert_eq!(r["diff"]["after"]["master-0 (101)"], json!("running"));
        assert_eq!(r["msg"], json!("4 VMs: 3 changed, 1 already started"));
    }

    #[test]
    fn status_with_remediation_leaves_unowned_alone() {
        let fake = cluster();
        let (r, code) = module(
            json!({"state": "status", "tags": ["ocp1"], "remediate": true}),
            &fake,
        );
        assert_eq!(code, 0, "{r}");
        let mut sent = fake.sent();
        sent.sort();
        assert_eq!(
            sent,
            vec![(101, "start".to_string()), (102, "start".to_string())]
        );
        let by = |id: u64| {
            r["vms"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["vmid"] == json!(id))
                .unwrap()
                .clone()
        };
        assert_eq!(by(200)["after"], json!("stopped"));
        assert_eq!(by(200)["owned"], json!(false));
        assert_eq!(by(101)["changed"], json!(true));
    }

    #[test]
    fn unreachable_fails_unless_ignored() {
        let mut fake = cluster();
        fake.unreachable_nodes = vec!["pve2".into()];
        let (r, code) = module(json!({"state": "status", "tags": ["proxshift"]}), &fake);
        assert_eq!(code, 1);
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .starts_with("1 of 3 VMs failed: master-1 (102)"),
            "{r}"
        );
        assert_eq!(
            r["vms"].as_array().unwrap().len(),
            3,
            "others still reported"
        );
        let (r, code) = module(
            json!({"state": "status", "tags": ["proxshift"], "ignore_unreachable": true}),
            &fake,
        );
        assert_eq!(code, 0, "{r}");
        assert!(
            r["warnings"][0].as_str().unwrap().contains("unreachable"),
            "{r}"
        );
        assert_eq!(r["totals"]["unreachable"], json!(1));
    }

    #[test]
    fn option_errors_name_the_option() {
        let fake = cluster();
        let (r, code) = module(json!({"state": "started", "vmid": 5}), &fake);
        assert_eq!(code, 1);
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("vmid must be between 100"),
            "{r}"
        );
        let (r, _) = module(
            json!({"state": "started", "vmid": 101, "remediate": true}),
            &fake,
        );
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("remediate applies to state: status"),
            "{r}"
        );
        let (r, _) = module(
            json!({"state": "started", "vms": [101], "tags": ["x"]}),
            &fake,
        );
        assert!(
            r["msg"].as_str().unwrap().contains("mutually exclusive"),
            "{r}"
        );
        let (r, _) = module(json!({"state": "started"}), &fake);
        assert!(
            r["msg"].as_str().unwrap().contains("one of the following"),
            "{r}"
        );
        let (r, _) = module(
            json!({"state": "status", "tags": ["ok", "bad tag"], "owner_tag": ""}),
            &fake,
        );
        let msg = r["msg"].as_str().unwrap();
        assert!(
            msg.contains("tags: 'bad tag' is not a valid Proxmox tag"),
            "{msg}"
        );
        assert!(
            msg.contains("owner_tag '' is not a valid Proxmox tag"),
            "{msg}"
        );
        let (r, _) = module(json!({"state": "started", "vms": ["nope", 101]}), &fake);
        assert!(
            r["msg"]
                .as_str()
                .unwrap()
                .contains("no VM with name 'nope'"),
            "{r}"
        );
        let (r, _) = module(
            json!({"state": "started", "vms": [101], "order": [102]}),
            &fake,
        );
        assert!(r["msg"].as_str().unwrap().contains("order[0]"), "{r}");
        assert!(fake.sent().is_empty());
    }

    #[test]
    fn empty_selection_warns() {
        let fake = cluster();
        let (r, code) = module(json!({"state": "stopped", "tags": ["nothing"]}), &fake);
        assert_eq!(code, 0);
        assert_eq!(r["changed"], json!(false));
        assert!(r["warnings"][0].as_str().unwrap().contains("no VM carries"));
    }

    #[test]
    fn check_mode_changes_nothing_but_reports() {
        let fake = cluster();
        let (r, code) = module(
            json!({"state": "stopped", "name": "master-2", "_ansible_check_mode": true}),
            &fake,
        );
        assert_eq!(code, 0);
        assert_eq!(r["changed"], json!(true));
        assert_eq!(r["vms"][0]["after"], json!("stopped"));
        assert_eq!(r["msg"], json!("1 VMs: 1 would change, 0 already stopped"));
        assert!(fake.sent().is_empty());
    }
}
