//! Carry out a plan: per VM observe → decide → act → wait for the real state → wait for readiness;
//! steps one after another, VMs inside a step in parallel up to a bound. The Proxmox calls sit behind
//! [`Backend`] (in `backend.rs`) so all of this is tested without a server; what comes out is a
//! [`VmReport`] per VM (in `report.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use proxshift_http::{wait_for, Poll, WaitError};

pub use crate::backend::{Backend, BackendError};
use crate::decide::{decide, Decision, Rules};
use crate::model::{Inventory, Observed, Op, OpExt, Power, State, WaitFor};
pub use crate::report::{explain_task_error, power_diff, routable, totals, Ha, Totals, VmReport};

/// How a run behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    pub state: State,
    pub rules: Rules,
    pub wait_for: WaitFor,
    /// Readiness (agent/IP) wait per VM.
    pub wait_timeout: Duration,
    /// Per power task, lock wait, and HA settling.
    pub task_timeout: Duration,
    pub parallel: usize,
    pub check_mode: bool,
    /// Ownership tag; VMs without it are never touched by remediation.
    pub owner_tag: String,
    pub poll: Duration,
}

pub struct Engine<'a, B: Backend> {
    pub backend: &'a B,
    pub settings: Settings,
}

impl<B: Backend> Engine<'_, B> {
    /// Run every step in sequence; within a step at most `parallel` VMs at a time. Reports come
    /// back in step order, each step in its own order.
    pub fn run(&self, targets: &[Inventory], steps: &[Vec<usize>]) -> Vec<VmReport> {
        let mut out = Vec::with_capacity(targets.len());
        for (n, step) in steps.iter().enumerate() {
            let vms: Vec<&Inventory> = step.iter().map(|&i| &targets[i]).collect();
            out.extend(self.run_step(&vms, n + 1));
        }
        out
    }

    fn run_step(&self, vms: &[&Inventory], step: usize) -> Vec<VmReport> {
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<VmReport>>> = Mutex::new(vec![None; vms.len()]);
        let workers = self.settings.parallel.max(1).min(vms.len());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= vms.len() {
                        break;
                    }
                    let r = self.one(vms[i], step);
                    if let Ok(mut g) = slots.lock() {
                        g[i] = Some(r);
                    }
                });
            }
        });
        slots
            .into_inner()
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect()
    }

    /// Everything for one VM. Never panics on API trouble: failures end up in the report.
    pub fn one(&self, vm: &Inventory, step: usize) -> VmReport {
        let s = &self.settings;
        let owned = vm.has_tag(&s.owner_tag);
        let mut r = VmReport::new(vm, step, owned);
        let b = self.backend;
        let obs = match b.status(&vm.node, vm.vmid) {
            Ok(o) => o,
            Err(e) => return r.fail("reading its status", e),
        };
        r.observe(&obs);
        let before = obs.power();
        r.before = before.to_string();

        match decide(s.state, before, owned, s.rules) {
            Decision::Keep => {
                r.msg = keep_message(s.state, before, owned, s.rules.remediate, &s.owner_tag);
            }
            Decision::Refuse(why) => {
                r.failed = true;
                r.msg = format!(
                    "{} on node {} cannot be {}: {why}",
                    r.label(),
                    vm.node,
                    s.state.as_str()
                );
                return r;
            }
            Decision::Act { ops, expect } => {
                r.actions = ops.iter().map(|o| o.verb().to_string()).collect();
                if s.check_mode {
                    r.changed = true;
                    r.after = expect.to_string();
                    r.msg = format!("would {} (check mode)", r.actions.join(", then "));
                    return r;
                }
                r = self.act(r, &obs, &ops, expect);
                if r.failed {
                    return r;
                }
            }
        }
        if s.check_mode || r.after != Power::Running.as_str() {
            return r;
        }
        self.readiness(r, &obs)
    }

    /// Send the operations, then wait for the power state they promise.
    fn act(&self, mut r: VmReport, obs: &Observed, ops: &[Op], expect: Power) -> VmReport {
        let s = &self.settings;
        let b = self.backend;
        let vmid = r.vmid;
        // `suspended` is hibernation: start resumes it, so it is no obstacle.
        if obs.lock.as_deref().is_some_and(|l| l != "suspended") {
            if let Err(e) = b.wait_unlocked(&r.node, vmid, s.task_timeout) {
                return r.fail("waiting for its lock to clear", e);
            }
            if obs.lock.as_deref() == Some("migrate") {
                // The migration that held the lock may have moved the VM to another node.
                match b
                    .inventory()
                    .map(|all| all.into_iter().find(|v| v.vmid == vmid))
                {
                    Ok(Some(now)) => r.node = now.node,
                    Ok(None) => {
                        let e = BackendError::Other("it no longer exists in the cluster".into());
                        return r.fail("finding it after its migration", e);
                    }
                    Err(e) => return r.fail("finding it after its migration", e),
                }
            }
        }
        let node = r.node.clone();
        for op in ops {
            let timeout = s.task_timeout + op.guest_timeout();
            match b.power(&node, vmid, op, timeout) {
                Ok(()) => r.changed = true,
                // Someone (HA, a person) started it between our look and our request: fine.
                Err(BackendError::AlreadyRunning { .. }) if *op == Op::Start => {}
                Err(e) => {
                    let changed = r.changed;
                    // A shutdown task that failed without forceStop: the guest did not go down in time
                    // (or refused); only force stops it hard.
                    let unforced = matches!(
                        op,
                        Op::Shutdown {
                            force_stop: false,
                            ..
                        }
                    ) && matches!(e, BackendError::Task { .. });
                    let doing = if op.verb() == op.endpoint() {
                        op.verb().to_string()
                    } else {
                        format!("{} ({})", op.verb(), op.endpoint())
                    };
                    let mut f = r.fail(&doing, e);
                    if unforced {
                        f.msg.push_str(
                            "; the guest did not shut down: with force=true Proxmox stops it hard when the \
                             timeout passes (or give it a longer timeout)",
                        );
                    }
                    if changed {
                        // An earlier operation went through: report where the VM really is now.
                        if let Ok(o) = b.status(&node, vmid) {
                            f.observe(&o);
                        }
                    }
                    return f;
                }
            }
        }
        // HA-managed VMs: the hastart/hastop task only asks the HA manager; the power change comes
        // later. Plain VMs are already there, so this is one status read.
        let settle = s.task_timeout + ops.iter().map(OpExt::guest_timeout).sum::<Duration>();
        let label = r.label();
        let res = wait_for(settle, s.poll, || {
            let o = b.status(&node, vmid)?;
            let p = o.power();
            Ok(if p == expect {
                Poll::Ready(o)
            } else {
                Poll::Pending(format!("{label} to be {expect} (it is {p})"))
            })
        });
        match res {
            Ok(o) => {
                r.observe(&o);
                r.msg = if r.changed {
                    done_message(ops)
                } else {
                    format!("already {expect} (started by someone else meanwhile)")
                };
                r
            }
            // proxshift_http::wait_for has no stop file: a timeout only.
            Err(
                WaitError::Timeout { pending, .. }
                | WaitError::Stopped {
                    reason: pending, ..
                },
            ) => {
                let who = if obs.ha_managed {
                    " (HA-managed: the HA manager did not carry out the request)"
                } else {
                    ""
                };
                r.failed = true;
                r.msg = format!(
                    "{label} on node {}: timed out after {}s waiting for {pending}{who}",
                    node,
                    settle.as_secs()
                );
                r
            }
            Err(WaitError::Failed(e)) => r.fail("checking its power state", e),
        }
    }

    /// Wait for the guest agent or an address when asked; otherwise pick up addresses if the agent
    /// happens to answer.
    fn readiness(&self, mut r: VmReport, obs: &Observed) -> VmReport {
        let s = &self.settings;
        let b = self.backend;
        let (node, vmid) = (r.node.clone(), r.vmid);
        // A health report never waits; it only picks up what the agent says right now.
        if s.wait_for == WaitFor::Running || s.state == State::Status {
            if obs.agent {
                if let Ok(ips) = b.guest_ips(&node, vmid) {
                    r.ips = routable(&ips);
                }
            }
            return r;
        }
        if !obs.agent {
            r.failed = true;
            r.msg =
                format!(
                "{} on node {}: wait_for: {} needs the QEMU guest agent, which is not enabled in \
                 the VM's config (agent: 1)",
                r.label(),
                node,
                if s.wait_for == WaitFor::Ip { "ip" } else { "agent" }
            );
            return r;
        }
        let want_ip = s.wait_for == WaitFor::Ip;
        let label = r.label();
        let res = wait_for(s.wait_timeout, s.poll, || match b.guest_ips(&node, vmid) {
            Ok(ips) => {
                let ips = routable(&ips);
                if want_ip && ips.is_empty() {
                    Ok(Poll::Pending(format!(
                        "a routable address on {label} (the agent reports none yet)"
                    )))
                } else {
                    Ok(Poll::Ready(ips))
                }
            }
            Err(BackendError::Agent(m)) => Ok(Poll::Pending(format!(
                "the guest agent of {label} ({})",
                m.trim()
            ))),
            Err(e) => Err(e),
        });
        match res {
            Ok(ips) => {
                r.ips = ips;
                let what = if want_ip {
                    "has an address"
                } else {
                    "guest agent answers"
                };
                r.msg = if r.msg.is_empty() {
                    what.to_string()
                } else {
                    format!("{}; {what}", r.msg)
                };
                r
            }
            // proxshift_http::wait_for has no stop file: a timeout only.
            Err(
                WaitError::Timeout { pending, .. }
                | WaitError::Stopped {
                    reason: pending, ..
                },
            ) => {
                r.failed = true;
                r.msg = format!(
                    "{label} on node {}: timed out after {}s (wait_timeout) waiting for {pending}",
                    node,
                    s.wait_timeout.as_secs()
                );
                r
            }
            Err(WaitError::Failed(e)) => r.fail("waiting for its guest agent", e),
        }
    }
}

fn done_message(ops: &[Op]) -> String {
    ops.iter()
        .map(OpExt::done)
        .collect::<Vec<_>>()
        .join(", then ")
}

fn keep_message(state: State, now: Power, owned: bool, remediate: bool, tag: &str) -> String {
    match state {
        State::Status if remediate && !owned && now != Power::Running => {
            format!("{now}; not owned (no '{tag}' tag), so remediation leaves it alone")
        }
        State::Status => now.to_string(),
        _ => format!("already {now}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::*;
    use serde_json::json;

    fn inv(vmid: u32, name: &str, node: &str, owned: bool) -> Inventory {
        inventory(vmid, name, node, if owned { &["proxshift"] } else { &[] })
    }

    fn settings(state: State) -> Settings {
        Settings {
            state,
            rules: Rules {
                timeout: Duration::from_secs(5),
                force: false,
                remediate: false,
            },
            wait_for: WaitFor::Running,
            wait_timeout: Duration::from_secs(2),
            task_timeout: Duration::from_secs(2),
            parallel: 4,
            check_mode: false,
            owner_tag: "proxshift".into(),
            poll: Duration::from_millis(1),
        }
    }

    fn run(fake: &Fake, s: Settings, targets: &[Inventory]) -> Vec<VmReport> {
        let steps = vec![(0..targets.len()).collect()];
        Engine {
            backend: fake,
            settings: s,
        }
        .run(targets, &steps)
    }

    #[test]
    fn start_sends_only_what_is_needed_and_reruns_are_quiet() {
        let fake = Fake::with(&[
            (101, stopped(false)),
            (102, running(false)),
            (103, paused()),
        ]);
        let t = [
            inv(101, "m0", "pve1", true),
            inv(102, "m1", "pve1", true),
            inv(103, "m2", "pve1", true),
        ];
        let r = run(&fake, settings(State::Started), &t);
        let mut sent = fake.sent();
        sent.sort();
        assert_eq!(
            sent,
            vec![(101, "start".to_string()), (103, "resume".to_string())]
        );
        assert_eq!(
            r.iter()
                .map(|x| (x.vmid, x.before.as_str(), x.after.as_str(), x.changed))
                .collect::<Vec<_>>(),
            vec![
                (101, "stopped", "running", true),
                (102, "running", "running", false),
                (103, "paused", "running", true)
            ]
        );
        assert_eq!(r[1].msg, "already running");
        let t2 = totals(&r);
        assert_eq!((t2.vms, t2.changed, t2.unchanged, t2.running), (3, 2, 1, 3));

        let before = fake.sent().len();
        let again = run(&fake, settings(State::Started), &t);
        assert_eq!(fake.sent().len(), before, "a rerun sends nothing");
        assert!(again.iter().all(|x| !x.changed && !x.failed));
    }

    #[test]
    fn check_mode_predicts_and_sends_nothing() {
        let fake = Fake::with(&[(101, running(false)), (102, stopped(false))]);
        let mut s = settings(State::Stopped);
        s.check_mode = true;
        let r = run(
            &fake,
            s,
            &[inv(101, "a", "pve1", true), inv(102, "b", "pve1", true)],
        );
        assert!(fake.sent().is_empty());
        assert_eq!(r[0].after, "stopped");
        assert!(r[0].changed);
        assert_eq!(r[0].actions, vec!["shutdown"]);
        assert!(
            r[0].msg.contains("would shutdown (check mode)"),
            "{}",
            r[0].msg
        );
        assert!(!r[1].changed);
        let (b, a) = power_diff(&r);
        assert_eq!(b, json!({"a (101)": "running", "b (102)": "stopped"}));
        assert_eq!(a, json!({"a (101)": "stopped", "b (102)": "stopped"}));
    }

    #[test]
    fn offline_node_fails_only_its_vms() {
        let mut fake = Fake::with(&[(101, stopped(false)), (102, stopped(false))]);
        fake.unreachable_nodes = vec!["pve2".into()];
        let r = run(
            &fake,
            settings(State::Started),
            &[inv(101, "a", "pve1", true), inv(102, "b", "pve2", true)],
        );
        assert!(!r[0].failed && r[0].changed);
        assert!(r[1].failed && r[1].unreachable && !r[1].changed);
        assert!(
            r[1].msg.contains("node pve2 is unreachable") && r[1].msg.contains("595"),
            "{}",
            r[1].msg
        );
        let t = totals(&r);
        assert_eq!((t.failed, t.unreachable, t.changed), (1, 1, 1));
    }

    #[test]
    fn memory_failures_are_explained_with_the_task_log() {
        let mut fake = Fake::with(&[(101, stopped(false)), (102, stopped(false))]);
        fake.fail_task.insert(
            101,
            "start failed: QEMU exited with code 1: kvm: cannot set up guest memory 'pc.ram': \
             Cannot allocate memory"
                .into(),
        );
        let r = run(
            &fake,
            settings(State::Started),
            &[inv(101, "a", "pve1", true), inv(102, "b", "pve1", true)],
        );
        assert!(r[0].failed && !r[0].changed);
        assert!(
            r[0].msg.contains("does not have enough free memory")
                && r[0].msg.contains("task log tail")
                && r[0].msg.contains("start failed"),
            "{}",
            r[0].msg
        );
        assert_eq!(r[0].task_log.len(), 2);
        assert!(!r[1].failed && r[1].changed, "the other VM still starts");
    }

    #[test]
    fn already_running_race_counts_as_success() {
        let mut fake = Fake::with(&[(101, stopped(false))]);
        fake.fail_task.insert(101, "VM 101 already running".into());
        // The VM is running by the time we look again.
        fake.ha_lag.lock().unwrap().insert(101, (1, running(false)));
        let r = run(&fake, settings(State::Started), &[inv(101, "a", "p", true)]);
        assert!(!r[0].failed, "{}", r[0].msg);
        assert_eq!(r[0].after, "running");
        assert!(!r[0].changed, "someone else started it");
        assert!(r[0].msg.contains("meanwhile"), "{}", r[0].msg);
    }

    #[test]
    fn ha_vms_wait_for_the_real_state() {
        let mut o = stopped(false);
        o.ha_managed = true;
        o.ha_state = Some("stopped".into());
        let fake = Fake::with(&[(101, o)]);
        let r = run(&fake, settings(State::Started), &[inv(101, "a", "p", true)]);
        assert!(!r[0].failed, "{}", r[0].msg);
        assert_eq!(r[0].after, "running");
        assert!(fake.ha_lag.lock().unwrap().is_empty(), "waited for the lag");

        // HA never acting → a clear timeout naming HA.
        struct Stuck;
        impl Backend for Stuck {
            fn inventory(&self) -> Result<Vec<Inventory>, BackendError> {
                Ok(Vec::new())
            }
            fn status(&self, _: &str, _: u32) -> Result<Observed, BackendError> {
                let mut o = stopped(false);
                o.ha_managed = true;
                Ok(o)
            }
            fn power(&self, _: &str, _: u32, _: &Op, _: Duration) -> Result<(), BackendError> {
                Ok(())
            }
            fn wait_unlocked(&self, _: &str, _: u32, _: Duration) -> Result<(), BackendError> {
                Ok(())
            }
            fn guest_ips(&self, _: &str, _: u32) -> Result<Vec<String>, BackendError> {
                Ok(vec![])
            }
        }
        let mut s = settings(State::Started);
        s.task_timeout = Duration::from_millis(30);
        let r = Engine {
            backend: &Stuck,
            settings: s,
        }
        .run(&[inv(101, "a", "p", true)], &[vec![0]]);
        assert!(r[0].failed);
        assert!(r[0].changed, "the request was sent");
        assert!(
            r[0].msg.contains("HA-managed") && r[0].msg.contains("to be running"),
            "{}",
            r[0].msg
        );
    }

    #[test]
    fn paused_vm_stop_needs_force() {
        let fake = Fake::with(&[(101, paused())]);
        let r = run(&fake, settings(State::Stopped), &[inv(101, "a", "p", true)]);
        assert!(r[0].failed && fake.sent().is_empty());
        assert!(r[0].msg.contains("cannot be stopped"), "{}", r[0].msg);
        let mut s = settings(State::Stopped);
        s.rules.force = true;
        let r = run(&fake, s, &[inv(101, "a", "p", true)]);
        assert!(!r[0].failed && r[0].changed);
        assert_eq!(fake.sent(), vec![(101, "stop".to_string())]);
    }

    #[test]
    fn remediation_starts_owned_vms_only() {
        let fake = Fake::with(&[
            (101, stopped(false)),
            (102, stopped(false)),
            (103, running(false)),
        ]);
        let t = [
            inv(101, "a", "p", true),
            inv(102, "b", "p", false),
            inv(103, "c", "p", true),
        ];
        let r = run(&fake, settings(State::Status), &t);
        assert!(fake.sent().is_empty(), "status alone is read-only");
        assert_eq!(r[0].msg, "stopped");
        let mut s = settings(State::Status);
        s.rules.remediate = true;
        let r = run(&fake, s, &t);
        assert_eq!(fake.sent(), vec![(101, "start".to_string())]);
        assert!(r[0].changed && r[0].after == "running");
        assert!(!r[1].changed && r[1].after == "stopped" && !r[1].owned);
        assert!(r[1].msg.contains("not owned"), "{}", r[1].msg);
        assert!(!r[2].changed);
    }

    #[test]
    fn waits_for_agent_and_ip() {
        let fake = Fake::with(&[(101, stopped(true)), (102, stopped(false))]);
        fake.agent_after.lock().unwrap().insert(
            101,
            (
                3,
                vec![
                    "127.0.0.1".into(),
                    "fe80::1".into(),
                    "10.0.0.5".into(),
                    "::1".into(),
                ],
            ),
        );
        let mut s = settings(State::Started);
        s.wait_for = WaitFor::Ip;
        let r = run(
            &fake,
            s.clone(),
            &[inv(101, "a", "p", true), inv(102, "b", "p", true)],
        );
        assert!(!r[0].failed, "{}", r[0].msg);
        assert_eq!(r[0].ips, vec!["10.0.0.5"]);
        assert!(r[0].msg.contains("has an address"), "{}", r[0].msg);
        assert!(r[1].failed && r[1].msg.contains("agent: 1"), "{}", r[1].msg);

        // Agent up but only link-local: times out with what it waited for.
        let fake = Fake::with(&[(101, running(true))]);
        fake.agent_after
            .lock()
            .unwrap()
            .insert(101, (0, vec!["fe80::2".into()]));
        s.wait_timeout = Duration::from_millis(20);
        let r = run(&fake, s.clone(), &[inv(101, "a", "p", true)]);
        assert!(r[0].failed && !r[0].changed);
        assert!(r[0].msg.contains("routable address"), "{}", r[0].msg);
        // The same with wait_for agent is fine.
        s.wait_for = WaitFor::Agent;
        let r = run(&fake, s, &[inv(101, "a", "p", true)]);
        assert!(!r[0].failed && r[0].ips.is_empty());
    }

    #[test]
    fn parallel_bound_is_respected_and_steps_run_in_sequence() {
        let vms: Vec<(u32, Observed)> = (100..106).map(|i| (i, stopped(false))).collect();
        let mut fake = Fake::with(&vms);
        fake.op_delay = Duration::from_millis(30);
        let targets: Vec<Inventory> = (100..106).map(|i| inv(i, "", "p", true)).collect();
        let mut s = settings(State::Started);
        s.parallel = 2;
        let r = Engine {
            backend: &fake,
            settings: s,
        }
        .run(&targets, &[vec![0], vec![1, 2, 3, 4, 5]]);
        // Two in flight at most, and two did overlap: the bound is used, not just respected.
        assert_eq!(fake.max_in_flight(), 2, "{:?}", fake.calls());
        // Step 1's request ended before any of step 2 began.
        let calls = fake.calls();
        assert_eq!(
            calls[..2],
            [Call::Begin(100, "start"), Call::End(100, "start")]
        );
        let begun: Vec<u32> = calls[2..]
            .iter()
            .filter_map(|c| match c {
                Call::Begin(id, "start") => Some(*id),
                _ => None,
            })
            .collect();
        assert_eq!(begun.len(), 5, "{calls:?}");
        assert!(begun.iter().all(|id| (101..106).contains(id)));
        assert_eq!(fake.sent()[0].0, 100, "step 1 first");
        assert_eq!(r[0].step, 1);
        assert!(r[1..].iter().all(|x| x.step == 2 && x.changed));
    }

    #[test]
    fn locked_vms_wait_for_the_lock_except_hibernation() {
        let mut o = stopped(false);
        o.lock = Some("backup".into());
        let mut h = stopped(false);
        h.lock = Some("suspended".into());
        let fake = Fake::with(&[(101, o), (102, h)]);
        run(
            &fake,
            settings(State::Started),
            &[inv(101, "a", "p", true), inv(102, "b", "p", true)],
        );
        let s = fake.sent();
        assert!(s.contains(&(101, "wait_unlocked".into())));
        assert!(!s.contains(&(102, "wait_unlocked".into())));
    }

    #[test]
    fn status_never_waits_for_readiness() {
        let fake = Fake::with(&[(101, running(true))]);
        let mut s = settings(State::Status);
        s.wait_for = WaitFor::Ip;
        s.wait_timeout = Duration::from_secs(30);
        let r = run(&fake, s, &[inv(101, "a", "p", true)]);
        assert!(!r[0].failed, "{}", r[0].msg);
        assert!(r[0].ips.is_empty());
        // One agent query for the report, no polling: status reads, it does not wait.
        assert_eq!(
            fake.calls(),
            [Call::Begin(101, "guest_ips"), Call::End(101, "guest_ips")]
        );
    }

    #[test]
    fn a_failure_after_a_sent_request_still_reports_changed() {
        // Restart with force = shutdown then start; the start fails after the shutdown worked.
        let mut fake = Fake::with(&[(101, running(false))]);
        fake.fail_endpoint.insert(
            (101, "start"),
            "start failed: QEMU exited with code 1".into(),
        );
        let mut s = settings(State::Restarted);
        s.rules.force = true;
        let r = run(&fake, s, &[inv(101, "a", "p", true)]);
        assert!(r[0].failed && r[0].changed, "{:?}", r[0]);
        assert!(
            r[0].msg
                .contains(": start failed: start failed: QEMU exited"),
            "{}",
            r[0].msg
        );
        assert_eq!(
            fake.sent(),
            vec![(101, "shutdown".to_string()), (101, "start".to_string())]
        );
    }

    #[test]
    fn a_shutdown_that_fails_without_force_says_what_force_does() {
        let mut fake = Fake::with(&[(101, running(false)), (102, running(false))]);
        let timeout = "VM quit/powerdown failed - got timeout".to_string();
        fake.fail_endpoint
            .insert((101, "shutdown"), timeout.clone());
        let r = run(&fake, settings(State::Stopped), &[inv(101, "a", "p", true)]);
        assert!(r[0].failed, "{:?}", r[0]);
        assert!(
            r[0].msg
                .contains(": shutdown failed: VM quit/powerdown failed"),
            "{}",
            r[0].msg
        );
        assert!(
            r[0].msg.contains("with force=true Proxmox stops it hard"),
            "{}",
            r[0].msg
        );
        // With force the shutdown is forced after the timeout: its failure is no guest's refusal.
        fake.fail_endpoint.insert((102, "shutdown"), timeout);
        let mut s = settings(State::Stopped);
        s.rules.force = true;
        let r = run(&fake, s, &[inv(102, "b", "p", true)]);
        assert!(
            r[0].failed && !r[0].msg.contains("with force=true"),
            "{}",
            r[0].msg
        );
        assert!(
            r[0].msg
                .contains("shutdown (forced after timeout) (shutdown) failed"),
            "{}",
            r[0].msg
        );
    }

    #[test]
    fn lock_wait_failure_is_reported() {
        struct Locked;
        impl Backend for Locked {
            fn inventory(&self) -> Result<Vec<Inventory>, BackendError> {
                Ok(vec![])
            }
            fn status(&self, _: &str, _: u32) -> Result<Observed, BackendError> {
                let mut o = stopped(false);
                o.lock = Some("backup".into());
                Ok(o)
            }
            fn power(&self, _: &str, _: u32, _: &Op, _: Duration) -> Result<(), BackendError> {
                panic!("must not send while locked")
            }
            fn wait_unlocked(&self, _: &str, _: u32, _: Duration) -> Result<(), BackendError> {
                Err(BackendError::Other(
                    "timed out after 2s waiting for the lock on VM 101 to clear".into(),
                ))
            }
            fn guest_ips(&self, _: &str, _: u32) -> Result<Vec<String>, BackendError> {
                Ok(vec![])
            }
        }
        let r = Engine {
            backend: &Locked,
            settings: settings(State::Started),
        }
        .run(&[inv(101, "a", "p", true)], &[vec![0]]);
        assert!(r[0].failed && !r[0].changed);
        assert_eq!(r[0].lock.as_deref(), Some("backup"));
        assert!(
            r[0].msg.contains("waiting for its lock to clear failed"),
            "{}",
            r[0].msg
        );
    }

    #[test]
    fn a_vm_that_migrated_while_locked_is_followed_to_its_new_node() {
        let mut o = stopped(false);
        o.lock = Some("migrate".into());
        let mut fake = Fake::with(&[(101, o)]);
        fake.inventory = vec![inv(101, "a", "pve2", true)];
        // The old node no longer has it: any call there would fail.
        let r = run(
            &fake,
            settings(State::Started),
            &[inv(101, "a", "pve1", true)],
        );
        assert!(!r[0].failed, "{}", r[0].msg);
        assert_eq!(r[0].node, "pve2");
        assert_eq!(
            fake.sent(),
            vec![
                (101, "wait_unlocked".to_string()),
                (101, "start".to_string())
            ]
        );
        assert_eq!(fake.nodes_used.lock().unwrap().last().unwrap(), "pve2");
    }

    #[test]
    fn helpers() {
        assert!(explain_task_error("start failed: out of memory", &[]).contains("free memory"));
        let log = vec![
            "kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory".to_string(),
            "TASK ERROR: start failed: QEMU exited with code 1".to_string(),
        ];
        let m = explain_task_error("start failed: QEMU exited with code 1", &log);
        assert!(
            m.starts_with("the node does not have enough free memory"),
            "{m}"
        );
        assert!(m.contains("QEMU exited with code 1"), "{m}");
        assert_eq!(
            explain_task_error("VM is locked (backup)\n", &[]),
            "VM is locked (backup)"
        );
        assert_eq!(
            routable(&[
                "169.254.1.1".into(),
                "192.168.1.10".into(),
                "2001:db8::5".into(),
                "x".into()
            ]),
            vec!["192.168.1.10", "2001:db8::5"]
        );
    }
}
