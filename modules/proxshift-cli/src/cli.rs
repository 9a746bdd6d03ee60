//! The command line, as clap derive types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::plan::Action;
use crate::style::ColorChoice;

/// Operate ProxShift clusters: OpenShift on Proxmox VE, driven by the ProxShift playbooks.
///
/// Every subcommand runs one `ansible-playbook` command against the inventory; `--dry-run` prints it.
#[derive(Debug, Parser)]
#[command(name = "proxshift", version, after_help = crate::exit::help_text())]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Debug, Args, Clone, Default)]
pub struct Global {
    /// Inventory to use [default: <project>/inventory/]
    #[arg(
        short = 'i',
        long,
        global = true,
        env = "PROXSHIFT_INVENTORY",
        value_name = "PATH"
    )]
    pub inventory: Option<String>,
    /// The ProxShift checkout holding playbooks/ [default: the nearest folder up from here with
    /// playbooks/site.yaml]
    #[arg(long, global = true, env = "PROXSHIFT_ROOT", value_name = "DIR")]
    pub project_dir: Option<PathBuf>,
    /// Print the exact ansible-playbook command and run nothing
    #[arg(short = 'n', long, global = true)]
    pub dry_run: bool,
    /// Pass --check to ansible-playbook (predict changes, make none)
    #[arg(long, global = true)]
    pub check: bool,
    /// Pass --diff to ansible-playbook
    #[arg(long, global = true)]
    pub diff: bool,
    /// Machine-readable output: one JSON object on stdout (playbook output goes to stderr)
    #[arg(long, global = true)]
    pub json: bool,
    /// When to colour output
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    /// More ansible-playbook output (-v, -vv, … passed through)
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Arguments after `--` go to ansible-playbook unchanged.
#[derive(Debug, Args, Clone)]
pub struct ClusterArgs {
    /// The cluster: an inventory group under all.children.clusters.children
    pub cluster: String,
    /// Extra ansible-playbook arguments (after `--`)
    #[arg(last = true, value_name = "ANSIBLE_ARGS")]
    pub extra: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// List the inventory's clusters (with live VM states when Proxmox settings are available)
    Clusters {
        /// Also list every host (role, IP, MAC, node, VMID, state)
        #[arg(short = 'l', long)]
        hosts: bool,
        /// Do not ask Proxmox for VM states
        #[arg(long)]
        no_live: bool,
    },
    /// Provision a cluster: every phase of playbooks/site.yaml
    Provision {
        #[command(flatten)]
        args: ClusterArgs,
        /// Delete the cluster's VMs and install it again (-e force_install=true)
        #[arg(long)]
        force: bool,
        /// Run only these phases (comma-separated or repeated): preflight, secrets, manifests, iso,
        /// vms, start, install, credentials, acm
        #[arg(long, value_name = "PHASES")]
        only: Vec<String>,
        /// Skip these phases
        #[arg(long, value_name = "PHASES")]
        skip: Vec<String>,
        /// Confirm a destructive run (--force) without a prompt
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Validate and render the install manifests (site.yaml --tags preflight,secrets,manifests)
    Manifests {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Start the cluster's VMs (rendezvous host first)
    Start {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Stop the cluster's VMs
    Stop {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Show the cluster's VMs and install state
    Status {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Stop and delete the VMs carrying the cluster's ownership tag; detach it from ACM
    Deprovision {
        #[command(flatten)]
        args: ClusterArgs,
        /// Also remove the cluster's Vault entry (-e deprovision_vault=true)
        #[arg(long)]
        vault: bool,
        /// Confirm without a prompt
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Add the inventory's new workers to the running cluster
    Scale {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Import the cluster into the ACM hub (site.yaml --tags acm)
    AcmImport {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Prepare a rehearsal on the simulator: write a pvesim seed from the inventory's proxmox_layout
    /// and print the commands that run site.yaml against it (nothing is run)
    Rehearse {
        /// The cluster: an inventory group under all.children.clusters.children
        cluster: String,
        /// Where the simulator would listen
        #[arg(long, default_value = "127.0.0.1:18006", value_name = "ADDR")]
        listen: String,
        /// Folder for the seed, the simulator's CA and the rehearsal's work files
        /// [default: <project>/.proxshift/rehearse/<cluster>]
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Extra ansible-playbook arguments (after `--`)
        #[arg(last = true, value_name = "ANSIBLE_ARGS")]
        extra: Vec<String>,
    },
    /// Create the least-privilege Proxmox role, user and API token the playbooks need
    ProxmoxAccess {
        /// Extra ansible-playbook arguments (after `--`)
        #[arg(last = true, value_name = "ANSIBLE_ARGS")]
        extra: Vec<String>,
    },
}

fn call(action: Action, a: &ClusterArgs, yes: bool) -> PlaybookCall<'_> {
    PlaybookCall {
        action,
        cluster: Some(a.cluster.as_str()),
        extra: &a.extra,
        yes,
    }
}

/// A playbook subcommand reduced to its action, cluster, pass-through args and confirmation flag.
pub struct PlaybookCall<'a> {
    pub action: Action,
    pub cluster: Option<&'a str>,
    pub extra: &'a [String],
    pub yes: bool,
}

impl Cmd {
    /// `None` for `clusters` and `rehearse`, which run no playbook themselves.
    pub fn playbook_call(&self) -> Option<PlaybookCall<'_>> {
        Some(match self {
            Cmd::Clusters { .. } | Cmd::Rehearse { .. } => return None,
            Cmd::Provision {
                args,
                force,
                only,
                skip,
                yes,
            } => call(
                Action::Provision {
                    force: *force,
                    only: only.clone(),
                    skip: skip.clone(),
                },
                args,
                *yes,
            ),
            Cmd::Manifests { args } => call(Action::Manifests, args, false),
            Cmd::Start { args } => call(Action::Start, args, false),
            Cmd::Stop { args } => call(Action::Stop, args, false),
            Cmd::Status { args } => call(Action::Status, args, false),
            Cmd::Deprovision { args, vault, yes } => {
                call(Action::Deprovision { vault: *vault }, args, *yes)
            }
            Cmd::Scale { args } => call(Action::Scale, args, false),
            Cmd::AcmImport { args } => call(Action::AcmImport, args, false),
            Cmd::ProxmoxAccess { extra } => PlaybookCall {
                action: Action::ProxmoxAccess,
                cluster: None,
                extra,
                yes: false,
            },
        })
    }
}
