//! What the CLI prints: the clusters table, dry-run output and the end-of-run summary, each as text
//! (for people) or JSON (`--json`, one object on stdout). Pure.

use serde::Serialize;
use serde_json::{json, Value};

use crate::command::Command;
use crate::exit::CliError;
use crate::inventory::{Cluster, Role};
use crate::live::{cluster_summary, LiveReport};
use crate::output::HostRecap;
use crate::plan::Plan;
use crate::style::{paint, Style};
use crate::table::{Cell, Table};
use crate::tracker::{format_elapsed, Failure, PhaseResult, PhaseStats};

fn state_style(state: &str, owned: bool) -> Style {
    match state {
        _ if !owned && state != "absent" => Style::Red,
        "running" => Style::Green,
        "absent" => Style::Dim,
        _ => Style::Yellow,
    }
}

/// The clusters table (one row per cluster) and, with `hosts`, one row per node.
pub fn clusters_text(clusters: &[Cluster], live: &LiveReport, hosts: bool, colour: bool) -> String {
    if clusters.is_empty() {
        return "No clusters in the inventory (define them under all.children.clusters.children).\n"
            .into();
    }
    let with_live = live.status == "ok";
    let mut head = vec!["CLUSTER", "TOPOLOGY", "HOSTS", "VERSION", "BASE DOMAIN"];
    if with_live {
        head.push("VMS");
    }
    let mut t = Table::new(head);
    for c in clusters {
        let topo = if c.topology == crate::inventory::Topology::Invalid {
            Cell::styled(c.topology.label(), Style::Red)
        } else {
            c.topology.label().into()
        };
        let mut row: Vec<Cell> = vec![
            Cell::styled(c.name.clone(), Style::Bold),
            topo,
            format!("{} ({}m+{}w)", c.hosts.len(), c.masters, c.workers).into(),
            c.version.clone().unwrap_or_else(|| "-".into()).into(),
            c.base_domain.clone().unwrap_or_else(|| "-".into()).into(),
        ];
        if with_live {
            row.push(cluster_summary(c).unwrap_or_else(|| "-".into()).into());
        }
        t.row(row);
    }
    let mut out = t.render(colour);
    if hosts {
        let mut head = vec!["CLUSTER", "HOST", "ROLE", "IP", "MAC", "PVE NODE", "VMID"];
        if with_live {
            head.push("STATE");
        }
        let mut t = Table::new(head);
        for c in clusters {
            for h in &c.hosts {
                let role = match (h.role, h.role_derived) {
                    (Role::Master, false) => "master",
                    (Role::Worker, false) => "worker",
                    (Role::Master, true) => "master*",
                    (Role::Worker, true) => "worker*",
                };
                let live = h.live.as_ref();
                let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
                let mut row: Vec<Cell> = vec![
                    c.name.clone().into(),
                    h.name.clone().into(),
                    role.into(),
                    opt(h.ip.clone()).into(),
                    opt(h.mac.clone()).into(),
                    opt(h
                        .pve_node
                        .clone()
                        .or_else(|| live.and_then(|l| l.node.clone())))
                    .into(),
                    opt(h
                        .vmid
                        .or_else(|| live.and_then(|l| l.vmid))
                        .map(|v| v.to_string()))
                    .into(),
                ];
                if let Some(l) = live {
                    let text = if l.owned || l.state == "absent" {
                        l.state.clone()
                    } else {
                        format!("{} (not owned)", l.state)
                    };
                    row.push(Cell::styled(text, state_style(&l.state, l.owned)));
                }
                t.row(row);
            }
        }
        out.push('\n');
        out.push_str(&t.render(colour));
        out.push_str("* role derived from the host's position (no `role` in the inventory)\n");
    }
    match (live.status.as_str(), &live.message) {
        ("ok", _) => {}
        (_, Some(m)) => out.push_str(&paint(
            &format!("Live VM states: {} — {m}\n", live.status),
            Style::Dim,
            colour,
        )),
        _ => {}
    }
    out
}

pub fn clusters_json(clusters: &[Cluster], live: &LiveReport) -> Value {
    json!({"clusters": clusters, "live": live})
}

/// `--dry-run`: the exact command, nothing else (text) or the plan with it (JSON).
pub fn dry_run_text(cmd: &Command) -> String {
    format!("{}\n", cmd.shell())
}

pub fn dry_run_json(plan: Option<&Plan>, cmd: &Command) -> Value {
    let mut v = json!({
        "dry_run": true,
        "command": cmd.shell(),
        "argv": cmd.argv(),
    });
    if let Some(p) = plan {
        v["plan"] = json!({
            "command": p.command,
            "playbook": p.playbook,
            "cluster": p.cluster,
            "tags": p.tags,
            "skip_tags": p.skip_tags,
            "extra_vars": p.extra_vars.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "phases": p.phases,
        });
    }
    v
}

/// The outcome of one playbook run.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub argv: Vec<String>,
    /// `ok`, `failed` or `interrupted`.
    pub status: String,
    /// `ansible-playbook`'s exit code (None when it was killed by a signal).
    pub ansible_rc: Option<i32>,
    /// This command's exit code.
    pub exit_code: i32,
    pub elapsed_seconds: f64,
    pub phases: Vec<PhaseSummary>,
    pub recap: Vec<HostRecap>,
    pub failures: Vec<Failure>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseSummary {
    pub name: String,
    pub result: PhaseResult,
    pub tasks: u32,
    pub ok: u32,
    pub changed: u32,
    pub failed: u32,
    pub skipped: u32,
    pub ignored: u32,
    pub unreachable: u32,
}

impl From<&PhaseStats> for PhaseSummary {
    fn from(p: &PhaseStats) -> Self {
        PhaseSummary {
            name: p.name.clone(),
            result: p.result(),
            tasks: p.tasks,
            ok: p.ok,
            changed: p.changed,
            failed: p.failed,
            skipped: p.skipped,
            ignored: p.ignored,
            unreachable: p.unreachable,
        }
    }
}

fn result_style(r: PhaseResult) -> Style {
    match r {
        PhaseResult::Failed => Style::Red,
        PhaseResult::Changed => Style::Yellow,
        PhaseResult::Ok => Style::Green,
        PhaseResult::Skipped | PhaseResult::NotRun => Style::Dim,
    }
}

pub fn summary_text(s: &RunSummary, colour: bool) -> String {
    let what = match &s.cluster {
        Some(c) => format!("{} {c}", s.command),
        None => s.command.clone(),
    };
    let elapsed = format_elapsed(std::time::Duration::from_secs_f64(s.elapsed_seconds));
    let verdict = match s.status.as_str() {
        "ok" => paint("succeeded", Style::Green, colour),
        "interrupted" => paint("was interrupted", Style::Yellow, colour),
        _ => paint("FAILED", Style::Red, colour),
    };
    let rc = match s.ansible_rc {
        Some(0) => String::new(),
        Some(rc) => format!(" (ansible-playbook exit {rc})"),
        None => " (ansible-playbook killed by a signal)".into(),
    };
    let mut out = format!(
        "\n{} {what} {verdict} after {elapsed}{rc}\n",
        paint("proxshift", Style::Bold, colour)
    );
    if !s.phases.is_empty() {
        let mut t = Table::new(["PHASE", "RESULT", "OK", "CHANGED", "FAILED", "SKIPPED"])
            .right_align(&[2, 3, 4, 5]);
        for p in &s.phases {
            t.row(vec![
                p.name.clone().into(),
                Cell::styled(p.result.label(), result_style(p.result)),
                (p.ok + p.ignored).to_string().into(),
                p.changed.to_string().into(),
                (p.failed + p.unreachable).to_string().into(),
                p.skipped.to_string().into(),
            ]);
        }
        out.push_str(&t.render(colour));
    }
    for r in &s.recap {
        out.push_str(&format!(
            "Recap {}: ok={} changed={} unreachable={} failed={} skipped={} rescued={} ignored={}\n",
            r.host, r.ok, r.changed, r.unreachable, r.failed, r.skipped, r.rescued, r.ignored
        ));
    }
    for f in &s.failures {
        let item = f
            .item
            .as_ref()
            .map(|i| format!(" (item={i})"))
            .unwrap_or_default();
        out.push_str(&paint(
            &format!(
                "Failed [{}] {} on {}{item}: {}\n",
                f.phase, f.task, f.host, f.message
            ),
            Style::Red,
            colour,
        ));
    }
    out
}

/// An error as one JSON object (`--json`), so scripts always get JSON on stdout.
pub fn error_json(e: &CliError) -> Value {
    json!({"error": {"kind": e.kind(), "exit_code": e.code, "message": e.message}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory;
    use crate::live::{attach, LiveVm};
    use crate::plan::{plan, playbook_command, Action, RunOptions};
    use crate::tracker::Tracker;

    fn inv() -> Vec<Cluster> {
        inventory::parse(&inventory::tests::example())
            .unwrap()
            .clusters
    }

    #[test]
    fn clusters_table_without_live_states() {
        let out = clusters_text(
            &inv(),
            &LiveReport::disabled("no Proxmox credentials"),
            false,
            false,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "CLUSTER      TOPOLOGY  HOSTS      VERSION  BASE DOMAIN"
        );
        assert_eq!(
            lines[1],
            "lab-compact  compact   3 (3m+0w)  4.19     lab.example.com"
        );
        assert_eq!(
            lines[2],
            "prod-ha      HA        4 (3m+1w)  4.19     example.com"
        );
        assert_eq!(
            lines[3],
            "lab-sno      SNO       1 (1m+0w)  4.19     lab.example.com"
        );
        assert_eq!(
            lines[4],
            "Live VM states: disabled — no Proxmox credentials"
        );
        assert!(!out.contains('\u{1b}'));
    }

    #[test]
    fn clusters_table_with_live_states_and_hosts() {
        let mut cs = inv();
        attach(
            &mut cs,
            &[LiveVm {
                vmid: 3100,
                name: Some("lab-sno-0".into()),
                node: "pve1".into(),
                status: Some("running".into()),
                tags: vec!["proxshift-lab-sno".into()],
            }],
        );
        let live = LiveReport {
            status: "ok".into(),
            source: Some("x".into()),
            message: None,
        };
        let out = clusters_text(&cs, &live, true, false);
        assert!(
            out.lines()
                .next()
                .unwrap()
                .ends_with("BASE DOMAIN      VMS"),
            "{out}"
        );
        assert!(
            out.contains("lab-sno      SNO       1 (1m+0w)  4.19     lab.example.com  1 running"),
            "{out}"
        );
        assert!(
            out.contains("lab-compact  compact   3 (3m+0w)  4.19     lab.example.com  absent"),
            "{out}"
        );
        let host_line = out.lines().find(|l| l.contains("lab-sno-0")).unwrap();
        assert_eq!(
            host_line,
            "lab-sno      lab-sno-0         master*  10.20.0.11  BC:24:11:20:00:11  pve1      3100  running"
        );
        assert!(out.contains("* role derived"));
        let coloured = clusters_text(&cs, &live, true, true);
        assert!(coloured.contains("\u{1b}[32mrunning\u{1b}[0m"));
    }

    #[test]
    fn clusters_json_shape() {
        let v = clusters_json(&inv(), &LiveReport::disabled("x"));
        assert_eq!(v["clusters"][2]["name"], "lab-sno");
        assert_eq!(v["clusters"][2]["topology"], "sno");
        assert_eq!(v["clusters"][1]["hosts"][3]["role"], "worker");
        assert_eq!(v["clusters"][0]["version"], "4.19");
        assert_eq!(v["live"]["status"], "disabled");
        assert!(v["clusters"][2]["hosts"][0].get("live").is_none());
    }

    #[test]
    fn dry_run_outputs() {
        let p = plan(&Action::Manifests, Some("lab-sno")).unwrap();
        let o = RunOptions {
            program: "ansible-playbook".into(),
            inventory: "inventory/".into(),
            playbooks_dir: "playbooks".into(),
            ..Default::default()
        };
        let cmd = playbook_command(&p, &o);
        assert_eq!(
            dry_run_text(&cmd),
            "ansible-playbook -i inventory/ playbooks/site.yaml -e cluster_name=lab-sno --tags preflight,secrets,manifests\n"
        );
        let v = dry_run_json(Some(&p), &cmd);
        assert_eq!(v["dry_run"], true);
        assert_eq!(v["argv"][0], "ansible-playbook");
        assert_eq!(v["argv"].as_array().unwrap().len(), 8);
        assert_eq!(
            v["plan"]["tags"],
            json!(["preflight", "secrets", "manifests"])
        );
        assert_eq!(v["plan"]["cluster"], "lab-sno");
        let p = plan(&Action::Deprovision { vault: true }, Some("x")).unwrap();
        let v = dry_run_json(Some(&p), &playbook_command(&p, &o));
        assert_eq!(
            v["plan"]["extra_vars"],
            json!({"deprovision_vault": "true"})
        );
    }

    #[test]
    fn run_summary_text_and_json() {
        let mut t = Tracker::new(&["acm".to_string(), "credentials".to_string()]);
        for l in [
            "TASK [Build the cluster model] ***",
            "ok: [localhost]",
            "TASK [proxshift.openshift.acm : Import] ***",
            "fatal: [localhost]: FAILED! => {\"msg\": \"hub unreachable\"}",
            "PLAY RECAP ***",
            "localhost : ok=1 changed=0 unreachable=0 failed=1 skipped=0 rescued=0 ignored=0",
        ] {
            t.feed(l);
        }
        t.finish();
        let s = RunSummary {
            command: "acm-import".into(),
            cluster: Some("lab-sno".into()),
            argv: vec!["ansible-playbook".into()],
            status: "failed".into(),
            ansible_rc: Some(2),
            exit_code: 1,
            elapsed_seconds: 61.0,
            phases: t.phases().iter().map(PhaseSummary::from).collect(),
            recap: t.recap().to_vec(),
            failures: t.failures().to_vec(),
        };
        let text = summary_text(&s, false);
        assert!(
            text.contains(
                "proxshift acm-import lab-sno FAILED after 01:01 (ansible-playbook exit 2)"
            ),
            "{text}"
        );
        assert!(
            text.contains("PHASE        RESULT   OK  CHANGED  FAILED  SKIPPED\n"),
            "{text}"
        );
        assert!(
            text.contains("setup        ok        1        0       0        0\n"),
            "{text}"
        );
        assert!(
            text.contains("acm          failed    0        0       1        0\n"),
            "{text}"
        );
        assert!(
            text.contains("credentials  not run   0        0       0        0\n"),
            "{text}"
        );
        assert!(text.contains("Recap localhost: ok=1 changed=0 unreachable=0 failed=1"));
        assert!(text.contains("Failed [acm] acm : Import on localhost: hub unreachable"));
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["phases"][1]["name"], "acm");
        assert_eq!(v["phases"][1]["result"], "failed");
        assert_eq!(v["phases"][2]["result"], "not_run");
        assert_eq!(v["recap"][0]["failed"], 1);
        assert_eq!(v["failures"][0]["message"], "hub unreachable");
        assert_eq!(v["exit_code"], 1);
    }

    #[test]
    fn errors_as_json() {
        let v = error_json(&CliError::tool("ansible-playbook not found"));
        assert_eq!(
            v,
            json!({"error": {"kind": "tool_not_found", "exit_code": 4, "message": "ansible-playbook not found"}})
        );
    }
}
