//! Follows a playbook run from its output: which phase and task is running, per-phase results,
//! the failures and the PLAY RECAP. Pure: fed one line at a time.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::output::{listed_problems, parse_line, Event, HostRecap, ResultBody, Status};

/// Tasks that belong to no phase (the cluster model, markers) are counted here.
pub const SETUP: &str = "setup";

/// Which site phase a role's tasks belong to, by the role's short name.
/// Exactly the roles `playbooks/site.yaml` imports (a test holds the two together).
const ROLE_PHASES: &[(&str, &str)] = &[
    ("secrets", "secrets"),
    ("manifests", "manifests"),
    ("cluster_vms", "vms"),
    ("cluster_power", "start"),
    ("install_wait", "install"),
    ("credentials", "credentials"),
    // The cluster's record is read in setup and written by several phases; their tags place those tasks.
    ("record", "credentials"),
    ("cluster_ready", "install"),
    ("acm", "acm"),
    ("post_install", "post"),
    ("external_secrets", "external_secrets"),
    ("gitops", "gitops"),
    ("cluster_upgrade", "upgrade"),
];

/// Whole words in a task name that place a task outside any phase role.
const NAME_PHASES: &[(&str, &str)] = &[("preflight", "preflight"), ("reinstall", "vms")];

fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// The site phase of a task, from its role (`proxshift.openshift.manifests`) and name. The manifests
/// role serves two phases; its ISO tasks say so in their names.
pub fn site_phase(role: Option<&str>, task: &str) -> Option<&'static str> {
    if let Some(role) = role {
        let short = role.rsplit('.').next().unwrap_or(role);
        if let Some((_, phase)) = ROLE_PHASES.iter().find(|(r, _)| *r == short) {
            if *phase == "manifests" && has_word(task, "iso") {
                return Some("iso");
            }
            return Some(phase);
        }
    }
    NAME_PHASES
        .iter()
        .find(|(w, _)| has_word(task, w))
        .map(|(_, p)| *p)
}

/// The phase of a task from its tags (ansible does not keep their order). Tags that name no site
/// phase (`always`) decide nothing. A task in several phases (the secrets role serves preflight,
/// manifests and iso too) keeps the phase its role suggests when that is one of them; otherwise the
/// first of them in site order that this run plans.
pub fn phase_from_tags(tags: &[String], guess: &str, planned: &[String]) -> Option<String> {
    let phases: Vec<&str> = crate::plan::SITE_PHASES
        .iter()
        .copied()
        .filter(|p| tags.iter().any(|t| t == p))
        .collect();
    if phases.is_empty() {
        return None;
    }
    let wanted: Vec<&str> = phases
        .iter()
        .copied()
        .filter(|p| planned.iter().any(|x| x == p))
        .collect();
    let pool = if wanted.is_empty() { &phases } else { &wanted };
    if pool.contains(&guess) {
        return Some(guess.to_string());
    }
    pool.first().map(|p| p.to_string())
}

/// How a phase went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseResult {
    NotRun,
    Skipped,
    Ok,
    Changed,
    Failed,
}

impl PhaseResult {
    pub fn label(self) -> &'static str {
        match self {
            PhaseResult::NotRun => "not run",
            PhaseResult::Skipped => "skipped",
            PhaseResult::Ok => "ok",
            PhaseResult::Changed => "changed",
            PhaseResult::Failed => "failed",
        }
    }
}

/// Task results of one phase, counted per task and host as the recap counts them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PhaseStats {
    pub name: String,
    pub planned: bool,
    pub tasks: u32,
    pub ok: u32,
    pub changed: u32,
    pub failed: u32,
    pub unreachable: u32,
    pub skipped: u32,
    pub ignored: u32,
}

impl PhaseStats {
    pub fn result(&self) -> PhaseResult {
        if self.failed + self.unreachable > 0 {
            PhaseResult::Failed
        } else if self.changed > 0 {
            PhaseResult::Changed
        } else if self.ok + self.ignored > 0 {
            PhaseResult::Ok
        } else if self.skipped > 0 {
            PhaseResult::Skipped
        } else {
            PhaseResult::NotRun
        }
    }
}

/// A failed task (not ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub phase: String,
    pub task: String,
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    pub message: String,
    pub unreachable: bool,
}

impl Failure {
    /// The problems the failure lists (preflight reports every problem at once), else none.
    pub fn listed_problems(&self) -> Vec<String> {
        listed_problems(&self.message)
    }
}

#[derive(Debug)]
struct TaskState {
    phase: usize,
    label: String,
    hosts: BTreeMap<String, Status>,
}

/// What the progress line shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub phase: Option<String>,
    /// 1-based position of `phase` among the planned phases, and their number.
    pub position: Option<(usize, usize)>,
    pub task: Option<String>,
    pub pending: Vec<String>,
    pub elapsed: Duration,
    pub failed: bool,
}

/// The state of one run.
#[derive(Debug)]
pub struct Tracker {
    planned: Vec<String>,
    /// Single-phase playbooks (start, stop, …) put every task in their one phase.
    single: bool,
    phases: Vec<PhaseStats>,
    current: Option<TaskState>,
    last_phase: Option<usize>,
    failures: Vec<Failure>,
    recap: Vec<HostRecap>,
    in_recap: bool,
    plays: Vec<String>,
    /// A result printed over several lines, still being read, and the failure it completes.
    body: Option<(ResultBody, Option<usize>)>,
}

impl Tracker {
    pub fn new(planned: &[String]) -> Self {
        let mut phases = vec![PhaseStats {
            name: SETUP.into(),
            ..Default::default()
        }];
        phases.extend(planned.iter().map(|p| PhaseStats {
            name: p.clone(),
            planned: true,
            ..Default::default()
        }));
        Tracker {
            planned: planned.to_vec(),
            single: planned.len() == 1,
            phases,
            current: None,
            last_phase: None,
            failures: Vec::new(),
            recap: Vec::new(),
            in_recap: false,
            plays: Vec::new(),
            body: None,
        }
    }

    fn phase_index(&mut self, name: &str) -> usize {
        if let Some(i) = self.phases.iter().position(|p| p.name == name) {
            return i;
        }
        self.phases.push(PhaseStats {
            name: name.to_string(),
            ..Default::default()
        });
        self.phases.len() - 1
    }

    fn finish_task(&mut self) {
        if let Some(t) = self.current.take() {
            let stats = &mut self.phases[t.phase];
            for status in t.hosts.values() {
                stats.tasks += 1;
                match status {
                    Status::Ok => stats.ok += 1,
                    Status::Changed => stats.changed += 1,
                    Status::Skipped => stats.skipped += 1,
                    Status::Ignored => stats.ignored += 1,
                    Status::Failed => stats.failed += 1,
                    Status::Unreachable => stats.unreachable += 1,
                }
            }
        }
    }

    /// Count one host's result of the current task; a failure is kept, and its index returned.
    fn result(
        &mut self,
        status: Status,
        host: String,
        item: Option<String>,
        message: Option<String>,
    ) -> Option<usize> {
        let t = self.current.as_mut()?;
        let slot = t.hosts.entry(host.clone()).or_insert(status);
        *slot = (*slot).max(status);
        if !matches!(status, Status::Failed | Status::Unreachable) {
            return None;
        }
        self.failures.push(Failure {
            phase: self.phases[t.phase].name.clone(),
            task: t.label.clone(),
            host,
            item,
            message: message.unwrap_or_default(),
            unreachable: status == Status::Unreachable,
        });
        Some(self.failures.len() - 1)
    }

    /// Feed one line of output.
    pub fn feed(&mut self, line: &str) {
        if let Some((body, _)) = self.body.as_mut() {
            if body.push(line) {
                if let Some((body, Some(i))) = self.body.take() {
                    self.failures[i].message = body.message();
                }
            }
            return;
        }
        match parse_line(line) {
            Event::Play(name) => {
                self.finish_task();
                self.in_recap = false;
                self.plays.push(name);
            }
            Event::Task {
                role,
                name,
                handler,
            } => {
                self.finish_task();
                let phase = if self.single {
                    self.planned[0].clone()
                } else {
                    match site_phase(role.as_deref(), &name) {
                        Some(p) => p.to_string(),
                        // Untagged helpers between phases stay in the phase that ran last.
                        None => self
                            .last_phase
                            .map(|i| self.phases[i].name.clone())
                            .unwrap_or_else(|| SETUP.into()),
                    }
                };
                let idx = self.phase_index(&phase);
                if phase != SETUP {
                    self.last_phase = Some(idx);
                }
                let mut label = match &role {
                    Some(r) => format!("{} : {name}", r.rsplit('.').next().unwrap_or(r)),
                    None => name,
                };
                if handler {
                    label = format!("handler {label}");
                }
                self.current = Some(TaskState {
                    phase: idx,
                    label,
                    hosts: BTreeMap::new(),
                });
            }
            Event::Result {
                status,
                host,
                item,
                message,
            } => {
                self.result(status, host, item, message);
            }
            Event::ResultOpen { status, host, item } => {
                let failure = self.result(status, host, item, None);
                self.body = Some((ResultBody::new(), failure));
            }
            Event::TaskTags(tags) if !self.single => {
                let Some(t) = self.current.as_ref() else {
                    return;
                };
                let guess = self.phases[t.phase].name.clone();
                if let Some(phase) = phase_from_tags(&tags, &guess, &self.planned) {
                    let idx = self.phase_index(&phase);
                    if let Some(t) = self.current.as_mut() {
                        t.phase = idx;
                    }
                    self.last_phase = Some(idx);
                }
            }
            Event::Ignoring => {
                if let (Some(t), Some(f)) = (self.current.as_mut(), self.failures.last()) {
                    if f.task == t.label {
                        if let Some(s) = t.hosts.get_mut(&f.host) {
                            *s = Status::Ignored;
                        }
                        self.failures.pop();
                    }
                }
            }
            Event::RecapStart => {
                self.finish_task();
                self.in_recap = true;
            }
            Event::Recap(r) if self.in_recap => {
                match self.recap.iter_mut().find(|x| x.host == r.host) {
                    // Several plays print several recaps; ansible's last one already sums them.
                    Some(existing) => *existing = r,
                    None => self.recap.push(r),
                }
            }
            _ => {}
        }
    }

    /// Close the task still open (call when the output ends).
    pub fn finish(&mut self) {
        self.finish_task();
    }

    pub fn progress(&self, elapsed: Duration) -> Progress {
        let phase_idx = self.current.as_ref().map(|t| t.phase).or(self.last_phase);
        let phase = phase_idx.map(|i| self.phases[i].name.clone());
        let position = phase.as_ref().and_then(|p| {
            self.planned
                .iter()
                .position(|x| x == p)
                .map(|i| (i + 1, self.planned.len()))
        });
        let started = |name: &str| {
            self.phases
                .iter()
                .any(|p| p.name == name && (p.tasks > 0 || Some(name) == phase.as_deref()))
        };
        let after = position.map(|(i, _)| i).unwrap_or(0);
        let pending = self
            .planned
            .iter()
            .skip(after)
            .filter(|p| !started(p))
            .cloned()
            .collect();
        Progress {
            phase,
            position,
            task: self.current.as_ref().map(|t| t.label.clone()),
            pending,
            elapsed,
            failed: !self.failures.is_empty(),
        }
    }

    /// Phases to report: the planned ones, plus any other that ran (setup first).
    pub fn phases(&self) -> Vec<PhaseStats> {
        self.phases
            .iter()
            .filter(|p| p.planned || p.tasks > 0)
            .cloned()
            .collect()
    }

    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    pub fn recap(&self) -> &[HostRecap] {
        &self.recap
    }

    pub fn plays(&self) -> &[String] {
        &self.plays
    }
}

/// `mm:ss`, or `h:mm:ss` past an hour.
pub fn format_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// One line, at most `width` characters: `[4/9 vms] proxmox : Create the VMs · 02:31 · next: start, install`.
pub fn render_progress(p: &Progress, width: usize) -> String {
    let mut head = match (&p.phase, p.position) {
        (Some(ph), Some((i, n))) => format!("[{i}/{n} {ph}]"),
        (Some(ph), None) => format!("[{ph}]"),
        (None, _) => "[starting]".to_string(),
    };
    if p.failed {
        head.push_str(" !");
    }
    let elapsed = format!(" · {}", format_elapsed(p.elapsed));
    let next = if p.pending.is_empty() {
        String::new()
    } else {
        format!(" · next: {}", p.pending.join(", "))
    };
    let task = p.task.clone().unwrap_or_default();
    let len = |s: &str| s.chars().count();
    // What is pending goes first when space is short; the task name is shortened last.
    let tail = if len(&head) + 1 + len(&task) + len(&elapsed) + len(&next) <= width {
        format!("{elapsed}{next}")
    } else {
        elapsed
    };
    let room = width.saturating_sub(len(&head) + 1 + len(&tail));
    let task = if len(&task) > room {
        let mut t: String = task.chars().take(room.saturating_sub(1)).collect();
        if room > 0 {
            t.push('…');
        }
        t
    } else {
        task
    };
    let sep = if task.is_empty() { "" } else { " " };
    let line = format!("{head}{sep}{task}{tail}");
    line.chars().take(width).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn phases_from_roles_and_names() {
        let cases: &[(Option<&str>, &str, Option<&str>)] = &[
            (
                Some("proxshift.hashi_vault.secrets"),
                "Read the secrets",
                Some("secrets"),
            ),
            (
                Some("proxshift.openshift.manifests"),
                "Render install-config",
                Some("manifests"),
            ),
            (
                Some("proxshift.openshift.manifests"),
                "Build the agent ISO",
                Some("iso"),
            ),
            // "isolated" is not the word ISO.
            (
                Some("proxshift.openshift.manifests"),
                "Use an isolated dir",
                Some("manifests"),
            ),
            (Some("proxshift.proxmox.cluster_vms"), "Create", Some("vms")),
            (
                Some("proxshift.proxmox.cluster_power"),
                "Start",
                Some("start"),
            ),
            (
                Some("proxshift.openshift.install_wait"),
                "Wait",
                Some("install"),
            ),
            (
                Some("proxshift.hashi_vault.credentials"),
                "Store",
                Some("credentials"),
            ),
            (Some("proxshift.openshift.acm"), "Import", Some("acm")),
            (None, "Preflight: VMIDs are free", Some("preflight")),
            (None, "Build the cluster model", None),
            (Some("other.role"), "x", None),
        ];
        for (role, task, phase) in cases {
            assert_eq!(site_phase(*role, task), *phase, "{role:?} / {task}");
        }
    }

    /// The roles `playbooks/site.yaml` imports, by short name, in play order.
    fn site_roles() -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../playbooks/site.yaml");
        let text = std::fs::read_to_string(path).expect("read playbooks/site.yaml");
        let plays: Vec<serde_yaml_ng::Value> = serde_yaml_ng::from_str(&text).expect("site.yaml");
        let mut roles = Vec::new();
        for play in &plays {
            let sections = ["pre_tasks", "tasks", "post_tasks"];
            let top = sections
                .iter()
                .flat_map(|k| play[*k].as_sequence().into_iter().flatten());
            // A block's tasks (site.yaml's phases sit in the block that holds the cluster's lease).
            let tasks = top.flat_map(|t| {
                let inner: Vec<&serde_yaml_ng::Value> = ["block", "rescue", "always"]
                    .iter()
                    .flat_map(|k| t[*k].as_sequence().into_iter().flatten())
                    .collect();
                if inner.is_empty() {
                    vec![t]
                } else {
                    inner
                }
            });
            for task in tasks {
                for key in [
                    "ansible.builtin.import_role",
                    "ansible.builtin.include_role",
                ] {
                    if let Some(name) = task[key]["name"].as_str() {
                        roles.push(name.rsplit('.').next().unwrap_or(name).to_string());
                    }
                }
            }
        }
        roles
    }

    #[test]
    fn role_phase_table_matches_the_roles_site_yaml_imports() {
        let mut imported = site_roles();
        assert!(imported.len() >= 5, "too few roles found: {imported:?}");
        imported.sort();
        imported.dedup();
        let mut table: Vec<String> = ROLE_PHASES.iter().map(|(r, _)| r.to_string()).collect();
        table.sort();
        assert_eq!(
            table, imported,
            "ROLE_PHASES (left) must name exactly the roles playbooks/site.yaml imports (right)"
        );
        for (_, phase) in ROLE_PHASES {
            assert!(
                crate::plan::SITE_PHASES.contains(phase),
                "unknown phase {phase}"
            );
        }
    }

    const RUN: &str = r#"
PLAY [Provision an OpenShift cluster on Proxmox VE] ****************************

TASK [Build the cluster model] *************************************************
ok: [localhost]

TASK [proxshift.hashi_vault.secrets : Read the secrets from Vault] *************
ok: [localhost]

TASK [Preflight: VMIDs, names and MACs are free] *******************************
ok: [localhost]

TASK [Preflight: probe DNS] ****************************************************
fatal: [localhost]: FAILED! => {"changed": false, "msg": "dns lookup"}
...ignoring

TASK [proxshift.openshift.manifests : Render the manifests] ********************
changed: [localhost]

TASK [proxshift.openshift.manifests : Build the agent ISO] *********************
skipping: [localhost]

TASK [proxshift.proxmox.cluster_vms : Create the VMs] **************************
changed: [localhost] => (item=lab-sno-0)
failed: [localhost] (item=lab-sno-1) => {"changed": false, "item": "lab-sno-1", "msg": "node pve9 is offline"}

PLAY RECAP *********************************************************************
localhost                  : ok=4    changed=1    unreachable=0    failed=1    skipped=1    rescued=0    ignored=1   
"#;

    #[test]
    fn a_failed_run_is_summarised_per_phase() {
        let mut t = Tracker::new(&planned(&crate::plan::SITE_PHASES));
        for l in RUN.lines() {
            t.feed(l);
        }
        t.finish();
        let by: BTreeMap<String, PhaseStats> = t
            .phases()
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        assert_eq!(by["setup"].result(), PhaseResult::Ok);
        assert_eq!(by["secrets"].result(), PhaseResult::Ok);
        assert_eq!((by["preflight"].ok, by["preflight"].ignored), (1, 1));
        assert_eq!(by["preflight"].result(), PhaseResult::Ok);
        assert_eq!(by["manifests"].result(), PhaseResult::Changed);
        assert_eq!(by["iso"].result(), PhaseResult::Skipped);
        // A loop with one failed item: the task failed once on its host.
        assert_eq!(
            (by["vms"].failed, by["vms"].changed, by["vms"].tasks),
            (1, 0, 1)
        );
        assert_eq!(by["vms"].result(), PhaseResult::Failed);
        assert_eq!(by["install"].result(), PhaseResult::NotRun);
        assert_eq!(
            t.failures(),
            &[Failure {
                phase: "vms".into(),
                task: "cluster_vms : Create the VMs".into(),
                host: "localhost".into(),
                item: Some("lab-sno-1".into()),
                message: "node pve9 is offline".into(),
                unreachable: false
            }]
        );
        assert_eq!(t.recap().len(), 1);
        assert_eq!(t.recap()[0].failed, 1);
        assert_eq!(
            t.plays(),
            &["Provision an OpenShift cluster on Proxmox VE".to_string()]
        );
        // Order: setup, then the planned phases in site order.
        let names: Vec<String> = t.phases().iter().map(|p| p.name.clone()).collect();
        assert_eq!(names[0], "setup");
        assert_eq!(names[1..], crate::plan::SITE_PHASES.map(String::from));
    }

    #[test]
    fn a_failure_printed_over_several_lines_keeps_its_message() {
        // A real rehearsal's output (tests/fixtures): the preflight assert's result spans lines.
        let run = include_str!("../tests/fixtures/rehearse-preflight-dns.txt");
        let mut t = Tracker::new(&planned(&["preflight", "manifests", "vms", "start"]));
        for l in run.lines() {
            t.feed(l);
        }
        t.finish();
        let [f] = t.failures() else {
            panic!("one failure expected: {:#?}", t.failures());
        };
        assert_eq!(f.phase, "preflight");
        assert_eq!(f.task, "Preflight — report every problem at once");
        assert!(
            f.message
                .starts_with("Preflight found 2 problem(s):\n- DNS: api.lab-sno."),
            "{}",
            f.message
        );
        let listed = f.listed_problems();
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert!(listed
            .iter()
            .all(|p| p.starts_with("DNS: ") && p.ends_with("add the record to your DNS.")));
        // The JSON body was read as the result, not as output lines.
        assert_eq!(t.recap()[0].failed, 1);
    }

    #[test]
    fn progress_follows_the_run() {
        let mut t = Tracker::new(&planned(&["preflight", "secrets", "manifests"]));
        let p = t.progress(Duration::from_secs(3));
        assert_eq!(p.phase, None);
        assert_eq!(p.pending, planned(&["preflight", "secrets", "manifests"]));
        assert_eq!(
            render_progress(&p, 80),
            "[starting] · 00:03 · next: preflight, secrets, manifests"
        );
        t.feed("TASK [proxshift.hashi_vault.secrets : Read the secrets from Vault] ***");
        let p = t.progress(Duration::from_secs(75));
        assert_eq!(p.phase.as_deref(), Some("secrets"));
        assert_eq!(p.position, Some((2, 3)));
        assert_eq!(
            p.task.as_deref(),
            Some("secrets : Read the secrets from Vault")
        );
        assert_eq!(p.pending, planned(&["manifests"]));
        assert_eq!(
            render_progress(&p, 200),
            "[2/3 secrets] secrets : Read the secrets from Vault · 01:15 · next: manifests"
        );
        // Narrow terminals: the task name is shortened, the line never exceeds the width.
        let narrow = render_progress(&p, 40);
        assert_eq!(narrow.chars().count(), 40);
        assert!(
            narrow.starts_with("[2/3 secrets] sec") && narrow.contains('…'),
            "{narrow}"
        );
        // An unplaceable task after a phase stays in that phase.
        t.feed("ok: [localhost]");
        t.feed("TASK [Note the secrets] ***");
        assert_eq!(t.progress(Duration::ZERO).phase.as_deref(), Some("secrets"));
        t.feed("fatal: [localhost]: FAILED! => {\"msg\": \"x\"}");
        assert!(render_progress(&t.progress(Duration::ZERO), 80).starts_with("[2/3 secrets] !"));
    }

    #[test]
    fn single_phase_playbooks_and_multiple_recaps() {
        let mut t = Tracker::new(&planned(&["stop"]));
        for l in [
            "PLAY [Stop] ***",
            "TASK [Build the cluster model] ***",
            "ok: [localhost]",
            "TASK [proxshift.proxmox.cluster_power : Stop the VMs] ***",
            "changed: [localhost]",
            "PLAY RECAP ***",
            "localhost : ok=2 changed=1 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0",
            "pve1 : ok=1 changed=0 unreachable=1 failed=0 skipped=0 rescued=0 ignored=0",
        ] {
            t.feed(l);
        }
        t.finish();
        let ph = t.phases();
        assert_eq!(ph.len(), 1);
        assert_eq!(
            (ph[0].name.as_str(), ph[0].ok, ph[0].changed),
            ("stop", 1, 1)
        );
        assert_eq!(t.recap().len(), 2);
        assert_eq!(t.recap()[1].unreachable, 1);
    }

    #[test]
    fn tags_from_the_callback_win_over_role_names() {
        let mut t = Tracker::new(&planned(&crate::plan::SITE_PHASES));
        for l in [
            "TASK [proxshift.hashi_vault.secrets : Read the secrets from Vault] ***",
            "##proxshift-tags [\"manifests\", \"preflight\", \"secrets\", \"iso\"]",
            "ok: [localhost]",
            // Preflight imports the manifests and cluster_vms roles in check-only mode.
            "TASK [proxshift.openshift.manifests : Render and validate the manifests] ***",
            "##proxshift-tags [\"preflight\"]",
            "ok: [localhost]",
            "TASK [proxshift.proxmox.cluster_vms : Converge the cluster's VMs] ***",
            "##proxshift-tags [\"preflight\"]",
            "ok: [localhost]",
            "TASK [proxshift.openshift.manifests : Render and validate the manifests] ***",
            "##proxshift-tags [\"manifests\", \"iso\"]",
            "changed: [localhost]",
            "TASK [Build the cluster model] ***",
            "##proxshift-tags [\"always\"]",
            "ok: [localhost]",
        ] {
            t.feed(l);
        }
        t.finish();
        let by: BTreeMap<String, PhaseStats> = t
            .phases()
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        assert_eq!(
            (
                by["secrets"].ok,
                by["preflight"].ok,
                by["manifests"].changed
            ),
            (1, 2, 1)
        );
        assert_eq!(by["vms"].tasks, 0);
        // An `always` task keeps the phase its name gives (here none: the last phase).
        assert_eq!(by["manifests"].ok, 1);
        // Only iso planned: the same role counts as iso.
        let mut t = Tracker::new(&planned(&["iso"]));
        t.feed("TASK [proxshift.openshift.manifests : Render and validate the manifests] ***");
        t.feed("##proxshift-tags [\"manifests\", \"iso\"]");
        assert_eq!(t.progress(Duration::ZERO).phase.as_deref(), Some("iso"));
    }

    #[test]
    fn phase_from_tag_sets() {
        let all = planned(&crate::plan::SITE_PHASES);
        let tags = |t: &[&str]| planned(t);
        // Order of the tags does not matter; the role's phase wins when the task carries it.
        let secrets = tags(&["manifests", "iso", "secrets", "preflight"]);
        assert_eq!(
            phase_from_tags(&secrets, "secrets", &all).as_deref(),
            Some("secrets")
        );
        assert_eq!(
            phase_from_tags(&tags(&["preflight"]), "manifests", &all).as_deref(),
            Some("preflight")
        );
        assert_eq!(
            phase_from_tags(&tags(&["iso", "manifests"]), "iso", &all).as_deref(),
            Some("iso")
        );
        // Unknown role: the earliest planned phase among the tags.
        assert_eq!(
            phase_from_tags(&secrets, "setup", &all).as_deref(),
            Some("preflight")
        );
        assert_eq!(
            phase_from_tags(&secrets, "setup", &tags(&["iso"])).as_deref(),
            Some("iso")
        );
        assert_eq!(phase_from_tags(&tags(&["always"]), "setup", &all), None);
        assert_eq!(
            phase_from_tags(&tags(&["vms"]), "setup", &tags(&["acm"])).as_deref(),
            Some("vms")
        );
    }

    #[test]
    fn elapsed_format() {
        assert_eq!(format_elapsed(Duration::from_secs(5)), "00:05");
        assert_eq!(format_elapsed(Duration::from_secs(3725)), "1:02:05");
    }
}
