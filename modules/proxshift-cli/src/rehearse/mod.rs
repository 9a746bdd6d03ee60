//! `proxshift rehearse`: run `site.yaml`'s first phases against a `pvesim` copy of the real Proxmox
//! layout and report what would be created and what would fail. This file wires the parts together:
//!
//! - [`seed`]: the simulator's seed, from the inventory's `proxmox_layout`, a live cluster's API
//!   answers or a pvesim seed file;
//! - [`commands`]: the `pvesim` and `ansible-playbook` command lines;
//! - [`files`]: the rehearsal's folder, what is written before the run and read after it;
//! - [`layout`]: problems seen in the layout before the run, and what the run created;
//! - [`report`]: the result, as text or JSON;
//! - [`vm_config`]: reading a VM config's MACs, disks and tags.
//!
//! The simulator process itself is `crate::simulator`.

pub mod commands;
pub(crate) mod files;
pub mod layout;
pub mod report;
pub mod seed;
pub mod vm_config;

use std::path::Path;

use serde_json::Value;

use self::commands::Sim;
use self::files::Files;
use self::layout::Problem;
use self::seed::Identity;
use crate::app::{display_for, env_var, print_json, read_inventory, require_tool, tool, Project};
use crate::cli::{Global, LayoutFrom, SecretsMode};
use crate::exit::{self, CliError};
use crate::inventory::{Cluster, Inventory, ProxmoxSettings};
use crate::plan::{self, RunOptions};
use crate::runner::{self, Outcome};
use crate::simulator::{self, RunningSim};
use crate::tracker::Tracker;
use crate::{live, rehearse::report::Report};

/// The `rehearse` subcommand's arguments.
pub(crate) struct Args<'a> {
    pub cluster: &'a str,
    pub from: LayoutFrom,
    pub seed: Option<&'a Path>,
    pub secrets: SecretsMode,
    pub prepare_only: bool,
    pub listen: Option<&'a str>,
    pub out: Option<&'a Path>,
    pub pvesim: Option<&'a Path>,
    pub extra: &'a [String],
}

/// `proxshift rehearse`: with `--prepare-only` or `--dry-run` only the seed and the commands,
/// otherwise the whole rehearsal.
pub(crate) fn run(g: &Global, proj: &Project, a: &Args<'_>) -> Result<i32, CliError> {
    plan::check_cluster_name(a.cluster)?;
    if g.check || g.diff {
        return Err(CliError::usage(
            "--check and --diff do not apply to rehearse (it runs against a simulator, never the real cluster)",
        ));
    }
    let (_, inv) = read_inventory(g, proj)?;
    let planned = inv.require(a.cluster, &proj.inventory)?.clone();
    let who = identity(&inv.proxmox);
    let (source, seed) = layout_seed(a, &inv, &who)?;
    let files = Files {
        dir: a
            .out
            .map(Path::to_path_buf)
            .unwrap_or_else(|| proj.root.join(".proxshift/rehearse").join(a.cluster)),
    };
    let only_prepare = a.prepare_only || g.dry_run;
    // A fixed port for commands the user copies; any free port for a run of our own.
    let default_listen = if only_prepare {
        "127.0.0.1:18006"
    } else {
        "127.0.0.1:0"
    };
    let sim = files.sim(a.listen.unwrap_or(default_listen));
    let placeholder = a.secrets == SecretsMode::Placeholder;
    let opts = run_options(g, proj, &files, placeholder, a.extra);
    let rehearsal = Rehearsal {
        cluster: a.cluster,
        source,
        seed,
        who,
        files,
        sim,
        placeholder,
        opts,
    };
    if only_prepare {
        return rehearsal.prepare(g);
    }
    rehearsal.rehearse(g, proj, a.pvesim, &planned)
}

/// The identity the playbook uses, so the rehearsal exercises the same token name; the secret is
/// the simulator's own.
fn identity(site: &ProxmoxSettings) -> Identity {
    let (user, token) = match site.token_id.as_deref() {
        Some(id) if id.contains('!') => {
            let (u, t) = id.split_once('!').unwrap_or((id, "ansible"));
            (u.to_string(), t.to_string())
        }
        id => (
            site.user.clone().unwrap_or_else(|| "proxshift@pve".into()),
            id.unwrap_or("ansible").to_string(),
        ),
    };
    Identity {
        user,
        token,
        secret: simulator::simulator_secret(),
    }
}

/// Where the layout comes from (for the report) and the seed made of it: `--seed FILE`, else the
/// live Proxmox (read-only) when it is reachable or asked for, else the inventory's `proxmox_layout`.
fn layout_seed(a: &Args<'_>, inv: &Inventory, who: &Identity) -> Result<(String, Value), CliError> {
    if let Some(file) = a.seed {
        let v = files::read_seed_file(file)?;
        return Ok((
            format!("seed {}", file.display()),
            seed::seed_from_pvesim(&v, who)?,
        ));
    }
    let from_inventory = || -> Result<Value, CliError> {
        let layout = inv.proxmox_layout.as_ref().ok_or_else(|| {
            CliError::inventory(
                "no layout to rehearse on: give Proxmox credentials (inventory or PROXMOX_* environment), describe proxmox_layout in group_vars/all (see modules/proxshift-cli/README.md), or pass --seed FILE",
            )
        })?;
        seed::seed(a.cluster, layout, who)
    };
    match (a.from, live::connection(&inv.proxmox, &env_var)) {
        (LayoutFrom::Inventory, _) | (LayoutFrom::Auto, Err(_)) => {
            Ok(("inventory proxmox_layout".to_string(), from_inventory()?))
        }
        (LayoutFrom::Proxmox, Err(why)) => {
            Err(CliError::inventory(format!("--from proxmox: {why}")))
        }
        (_, Ok(opts)) => {
            let (url, layout) = live::read_layout(&opts).map_err(|e| {
                CliError::inventory(format!(
                    "cannot read the Proxmox layout (read-only) from {}: {e}; use --from inventory to rehearse on proxmox_layout",
                    opts.base_url().unwrap_or_default()
                ))
            })?;
            Ok((
                format!("proxmox ({url})"),
                seed::seed(a.cluster, &layout, who)?,
            ))
        }
    }
}

/// How `ansible-playbook` is run: the vars file first, the user's extra arguments last; with
/// placeholder secrets the secrets phase is skipped (the vars file carries them).
fn run_options(
    g: &Global,
    proj: &Project,
    files: &Files,
    placeholder: bool,
    user_extra: &[String],
) -> RunOptions {
    let mut extra = vec!["-e".to_string(), format!("@{}", files.vars_file())];
    if placeholder {
        extra.extend(["--skip-tags".to_string(), "secrets".to_string()]);
    }
    extra.extend(user_extra.iter().cloned());
    RunOptions {
        program: tool("ansible-playbook", &proj.root).unwrap_or_else(|| "ansible-playbook".into()),
        inventory: proj.inventory.clone(),
        playbooks_dir: proj.playbooks_dir.clone(),
        verbosity: g.verbose,
        extra,
        env: plan::collections_env(
            &proj.root.display().to_string(),
            env_var("ANSIBLE_COLLECTIONS_PATH").as_deref(),
        )
        .filter(|_| proj.root.join("ansible_collections").is_dir())
        .into_iter()
        .collect(),
        ..Default::default()
    }
}

/// One rehearsal, ready to be prepared or run.
struct Rehearsal<'a> {
    cluster: &'a str,
    /// Where the layout came from, for the report.
    source: String,
    seed: Value,
    who: Identity,
    files: Files,
    sim: Sim,
    placeholder: bool,
    opts: RunOptions,
}

impl Rehearsal<'_> {
    /// `--prepare-only` (write the seed) or `--dry-run` (write nothing): show the seed and commands.
    fn prepare(&self, g: &Global) -> Result<i32, CliError> {
        let (pvesim, play) = commands::commands(self.cluster, &self.who, &self.sim, &self.opts);
        if !g.dry_run {
            self.write_files()?;
        }
        if g.json {
            print_json(&serde_json::json!({
                "cluster": self.cluster,
                "layout_source": self.source,
                "seed_file": self.sim.seed_file,
                "seed_written": !g.dry_run,
                "seed": self.seed,
                "commands": [pvesim.shell(), play.shell()],
                "tags": commands::REHEARSE_TAGS,
            }));
        } else {
            let verb = if g.dry_run { "Would write" } else { "Wrote" };
            println!(
                "{verb} the simulator seed for {} ({}): {}",
                self.cluster, self.source, self.sim.seed_file
            );
            println!("A rehearsal runs:");
            println!("  {}", pvesim.shell());
            println!("  {}", play.shell());
        }
        Ok(exit::OK)
    }

    fn write_files(&self) -> Result<(), CliError> {
        self.files.write(
            self.cluster,
            &self.seed,
            &self.sim,
            &self.who,
            self.placeholder,
        )
    }

    /// Start pvesim on the seed, run the playbook against it, stop pvesim and report.
    fn rehearse(
        mut self,
        g: &Global,
        proj: &Project,
        pvesim: Option<&Path>,
        planned: &Cluster,
    ) -> Result<i32, CliError> {
        self.opts.program = require_tool("ansible-playbook", &proj.root)?;
        let bin = simulator::find_pvesim(pvesim, &proj.root)?;
        self.files.clear_previous();
        self.write_files()?;
        let before = layout::layout_problems(&self.seed, &layout::planned(planned), &planned.tag());
        let running = RunningSim::start(
            &bin,
            &self.sim.listen,
            &self.sim.seed_file,
            &self.sim.ca_file,
            &self.files.final_state_file(),
        )?;
        self.sim.listen = running.addr.clone();
        let (_, play) = commands::commands(self.cluster, &self.who, &self.sim, &self.opts);
        let phases: Vec<String> = commands::REHEARSE_TAGS
            .iter()
            .filter(|t| !(self.placeholder && **t == "secrets"))
            .map(|t| t.to_string())
            .collect();
        let outcome = runner::run_playbook(&play, Tracker::new(&phases), &display_for(g));
        running.stop();
        let outcome = outcome?;
        let after = self.files.read_final_state()?;
        let problems = problems(before, &after, &outcome);
        let report = self.report(&outcome, &after, problems);
        if g.json {
            print_json(&serde_json::to_value(&report).expect("report serialises"));
        } else {
            print!("{}", report::report_text(&report));
        }
        Ok(report.exit_code)
    }

    fn report(&self, outcome: &Outcome, after: &Value, problems: Vec<Problem>) -> Report {
        let ok = outcome.rc == Some(0) && problems.is_empty() && !outcome.interrupted;
        let code = if outcome.interrupted {
            exit::INTERRUPTED
        } else if ok {
            exit::OK
        } else {
            exit::PLAYBOOK_FAILED
        };
        Report {
            cluster: self.cluster.to_string(),
            layout_source: self.source.clone(),
            status: if ok { "ok" } else { "failed" }.into(),
            ansible_rc: outcome.rc,
            exit_code: code,
            created: layout::created(&self.seed, after),
            problems,
            seed_file: self.sim.seed_file.clone(),
            work_dir: self.files.dir.display().to_string(),
        }
    }
}

/// Everything that would go wrong: what the layout showed before the run, MACs the run handed out
/// twice, and the failed tasks.
fn problems(before: Vec<Problem>, after: &Value, outcome: &Outcome) -> Vec<Problem> {
    let mut problems = before;
    let dups = layout::duplicate_macs(after, &problems);
    problems.extend(dups);
    for f in outcome.tracker.failures() {
        let listed = f.listed_problems();
        if listed.is_empty() {
            problems.push(layout::problem(
                layout::classify(&f.message),
                &f.phase,
                format!("{}: {}", f.task, f.message.trim()),
            ));
        }
        // Each problem a task lists is a problem of its own: they say what they are about.
        for item in listed {
            problems.push(layout::problem(layout::classify(&item), &f.phase, item));
        }
    }
    problems
}
