//! From a parsed command line to an exit code: find the project and tools, then dry-run, list or run.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Parser;

use crate::certs;
use crate::cli::{Cli, Cmd, Global, PlaybookCall};
use crate::command::Command;
use crate::exit::{self, CliError};
use crate::inventory::{self, Inventory};
use crate::plan::{self, Plan, RunOptions};
use crate::report::{self, PhaseSummary, RunSummary};
use crate::runner::{self, Display};
use crate::style::use_colour;
use crate::tracker::Tracker;
use crate::{clusters, rehearse};

pub(crate) fn env_var(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// Parse `args` and run; returns the process exit code.
pub fn main_with<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // clap: 0 for --help/--version, 2 for usage errors.
            return e.exit_code();
        }
    };
    let json = cli.global.json;
    match execute(&cli) {
        Ok(code) => code,
        Err(e) => {
            if json {
                println!("{}", report::error_json(&e));
            } else {
                eprintln!("proxshift: {e}");
            }
            e.code
        }
    }
}

/// The nearest folder from `start` upwards that holds `playbooks/site.yaml`.
pub fn find_project_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|d| d.join("playbooks").join("site.yaml").is_file())
        .map(Path::to_path_buf)
}

/// `name` on PATH, else in the project's `.venv/bin` (what `make venv` creates).
pub fn locate_tool(name: &str, path_var: Option<&str>, root: &Path) -> Option<PathBuf> {
    let on_path = path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| is_executable(p));
    on_path.or_else(|| {
        let venv = root.join(".venv").join("bin").join(name);
        is_executable(&venv).then_some(venv)
    })
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Where the project is and how paths appear in commands.
pub(crate) struct Project {
    pub(crate) root: PathBuf,
    /// `playbooks` when the root is the working directory, else an absolute path.
    pub(crate) playbooks_dir: String,
    pub(crate) inventory: String,
}

fn project(g: &Global) -> Result<Project, CliError> {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::inventory(format!("no working directory: {e}")))?;
    let root = match &g.project_dir {
        Some(d) => {
            let d = cwd.join(d);
            if !d.join("playbooks").is_dir() {
                return Err(CliError::inventory(format!(
                    "{} has no playbooks/ folder: --project-dir (PROXSHIFT_ROOT) must name a ProxShift checkout",
                    d.display()
                )));
            }
            d
        }
        None => find_project_root(&cwd).ok_or_else(|| {
            CliError::inventory(
                "not inside a ProxShift checkout (no playbooks/site.yaml here or above): pass --project-dir or set PROXSHIFT_ROOT",
            )
        })?,
    };
    let here = root == cwd;
    let shown = |sub: &str| {
        if here {
            sub.to_string()
        } else {
            root.join(sub).display().to_string()
        }
    };
    let inventory = g
        .inventory
        .clone()
        .unwrap_or_else(|| format!("{}/", shown("inventory")));
    Ok(Project {
        playbooks_dir: shown("playbooks"),
        inventory,
        root,
    })
}

/// The program as it appears in a command: a bare name when PATH finds it.
pub(crate) fn tool(name: &str, root: &Path) -> Option<String> {
    let path = env_var("PATH");
    let found = locate_tool(name, path.as_deref(), root)?;
    let on_path = path
        .as_deref()
        .into_iter()
        .flat_map(std::env::split_paths)
        .any(|d| d.join(name) == found);
    Some(if on_path {
        name.to_string()
    } else {
        found.display().to_string()
    })
}

pub(crate) fn require_tool(name: &str, root: &Path) -> Result<String, CliError> {
    tool(name, root).ok_or_else(|| {
        CliError::tool(format!(
            "{name} not found on PATH or in {}: install ansible-core (`make venv`)",
            root.join(".venv/bin").display()
        ))
    })
}

pub(crate) fn print_json(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut out, v);
    let _ = writeln!(out);
}

fn execute(cli: &Cli) -> Result<i32, CliError> {
    let g = &cli.global;
    let proj = project(g)?;
    match cli.command.playbook_call() {
        None => match &cli.command {
            Cmd::Clusters { hosts, no_live } => clusters::run(g, &proj, *hosts, *no_live),
            Cmd::Rehearse {
                cluster,
                from,
                seed,
                secrets,
                prepare_only,
                listen,
                out,
                pvesim,
                extra,
            } => rehearse::run(
                g,
                &proj,
                &rehearse::Args {
                    cluster,
                    from: *from,
                    seed: seed.as_deref(),
                    secrets: *secrets,
                    prepare_only: *prepare_only,
                    listen: listen.as_deref(),
                    out: out.as_deref(),
                    pvesim: pvesim.as_deref(),
                    extra,
                },
            ),
            _ => unreachable!("every other subcommand runs a playbook"),
        },
        Some(call) => playbook(g, &proj, call),
    }
}

pub(crate) fn read_inventory(g: &Global, proj: &Project) -> Result<(Command, Inventory), CliError> {
    let program = require_tool("ansible-inventory", &proj.root)?;
    let cmd = plan::inventory_command(&program, &proj.inventory);
    let (rc, out) = runner::capture(&cmd)?;
    if rc != 0 {
        return Err(CliError::inventory(format!(
            "`{}` failed (exit {rc}): check the inventory {}",
            cmd.shell(),
            proj.inventory
        )));
    }
    let _ = g;
    Ok((cmd, inventory::parse(&out)?))
}

/// How a playbook run is shown: on stderr with `--json` (stdout carries only the JSON), with a
/// progress line and colour only on a terminal.
pub(crate) fn display_for(g: &Global) -> Display {
    let stream_is_tty = if g.json {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    Display {
        to_stderr: g.json,
        progress: stream_is_tty,
        colour: use_colour(g.color, stream_is_tty, &env_var),
    }
}

/// Ask for the cluster name on a terminal; refuse without `--yes` elsewhere.
fn confirm(plan: &Plan, yes: bool, json: bool) -> Result<(), CliError> {
    let Some(what) = &plan.destructive else {
        return Ok(());
    };
    if yes {
        return Ok(());
    }
    let name = plan.cluster.clone().unwrap_or_default();
    if json || !std::io::stdin().is_terminal() {
        return Err(CliError::usage(format!("{what}: pass --yes to confirm")));
    }
    eprint!("{what}.\nType the cluster name ({name}) to continue: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    if answer.trim() == name {
        Ok(())
    } else {
        Err(CliError::usage("not confirmed; nothing was run"))
    }
}

fn playbook(g: &Global, proj: &Project, call: PlaybookCall<'_>) -> Result<i32, CliError> {
    let mut plan = plan::plan(&call.action, call.cluster)?;
    // `certs`: the playbook writes its report here for the table below (not part of a dry run's command).
    let certs_report = (!g.dry_run && matches!(call.action, plan::Action::Certs { .. }))
        .then(|| std::env::temp_dir().join(format!("proxshift-certs-{}.json", std::process::id())));
    if let Some(path) = &certs_report {
        plan.extra_vars
            .push(("proxshift_certs_report".into(), path.display().to_string()));
    }
    let program = if g.dry_run {
        tool("ansible-playbook", &proj.root).unwrap_or_else(|| "ansible-playbook".into())
    } else {
        require_tool("ansible-playbook", &proj.root)?
    };
    let root = proj.root.display().to_string();
    let opts = RunOptions {
        program,
        inventory: proj.inventory.clone(),
        playbooks_dir: proj.playbooks_dir.clone(),
        check: g.check,
        diff: g.diff,
        verbosity: g.verbose,
        extra: call.extra.to_vec(),
        env: plan::collections_env(&root, env_var("ANSIBLE_COLLECTIONS_PATH").as_deref())
            .filter(|_| proj.root.join("ansible_collections").is_dir())
            .into_iter()
            .collect(),
    };
    let cmd = plan::playbook_command(&plan, &opts);
    if g.dry_run {
        if g.json {
            print_json(&report::dry_run_json(Some(&plan), &cmd));
        } else {
            print!("{}", report::dry_run_text(&cmd));
        }
        return Ok(exit::OK);
    }
    let playbook_file = proj.root.join("playbooks").join(plan.playbook);
    if !playbook_file.is_file() {
        return Err(CliError::inventory(format!(
            "{} does not exist in this checkout",
            playbook_file.display()
        )));
    }
    if let Some(name) = &plan.cluster {
        let (_, inv) = read_inventory(g, proj)?;
        inv.require(name, &proj.inventory)?;
    }
    if !g.check {
        confirm(&plan, call.yes, g.json)?;
    }
    let display = display_for(g);
    let colour = display.colour;
    let outcome = runner::run_playbook(&cmd, Tracker::new(&plan.phases), &display)?;
    let (status, code) = match (outcome.interrupted, outcome.rc) {
        (true, _) => ("interrupted", exit::INTERRUPTED),
        (false, Some(0)) => ("ok", exit::OK),
        _ => ("failed", exit::PLAYBOOK_FAILED),
    };
    let summary = RunSummary {
        command: plan.command.to_string(),
        cluster: plan.cluster.clone(),
        argv: cmd.argv(),
        status: status.into(),
        ansible_rc: outcome.rc,
        exit_code: code,
        elapsed_seconds: (outcome.elapsed.as_secs_f64() * 10.0).round() / 10.0,
        phases: outcome
            .tracker
            .phases()
            .iter()
            .map(PhaseSummary::from)
            .collect(),
        recap: outcome.tracker.recap().to_vec(),
        failures: outcome.tracker.failures().to_vec(),
    };
    let kept = match (&certs_report, code) {
        (Some(path), exit::OK) => {
            let kept = certs::read(path);
            let _ = std::fs::remove_file(path);
            Some(kept?)
        }
        _ => None,
    };
    if g.json {
        let mut v = serde_json::to_value(&summary).expect("summary serialises");
        if let Some(kept) = &kept {
            v["certificates"] = serde_json::to_value(kept).expect("report serialises");
        }
        print_json(&v);
    } else {
        print!("{}", report::summary_text(&summary, colour));
        if let Some(kept) = &kept {
            print!("{}", certs::text(kept, colour));
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("proxshift-app-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn project_root_is_found_upwards() {
        let d = scratch("root");
        std::fs::create_dir_all(d.join("playbooks")).unwrap();
        std::fs::write(d.join("playbooks/site.yaml"), "---\n").unwrap();
        std::fs::create_dir_all(d.join("inventory/group_vars")).unwrap();
        assert_eq!(
            find_project_root(&d.join("inventory/group_vars")),
            Some(d.clone())
        );
        assert_eq!(
            find_project_root(&std::env::temp_dir().join("nowhere-proxshift")),
            None
        );
    }

    #[test]
    fn tools_on_path_then_in_the_venv() {
        use std::os::unix::fs::PermissionsExt;
        let d = scratch("tools");
        let bin = d.join("bin");
        let venv = d.join(".venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&venv).unwrap();
        let make = |p: &Path, mode: u32| {
            std::fs::write(p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        make(&venv.join("ansible-playbook"), 0o755);
        let path = bin.display().to_string();
        assert_eq!(
            locate_tool("ansible-playbook", Some(&path), &d),
            Some(venv.join("ansible-playbook"))
        );
        // Not executable: not a tool.
        make(&bin.join("ansible-playbook"), 0o644);
        assert_eq!(
            locate_tool("ansible-playbook", Some(&path), &d),
            Some(venv.join("ansible-playbook"))
        );
        make(&bin.join("ansible-playbook"), 0o755);
        assert_eq!(
            locate_tool("ansible-playbook", Some(&path), &d),
            Some(bin.join("ansible-playbook"))
        );
        assert_eq!(locate_tool("ansible-inventory", Some(&path), &d), None);
    }
}
