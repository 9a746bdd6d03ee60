//! The task's result from the plans and what became of them (pure): per-VM entries, the VMs that
//! hold the snapshot, and one `msg`.

use serde_json::{json, Value};

use crate::options::{Settings, State};
use crate::plan::{Step, VmPlan};
use crate::run::Done;

/// What became of one VM's plan.
#[derive(Debug)]
pub enum Fate {
    /// Check mode: the plan is the prediction.
    Predicted,
    Applied(Done),
    /// An earlier VM failed and the task stopped before this one.
    NotReached,
}

/// One VM's plan and fate, with its snapshot names after the task (listed again after writes).
#[derive(Debug)]
pub struct VmResult {
    pub plan: VmPlan,
    pub fate: Fate,
    pub after: Vec<String>,
}

impl VmResult {
    pub fn changed(&self) -> bool {
        match &self.fate {
            Fate::Predicted => self.plan.changes(),
            Fate::Applied(d) => d.changed(),
            Fate::NotReached => false,
        }
    }

    pub fn failed(&self) -> Option<String> {
        match &self.fate {
            Fate::Applied(Done { error: Some(e), .. }) => Some(e.to_string()),
            _ => None,
        }
    }

    /// Whether the VM holds the task's snapshot after the task (or would, in check mode).
    pub fn has_snapshot(&self, snapname: &str) -> bool {
        self.after.iter().any(|n| n == snapname)
    }

    fn pruned(&self, s: &Settings) -> Vec<String> {
        let planned = self.plan.steps.iter().filter_map(|st| match st {
            Step::Delete(n) if *n != s.snapname || s.state == State::Present => Some(n.clone()),
            _ => None,
        });
        match (&self.fate, s.state) {
            (_, State::Absent) => Vec::new(),
            (Fate::Predicted, _) => planned.collect(),
            (Fate::Applied(d), _) => d.deleted.clone(),
            (Fate::NotReached, _) => Vec::new(),
        }
    }

    fn action(&self, s: &Settings) -> &'static str {
        if self.failed().is_some() {
            return "failed";
        }
        if matches!(self.fate, Fate::NotReached) {
            return "not reached";
        }
        match s.state {
            State::Present if self.plan.already => "exists",
            State::Present => "created",
            State::Absent if self.plan.already => "absent",
            State::Absent => "deleted",
            State::Rollback => "rolled back",
        }
    }

    /// The VM's entry in the result's `vms`.
    pub fn to_json(&self, s: &Settings) -> Value {
        let vm = &self.plan.vm;
        let mut o = json!({
            "vmid": vm.vmid,
            "name": vm.name,
            "node": vm.node,
            "action": self.action(s),
            "changed": self.changed(),
            "pruned": self.pruned(s),
            "snapshots": self.after,
        });
        if let Some(e) = self.failed() {
            o["msg"] = json!(e);
        }
        o
    }
}

fn labels<'a>(rs: impl Iterator<Item = &'a VmResult>) -> String {
    let l: Vec<String> = rs.map(|r| r.plan.vm.label()).collect();
    if l.is_empty() {
        "none".into()
    } else {
        l.join(", ")
    }
}

fn count(n: usize) -> String {
    format!("{n} VM{}", if n == 1 { "" } else { "s" })
}

/// The `msg` of a task that failed part-way: the failure, then where the snapshot is and is not
/// (a rollback: which VMs were rolled back).
pub fn failure_message(results: &[VmResult], s: &Settings) -> Option<String> {
    let errors: Vec<String> = results.iter().filter_map(VmResult::failed).collect();
    if errors.is_empty() {
        return None;
    }
    let name = &s.snapname;
    let tail = match s.state {
        State::Present | State::Absent => format!(
            "snapshot '{name}' is now on: {}; not on: {}",
            labels(results.iter().filter(|r| r.has_snapshot(name))),
            labels(results.iter().filter(|r| !r.has_snapshot(name))),
        ),
        State::Rollback => format!(
            "rolled back to '{name}': {}; not rolled back: {}",
            labels(results.iter().filter(|r| r.changed())),
            labels(results.iter().filter(|r| !r.changed())),
        ),
    };
    Some(format!("{}; {tail}", errors.join("; ")))
}

/// The `msg` of a task that went through.
pub fn message(results: &[VmResult], s: &Settings, check_mode: bool) -> String {
    let would = if check_mode { "would be " } else { "" };
    let name = &s.snapname;
    let changing = results.iter().filter(|r| r.plan.changes()).count();
    let already = results.iter().filter(|r| r.plan.already).count();
    let mut msg = match s.state {
        State::Present if already == results.len() => {
            format!("snapshot '{name}' is on {} already", count(already))
        }
        State::Present => format!(
            "snapshot '{name}' {would}taken of {}; {} had it already",
            count(results.len() - already),
            count(already)
        ),
        State::Absent => format!(
            "snapshot '{name}' {would}removed from {}; {} had none",
            count(changing),
            count(already)
        ),
        State::Rollback => format!("{} {would}rolled back to '{name}'", count(changing)),
    };
    let pruned: usize = results.iter().map(|r| r.pruned(s).len()).sum();
    if pruned > 0 {
        msg.push_str(&format!(
            "; retention (keep {} of '{}'): {pruned} older snapshot{} {would}removed",
            s.retention,
            s.prefix,
            if pruned == 1 { "" } else { "s" }
        ));
    }
    msg
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use vm_lifecycle::model::Inventory;

    use super::*;
    use crate::run::SnapError;

    fn settings(state: State) -> Settings {
        Settings {
            state,
            snapname: "restore-2".into(),
            description: None,
            vmstate: false,
            retention: 1,
            prefix: "restore".into(),
            force: false,
            owner_tag: "proxshift-c1".into(),
            timeout: Duration::from_secs(60),
        }
    }

    fn result(vmid: u32, steps: Vec<Step>, fate: Fate, after: &[&str]) -> VmResult {
        VmResult {
            plan: VmPlan {
                vm: Inventory {
                    vmid,
                    name: format!("m{vmid}"),
                    node: "pve1".into(),
                    tags: vec![],
                    template: false,
                    status: "stopped".into(),
                    container: false,
                },
                already: steps.is_empty(),
                steps,
                before: vec![],
                after: vec![],
                stops_running: false,
            },
            fate,
            after: after.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn task_failure() -> SnapError {
        SnapError::Step {
            vm: "m102 (102)".into(),
            what: "snapshot 'restore-2'".into(),
            source: Box::new(pve_client::Error::invalid(
                "snapshot feature is not available",
            )),
        }
    }

    #[test]
    fn a_half_done_snapshot_says_where_it_is() {
        let s = settings(State::Present);
        let results = vec![
            result(
                101,
                vec![Step::Create],
                Fate::Applied(Done {
                    created: true,
                    ..Done::default()
                }),
                &["restore-2"],
            ),
            result(
                102,
                vec![Step::Create],
                Fate::Applied(Done {
                    error: Some(task_failure()),
                    ..Done::default()
                }),
                &[],
            ),
            result(103, vec![Step::Create], Fate::NotReached, &[]),
        ];
        assert_eq!(
            failure_message(&results, &s).unwrap(),
            "snapshot 'restore-2' on m102 (102) failed: snapshot feature is not available; \
             snapshot 'restore-2' is now on: m101 (101); not on: m102 (102), m103 (103)"
        );
        let j: Vec<Value> = results.iter().map(|r| r.to_json(&s)).collect();
        assert_eq!(j[0]["action"], "created");
        assert_eq!(j[1]["action"], "failed");
        assert_eq!(j[2]["action"], "not reached");
        assert_eq!(j[2]["changed"], false);
    }

    #[test]
    fn messages_in_check_mode_say_would() {
        let s = settings(State::Present);
        let results = vec![
            result(
                101,
                vec![Step::Create, Step::Delete("restore-1".into())],
                Fate::Predicted,
                &["restore-2"],
            ),
            result(102, vec![], Fate::Predicted, &["restore-2"]),
        ];
        assert_eq!(
            message(&results, &s, true),
            "snapshot 'restore-2' would be taken of 1 VM; 1 VM had it already; \
             retention (keep 1 of 'restore'): 1 older snapshot would be removed"
        );
        assert_eq!(results[0].to_json(&s)["pruned"], json!(["restore-1"]));
        assert!(failure_message(&results, &s).is_none());
        let done = vec![result(
            102,
            vec![],
            Fate::Applied(Done::default()),
            &["restore-2"],
        )];
        assert_eq!(
            message(&done, &s, false),
            "snapshot 'restore-2' is on 1 VM already"
        );
    }

    #[test]
    fn absent_and_rollback_messages() {
        let s = settings(State::Absent);
        let results = vec![
            result(
                101,
                vec![Step::Delete("restore-2".into())],
                Fate::Applied(Done {
                    deleted: vec!["restore-2".into()],
                    ..Done::default()
                }),
                &[],
            ),
            result(102, vec![], Fate::Applied(Done::default()), &[]),
        ];
        assert_eq!(
            message(&results, &s, false),
            "snapshot 'restore-2' removed from 1 VM; 1 VM had none"
        );
        assert_eq!(results[0].to_json(&s)["pruned"], json!([]));
        assert_eq!(results[0].to_json(&s)["action"], "deleted");
        let s = settings(State::Rollback);
        let results = vec![result(101, vec![Step::Rollback], Fate::Predicted, &[])];
        assert_eq!(
            message(&results, &s, true),
            "1 VM would be rolled back to 'restore-2'"
        );
    }
}
