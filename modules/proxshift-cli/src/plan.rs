//! What each subcommand runs: the playbook, tags, extra vars and the phases to expect — and the
//! `ansible-playbook` command line built from that. Pure: no I/O.

use serde::Serialize;

use crate::command::Command;
use crate::exit::CliError;

/// The phases of `playbooks/site.yaml`, in the order it runs them (each is also its tag).
pub const SITE_PHASES: [&str; 13] = [
    "preflight",
    "secrets",
    "manifests",
    "iso",
    "vms",
    "start",
    "install",
    "credentials",
    "acm",
    "post",
    "external_secrets",
    "gitops",
    "upgrade",
];

/// A subcommand that runs a playbook, with its own options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `site.yaml`, every phase (or `only`, minus `skip`); `force` rebuilds the cluster.
    Provision {
        force: bool,
        only: Vec<String>,
        skip: Vec<String>,
    },
    /// `site.yaml --tags preflight,secrets,manifests`.
    Manifests,
    /// `start.yaml`; `recover` restarts the OpenShift way without a shutdown note.
    Start {
        recover: bool,
    },
    /// `stop.yaml`: the planned days down, the kubelet CA check's override, drain, hard stop.
    Stop {
        max_days: Option<u32>,
        ignore_certificate_expiry: bool,
        drain: bool,
        hard: bool,
    },
    /// `restore_point.yaml`: the snapshot's name, how many restore points to keep, whether to start again;
    /// with `etcd`, `etcd_backup.yaml`: the backup's name and how many to keep.
    Backup {
        name: Option<String>,
        keep: Option<u32>,
        stay_stopped: bool,
        etcd: bool,
    },
    /// `restore.yaml`: the restore point to roll back to (the record's newest when not given).
    Restore {
        restore_point: Option<String>,
    },
    Status,
    /// `deprovision.yaml`; `vault` also removes the cluster's Vault entry.
    Deprovision {
        vault: bool,
    },
    /// `scale.yaml`: join new hosts; `remove` and `replace` name nodes to remove or replace.
    Scale {
        remove: Vec<String>,
        replace: Vec<String>,
    },
    /// `remediate.yaml`: MachineHealthCheck-style remediation of unhealthy nodes.
    Remediate {
        max_unhealthy: Option<String>,
        unhealthy_timeout: Option<u64>,
    },
    /// `site.yaml --tags acm`.
    AcmImport,
    /// `certs.yaml`: the kept certificates' report, warning `warn_days` before expiry.
    Certs {
        warn_days: u32,
    },
    /// `proxmox_access.yaml`: site-wide, takes no cluster.
    ProxmoxAccess,
}

/// Everything needed to build and describe one playbook run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The subcommand, e.g. `provision`.
    pub command: &'static str,
    /// File name under `playbooks/`.
    pub playbook: &'static str,
    pub cluster: Option<String>,
    pub tags: Vec<String>,
    pub skip_tags: Vec<String>,
    /// `-e key=value` pairs after `cluster_name`, in order.
    pub extra_vars: Vec<(String, String)>,
    /// The phases the run goes through, in order (progress and summary rows).
    pub phases: Vec<String>,
    /// Why the run destroys something and needs confirmation (`--yes`), if it does.
    pub destructive: Option<String>,
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Provision { .. } => "provision",
            Action::Manifests => "manifests",
            Action::Start { .. } => "start",
            Action::Stop { .. } => "stop",
            Action::Backup { .. } => "backup",
            Action::Restore { .. } => "restore",
            Action::Status => "status",
            Action::Deprovision { .. } => "deprovision",
            Action::Scale { .. } => "scale",
            Action::Remediate { .. } => "remediate",
            Action::AcmImport => "acm-import",
            Action::Certs { .. } => "certs",
            Action::ProxmoxAccess => "proxmox-access",
        }
    }

    pub fn needs_cluster(&self) -> bool {
        !matches!(self, Action::ProxmoxAccess)
    }
}

/// Check a cluster name before it goes into `-e cluster_name=…` (Ansible splits `k=v` on spaces).
/// OpenShift's own rules (a DNS label) are the flow's preflight job; this only keeps the argument intact.
pub fn check_cluster_name(name: &str) -> Result<(), CliError> {
    if name.is_empty() {
        return Err(CliError::usage("the cluster name is empty"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c)))
    {
        return Err(CliError::usage(format!(
            "cluster name '{name}' contains {c:?}: use the inventory group name (letters, digits, '-', '_', '.')"
        )));
    }
    Ok(())
}

/// Parse `--only`/`--skip` values (`a,b` or repeated) into known site phases, in site order.
pub fn parse_phases(values: &[String], option: &str) -> Result<Vec<String>, CliError> {
    let mut wanted = Vec::new();
    for v in values.iter().flat_map(|v| v.split(',')) {
        let v = v.trim();
        if v.is_empty() {
            continue;
        }
        if !SITE_PHASES.contains(&v) {
            return Err(CliError::usage(format!(
                "{option}: unknown phase '{v}' (phases: {})",
                SITE_PHASES.join(", ")
            )));
        }
        wanted.push(v.to_string());
    }
    Ok(SITE_PHASES
        .iter()
        .filter(|p| wanted.iter().any(|w| w == *p))
        .map(|p| p.to_string())
        .collect())
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The plan for `action` on `cluster`.
pub fn plan(action: &Action, cluster: Option<&str>) -> Result<Plan, CliError> {
    let cluster = if action.needs_cluster() {
        let name = cluster.ok_or_else(|| {
            CliError::usage(format!(
                "{} needs a cluster name (see `proxshift clusters`)",
                action.name()
            ))
        })?;
        check_cluster_name(name)?;
        Some(name.to_string())
    } else {
        None
    };
    let mut p = Plan {
        command: action.name(),
        playbook: "site.yaml",
        cluster: cluster.clone(),
        tags: Vec::new(),
        skip_tags: Vec::new(),
        extra_vars: Vec::new(),
        phases: Vec::new(),
        destructive: None,
    };
    let name = cluster.unwrap_or_default();
    match action {
        Action::Provision { force, only, skip } => {
            let only = parse_phases(only, "--only")?;
            let skip = parse_phases(skip, "--skip")?;
            p.phases = SITE_PHASES
                .iter()
                .map(|s| s.to_string())
                .filter(|s| only.is_empty() || only.contains(s))
                .filter(|s| !skip.contains(s))
                .collect();
            if p.phases.is_empty() {
                return Err(CliError::usage("--only/--skip leave no phase to run"));
            }
            p.tags = only;
            p.skip_tags = skip;
            if *force {
                p.extra_vars.push(("force_install".into(), "true".into()));
                p.destructive = Some(format!(
                    "--force deletes cluster {name}'s VMs and installs it again"
                ));
            }
        }
        Action::Manifests => {
            p.tags = strings(&["preflight", "secrets", "manifests"]);
            p.phases = p.tags.clone();
        }
        Action::AcmImport => {
            p.tags = strings(&["acm"]);
            p.phases = p.tags.clone();
        }
        Action::Start { recover } => {
            single(&mut p, "start.yaml", "start");
            if *recover {
                p.extra_vars.push(("start_recover".into(), "true".into()));
            }
        }
        Action::Stop {
            max_days,
            ignore_certificate_expiry,
            drain,
            hard,
        } => {
            single(&mut p, "stop.yaml", "stop");
            if let Some(d) = max_days {
                p.extra_vars.push(("stop_max_days".into(), d.to_string()));
            }
            for (on, var) in [
                (*ignore_certificate_expiry, "proxshift_stop_force"),
                (*drain, "stop_drain"),
                (*hard, "force"),
            ] {
                if on {
                    p.extra_vars.push((var.into(), "true".into()));
                }
            }
        }
        Action::Backup {
            name,
            keep,
            etcd: true,
            ..
        } => {
            single(&mut p, "etcd_backup.yaml", "etcd backup");
            if let Some(n) = name {
                let n = snapshot_name(n, "--name")?;
                p.extra_vars.push(("etcd_backup_name".into(), n));
            }
            if let Some(k) = keep {
                p.extra_vars
                    .push(("etcd_backup_keep".into(), k.to_string()));
            }
        }
        Action::Backup {
            name: snapname,
            keep,
            stay_stopped,
            etcd: false,
        } => {
            single(&mut p, "restore_point.yaml", "backup");
            if let Some(n) = snapname {
                let n = snapshot_name(n, "--name")?;
                p.extra_vars.push(("restore_point_name".into(), n));
            }
            if let Some(k) = keep {
                p.extra_vars
                    .push(("restore_point_keep".into(), k.to_string()));
            }
            if *stay_stopped {
                p.extra_vars
                    .push(("restore_point_start".into(), "false".into()));
            }
        }
        Action::Restore { restore_point } => {
            single(&mut p, "restore.yaml", "restore");
            let which = match restore_point {
                Some(n) => {
                    let n = snapshot_name(n, "--restore-point")?;
                    p.extra_vars.push(("restore_point".into(), n.clone()));
                    format!("restore point {n}")
                }
                None => "its newest restore point".to_string(),
            };
            p.destructive = Some(format!(
                "restore rolls cluster {name}'s VMs back to {which}: everything since is lost"
            ));
        }
        Action::Status => single(&mut p, "status.yaml", "status"),
        Action::Scale { remove, replace } => {
            single(&mut p, "scale.yaml", "scale");
            for (var, names) in [("remove_nodes", remove), ("replace_nodes", replace)] {
                let names = node_names(names, var)?;
                if !names.is_empty() {
                    p.extra_vars.push((var.into(), names.join(",")));
                }
            }
            if !remove.is_empty() || !replace.is_empty() {
                p.destructive = Some(format!(
                    "scale drains and deletes node(s) {} of cluster {name} and their VMs",
                    remove
                        .iter()
                        .chain(replace)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Action::Remediate {
            max_unhealthy,
            unhealthy_timeout,
        } => {
            single(&mut p, "remediate.yaml", "remediate");
            if let Some(m) = max_unhealthy {
                p.extra_vars
                    .push(("remediate_max_unhealthy".into(), m.clone()));
            }
            if let Some(t) = unhealthy_timeout {
                p.extra_vars
                    .push(("remediate_unhealthy_timeout".into(), t.to_string()));
            }
        }
        Action::Certs { warn_days } => {
            single(&mut p, "certs.yaml", "certs");
            p.extra_vars
                .push(("certificate_warning_days".into(), warn_days.to_string()));
        }
        Action::Deprovision { vault } => {
            single(&mut p, "deprovision.yaml", "deprovision");
            let mut what = format!("deprovision stops and deletes cluster {name}'s VMs");
            if *vault {
                p.extra_vars
                    .push(("deprovision_vault".into(), "true".into()));
                what.push_str(" and removes its Vault entry");
            }
            p.destructive = Some(what);
        }
        Action::ProxmoxAccess => single(&mut p, "proxmox_access.yaml", "proxmox-access"),
    }
    Ok(p)
}

/// Node names for `-e var=a,b`: no empty name, no comma or space inside one.
fn node_names(values: &[String], var: &str) -> Result<Vec<String>, CliError> {
    let mut out = Vec::new();
    for v in values.iter().flat_map(|v| v.split(',')) {
        let v = v.trim();
        if v.is_empty() {
            continue;
        }
        if v.contains(char::is_whitespace) || v.contains('=') {
            return Err(CliError::usage(format!("{var}: '{v}' is not a node name")));
        }
        out.push(v.to_string());
    }
    Ok(out)
}

/// A snapshot name as Proxmox takes it (`pve-configid`: a letter, then letters, digits, `-`, `_`), so it
/// goes into `-e k=v` intact; `proxmox_snap` checks the rest of PVE's rules.
fn snapshot_name(value: &str, flag: &str) -> Result<String, CliError> {
    let v = value.trim();
    let mut chars = v.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(CliError::usage(format!(
            "{flag} '{value}' is not a Proxmox snapshot name: a letter, then letters, digits, '-' or '_'"
        )));
    }
    Ok(v.to_string())
}

fn single(p: &mut Plan, playbook: &'static str, phase: &str) {
    p.playbook = playbook;
    p.phases = vec![phase.to_string()];
}

/// How to run a plan: which program, where things are, and the pass-through flags.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunOptions {
    /// `ansible-playbook`, or the path found for it.
    pub program: String,
    /// The inventory as given (`inventory/` by default).
    pub inventory: String,
    /// The playbooks folder as it should appear in the command (`playbooks` or an absolute path).
    pub playbooks_dir: String,
    pub check: bool,
    pub diff: bool,
    /// `-v` count passed through.
    pub verbosity: u8,
    /// Arguments after `--`, passed through unchanged at the end.
    pub extra: Vec<String>,
    /// Environment for the run (shown in the printed command).
    pub env: Vec<(String, String)>,
}

/// Ansible's default collection paths, kept after ours so installed collections still resolve.
const DEFAULT_COLLECTIONS: &str = "~/.ansible/collections:/usr/share/ansible/collections";

/// `ANSIBLE_COLLECTIONS_PATH` so ansible-playbook finds the checkout's `ansible_collections/proxshift`
/// from any working directory — unless the user already set one (then theirs is used as is). The
/// order is `ansible.cfg`'s: the built checkout (`build/collections`, which `make build` links) first,
/// installed collections next, the bare checkout last (its modules then fail saying how to build).
pub fn collections_env(project_root: &str, current: Option<&str>) -> Option<(String, String)> {
    if current.is_some_and(|c| !c.is_empty()) {
        return None;
    }
    Some((
        "ANSIBLE_COLLECTIONS_PATH".into(),
        format!("{project_root}/build/collections:{DEFAULT_COLLECTIONS}:{project_root}"),
    ))
}

/// The playbook's path as it appears in the command.
pub fn playbook_path(plan: &Plan, opts: &RunOptions) -> String {
    let dir = opts.playbooks_dir.trim_end_matches('/');
    if dir.is_empty() {
        plan.playbook.to_string()
    } else {
        format!("{dir}/{}", plan.playbook)
    }
}

/// `ansible-playbook -i INV playbooks/X.yaml -e cluster_name=C [-e k=v]… [--tags …] [--skip-tags …]
/// [--check] [--diff] [-v…] [extra…]`.
pub fn playbook_command(plan: &Plan, opts: &RunOptions) -> Command {
    let mut cmd = Command::new(&opts.program);
    for (k, v) in &opts.env {
        cmd = cmd.env(k, v);
    }
    let mut cmd = cmd
        .arg("-i")
        .arg(&opts.inventory)
        .arg(playbook_path(plan, opts));
    if let Some(c) = &plan.cluster {
        cmd = cmd.arg("-e").arg(format!("cluster_name={c}"));
    }
    for (k, v) in &plan.extra_vars {
        cmd = cmd.arg("-e").arg(format!("{k}={v}"));
    }
    if !plan.tags.is_empty() {
        cmd = cmd.arg("--tags").arg(plan.tags.join(","));
    }
    if !plan.skip_tags.is_empty() {
        cmd = cmd.arg("--skip-tags").arg(plan.skip_tags.join(","));
    }
    if opts.check {
        cmd = cmd.arg("--check");
    }
    if opts.diff {
        cmd = cmd.arg("--diff");
    }
    if opts.verbosity > 0 {
        cmd = cmd.arg(format!("-{}", "v".repeat(opts.verbosity.min(6) as usize)));
    }
    cmd.args(opts.extra.iter().cloned())
}

/// `ansible-inventory -i INV --list`: the only way the CLI reads the inventory.
pub fn inventory_command(program: &str, inventory: &str) -> Command {
    Command::new(program).arg("-i").arg(inventory).arg("--list")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> RunOptions {
        RunOptions {
            program: "ansible-playbook".into(),
            inventory: "inventory/".into(),
            playbooks_dir: "playbooks".into(),
            ..Default::default()
        }
    }

    fn shell(action: Action, cluster: Option<&str>, o: &RunOptions) -> String {
        playbook_command(&plan(&action, cluster).unwrap(), o).shell()
    }

    #[test]
    fn every_subcommand_builds_its_command() {
        let o = opts();
        let base = "ansible-playbook -i inventory/ playbooks";
        let cases = [
            (
                Action::Provision {
                    force: false,
                    only: vec![],
                    skip: vec![],
                },
                format!("{base}/site.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Manifests,
                format!(
                    "{base}/site.yaml -e cluster_name=lab-sno --tags preflight,secrets,manifests"
                ),
            ),
            (
                Action::Start { recover: false },
                format!("{base}/start.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Start { recover: true },
                format!("{base}/start.yaml -e cluster_name=lab-sno -e start_recover=true"),
            ),
            (
                Action::Stop { max_days: None, ignore_certificate_expiry: false, drain: false, hard: false },
                format!("{base}/stop.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Stop { max_days: Some(14), ignore_certificate_expiry: true, drain: true, hard: true },
                format!("{base}/stop.yaml -e cluster_name=lab-sno -e stop_max_days=14 -e proxshift_stop_force=true -e stop_drain=true -e force=true"),
            ),
            (
                Action::Status,
                format!("{base}/status.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Backup { name: None, keep: None, stay_stopped: false, etcd: false },
                format!("{base}/restore_point.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Backup { name: Some("nightly".into()), keep: Some(7), stay_stopped: false, etcd: true },
                format!("{base}/etcd_backup.yaml -e cluster_name=lab-sno -e etcd_backup_name=nightly -e etcd_backup_keep=7"),
            ),
            (
                Action::Backup { name: Some("before-4-20".into()), keep: Some(5), stay_stopped: true, etcd: false },
                format!("{base}/restore_point.yaml -e cluster_name=lab-sno -e restore_point_name=before-4-20 -e restore_point_keep=5 -e restore_point_start=false"),
            ),
            (
                Action::Restore { restore_point: None },
                format!("{base}/restore.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Restore { restore_point: Some("before-4-20".into()) },
                format!("{base}/restore.yaml -e cluster_name=lab-sno -e restore_point=before-4-20"),
            ),
            (
                Action::Deprovision { vault: false },
                format!("{base}/deprovision.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Certs { warn_days: 14 },
                format!("{base}/certs.yaml -e cluster_name=lab-sno -e certificate_warning_days=14"),
            ),
            (
                Action::Deprovision { vault: true },
                format!(
                    "{base}/deprovision.yaml -e cluster_name=lab-sno -e deprovision_vault=true"
                ),
            ),
            (
                Action::Scale {
                    remove: vec![],
                    replace: vec![],
                },
                format!("{base}/scale.yaml -e cluster_name=lab-sno"),
            ),
            (
                Action::Scale {
                    remove: vec!["w1,w2".into()],
                    replace: vec!["w3".into()],
                },
                format!(
                    "{base}/scale.yaml -e cluster_name=lab-sno -e remove_nodes=w1,w2 -e replace_nodes=w3"
                ),
            ),
            (
                Action::Remediate {
                    max_unhealthy: Some("40%".into()),
                    unhealthy_timeout: Some(600),
                },
                format!(
                    "{base}/remediate.yaml -e cluster_name=lab-sno -e remediate_max_unhealthy=40% -e remediate_unhealthy_timeout=600"
                ),
            ),
            (
                Action::AcmImport,
                format!("{base}/site.yaml -e cluster_name=lab-sno --tags acm"),
            ),
        ];
        for (action, want) in cases {
            assert_eq!(
                shell(action.clone(), Some("lab-sno"), &o),
                want,
                "{action:?}"
            );
        }
        assert_eq!(
            shell(Action::ProxmoxAccess, None, &o),
            format!("{base}/proxmox_access.yaml")
        );
    }

    #[test]
    fn scale_removals_need_confirmation_and_plain_names() {
        let p = plan(
            &Action::Scale {
                remove: vec!["w1".into()],
                replace: vec![],
            },
            Some("c"),
        )
        .unwrap();
        assert!(p.destructive.unwrap().contains("w1"));
        let e = plan(
            &Action::Scale {
                remove: vec!["w 1".into()],
                replace: vec![],
            },
            Some("c"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("remove_nodes: 'w 1'"), "{e}");
        assert!(plan(
            &Action::Remediate {
                max_unhealthy: None,
                unhealthy_timeout: None
            },
            Some("c")
        )
        .unwrap()
        .destructive
        .is_none());
    }

    #[test]
    fn provision_force_only_skip_and_passthrough() {
        let mut o = opts();
        o.check = true;
        o.diff = true;
        o.verbosity = 2;
        o.extra = vec![
            "-e".into(),
            "note=two words".into(),
            "--limit".into(),
            "localhost".into(),
        ];
        let a = Action::Provision {
            force: true,
            only: vec!["vms,manifests".into(), "start".into()],
            skip: vec![],
        };
        assert_eq!(
            shell(a, Some("prod-ha"), &o),
            "ansible-playbook -i inventory/ playbooks/site.yaml -e cluster_name=prod-ha -e force_install=true \
             --tags manifests,vms,start --check --diff -vv -e 'note=two words' --limit localhost"
        );
        let p = plan(
            &Action::Provision {
                force: false,
                only: vec![],
                skip: vec!["acm".into(), "install".into()],
            },
            Some("c"),
        )
        .unwrap();
        assert_eq!(p.skip_tags, vec!["install", "acm"]);
        assert_eq!(p.phases.len(), 11);
        assert!(!p.phases.contains(&"acm".to_string()));
        assert!(p.destructive.is_none());
    }

    #[test]
    fn destructive_runs_say_why() {
        let p = plan(&Action::Deprovision { vault: true }, Some("x")).unwrap();
        assert!(p.destructive.as_deref().unwrap().contains("Vault entry"));
        let p = plan(
            &Action::Provision {
                force: true,
                only: vec![],
                skip: vec![],
            },
            Some("x"),
        )
        .unwrap();
        assert!(p.destructive.as_deref().unwrap().contains("--force"));
        assert!(plan(
            &Action::Stop {
                max_days: None,
                ignore_certificate_expiry: false,
                drain: false,
                hard: false
            },
            Some("x")
        )
        .unwrap()
        .destructive
        .is_none());
    }

    #[test]
    fn a_restore_is_destructive_a_backup_is_not_and_snapshot_names_are_checked() {
        let restore = |n: Option<&str>| {
            plan(
                &Action::Restore {
                    restore_point: n.map(str::to_string),
                },
                Some("x"),
            )
        };
        let why = restore(Some("before-4-20")).unwrap().destructive.unwrap();
        assert!(
            why.contains("restore point before-4-20") && why.contains("lost"),
            "{why}"
        );
        let why = restore(None).unwrap().destructive.unwrap();
        assert!(why.contains("its newest restore point"), "{why}");
        let backup = |n: &str| {
            plan(
                &Action::Backup {
                    name: Some(n.into()),
                    keep: None,
                    stay_stopped: false,
                    etcd: false,
                },
                Some("x"),
            )
        };
        assert!(backup("nightly_1").unwrap().destructive.is_none());
        for bad in ["1st", "a b", "x=y", "", "-x"] {
            let e = backup(bad).unwrap_err();
            assert_eq!(e.code, crate::exit::USAGE);
            assert!(e.message.contains("--name"), "{}", e.message);
            let e = restore(Some(bad)).unwrap_err();
            assert!(e.message.contains("--restore-point"), "{}", e.message);
        }
    }

    #[test]
    fn usage_errors() {
        let e = plan(&Action::Start { recover: false }, None).unwrap_err();
        assert_eq!(e.code, crate::exit::USAGE);
        assert!(e.message.contains("start needs a cluster name"));
        let e = plan(&Action::Start { recover: false }, Some("a b")).unwrap_err();
        assert!(e.message.contains("' '"), "{}", e.message);
        let e = plan(&Action::Start { recover: false }, Some("x=y")).unwrap_err();
        assert_eq!(e.code, crate::exit::USAGE);
        let e = plan(
            &Action::Provision {
                force: false,
                only: vec!["vm".into()],
                skip: vec![],
            },
            Some("c"),
        )
        .unwrap_err();
        assert!(
            e.message.contains("unknown phase 'vm'") && e.message.contains("preflight, secrets")
        );
        let e = plan(
            &Action::Provision {
                force: false,
                only: vec!["vms".into()],
                skip: vec!["vms".into()],
            },
            Some("c"),
        )
        .unwrap_err();
        assert!(e.message.contains("no phase"));
    }

    #[test]
    fn collections_path_is_set_only_when_the_user_has_none() {
        let e = collections_env("/srv/proxshift", None).unwrap();
        assert_eq!(e.0, "ANSIBLE_COLLECTIONS_PATH");
        assert_eq!(
            e.1,
            "/srv/proxshift/build/collections:~/.ansible/collections:/usr/share/ansible/collections:/srv/proxshift"
        );
        assert_eq!(
            collections_env("/srv/proxshift", Some("")),
            collections_env("/srv/proxshift", None)
        );
        assert_eq!(collections_env("/srv/proxshift", Some("/mine")), None);
        let mut o = opts();
        o.env = vec![e];
        let cmd = playbook_command(
            &plan(
                &Action::Stop {
                    max_days: None,
                    ignore_certificate_expiry: false,
                    drain: false,
                    hard: false,
                },
                Some("c"),
            )
            .unwrap(),
            &o,
        )
        .shell();
        assert!(
            cmd.starts_with("ANSIBLE_COLLECTIONS_PATH='/srv/proxshift/build/collections:~/.ansible/collections:/usr/share/ansible/collections:/srv/proxshift' ansible-playbook -i inventory/ playbooks/stop.yaml"),
            "{cmd}"
        );
    }

    #[test]
    fn paths_and_inventory_command() {
        let mut o = opts();
        o.playbooks_dir = "/srv/proxshift/playbooks/".into();
        o.inventory = "/etc/proxshift inv".into();
        let p = plan(&Action::Status, Some("c")).unwrap();
        assert_eq!(
            playbook_path(&p, &o),
            "/srv/proxshift/playbooks/status.yaml"
        );
        assert_eq!(
            playbook_command(&p, &o).shell(),
            "ansible-playbook -i '/etc/proxshift inv' /srv/proxshift/playbooks/status.yaml -e cluster_name=c"
        );
        assert_eq!(
            inventory_command("ansible-inventory", "inventory/").shell(),
            "ansible-inventory -i inventory/ --list"
        );
        assert_eq!(
            plan(&Action::Manifests, Some("c")).unwrap().phases,
            vec!["preflight", "secrets", "manifests"]
        );
    }
}
