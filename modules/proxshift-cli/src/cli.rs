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

/// Where `rehearse` takes the Proxmox layout from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutFrom {
    Auto,
    Proxmox,
    Inventory,
}

/// Where `rehearse` takes the install secrets from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SecretsMode {
    Placeholder,
    Vault,
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
        /// vms, start, install, credentials, acm, post, external_secrets, gitops, upgrade
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
    /// Start the cluster's VMs, control plane first; after `stop`, restart it as OpenShift documents it
    /// (API, pending kubelet CSRs of its nodes approved, nodes uncordoned, ClusterOperators stable)
    Start {
        #[command(flatten)]
        args: ClusterArgs,
        /// Restart the OpenShift way even without a shutdown note from `stop` (after a power loss)
        #[arg(long)]
        recover: bool,
    },
    /// Shut the cluster down as OpenShift documents it (kubelet CA checked, nodes cordoned), workers first
    Stop {
        #[command(flatten)]
        args: ClusterArgs,
        /// Days the cluster is to stay down: refused when the kubelet CA expires before [default: 30]
        #[arg(long, value_name = "DAYS")]
        max_days: Option<u32>,
        /// Stop even when the kubelet CA would expire while the cluster is down
        #[arg(long)]
        ignore_certificate_expiry: bool,
        /// Also drain the workers before the shutdown
        #[arg(long)]
        drain: bool,
        /// Hard-stop a VM whose guest has not shut down in time
        #[arg(long)]
        hard: bool,
    },
    /// Take a restore point: shut the cluster down the OpenShift way, snapshot every VM it owns, record
    /// the restore point in its Vault record (newest kept), start it again (playbooks/restore_point.yaml)
    #[command(visible_alias = "restore-point")]
    Backup {
        #[command(flatten)]
        args: ClusterArgs,
        /// The snapshot's name [default: restore-<UTC time>]
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// How many restore points to keep, oldest removed first [default: 3]
        #[arg(long, value_name = "N")]
        keep: Option<u32>,
        /// Leave the cluster stopped after the snapshots
        #[arg(long, conflicts_with = "etcd")]
        stay_stopped: bool,
        /// Back up etcd into the object store instead, the cluster running (playbooks/etcd_backup.yaml;
        /// --name defaults to etcd-<UTC time>, --keep to 5)
        #[arg(long)]
        etcd: bool,
    },
    /// Roll the cluster back to a restore point (the newest by default): stop, roll every VM back,
    /// restart the OpenShift way; everything after the restore point is lost (playbooks/restore.yaml)
    Restore {
        #[command(flatten)]
        args: ClusterArgs,
        /// The restore point to go back to [default: the newest in the cluster's record]
        #[arg(long, value_name = "NAME")]
        restore_point: Option<String>,
        /// Confirm without a prompt
        #[arg(short = 'y', long)]
        yes: bool,
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
    /// Join the inventory's new hosts to the running cluster; remove or replace nodes
    Scale {
        #[command(flatten)]
        args: ClusterArgs,
        /// Drain and delete these workers and their VMs (comma-separated or repeated)
        #[arg(long, value_name = "NODES")]
        remove: Vec<String>,
        /// Replace these workers: removed, then joined again with the same name, MAC and IP
        #[arg(long, value_name = "NODES")]
        replace: Vec<String>,
        /// Confirm a removal or replacement without a prompt
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Reset, then replace, nodes that stay unhealthy (MachineHealthCheck semantics; --check to preview)
    Remediate {
        #[command(flatten)]
        args: ClusterArgs,
        /// Do nothing when more nodes than this are unhealthy: a count or a percentage (40%)
        #[arg(long, value_name = "N|P%")]
        max_unhealthy: Option<String>,
        /// Seconds a node may be not Ready before it is remediated
        #[arg(long, value_name = "SECONDS")]
        unhealthy_timeout: Option<u64>,
    },
    /// Report the cluster's kept certificates (inventory kept_certificates): subjects, SANs, serial,
    /// expiry, and a warning for one expiring soon or not covering its hostname (playbooks/certs.yaml)
    Certs {
        #[command(flatten)]
        args: ClusterArgs,
        /// Warn about a certificate that expires within this many days
        #[arg(long, default_value_t = 30, value_name = "DAYS")]
        warn_days: u32,
    },
    /// Import the cluster into the ACM hub (site.yaml --tags acm)
    AcmImport {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Rehearse provisioning on the simulator: copy the Proxmox layout (read-only from Proxmox when
    /// credentials are given, else the inventory's proxmox_layout, or --seed), run site.yaml against
    /// the copy, and report what would be created, where, and what would fail
    Rehearse {
        /// The cluster: an inventory group under all.children.clusters.children
        cluster: String,
        /// Where the layout comes from: auto (Proxmox when the inventory/environment give
        /// credentials, else the inventory's proxmox_layout), proxmox, or inventory
        #[arg(long, value_enum, default_value_t = LayoutFrom::Auto, value_name = "SOURCE")]
        from: LayoutFrom,
        /// Use this pvesim seed file as the layout instead (its users and tokens are replaced)
        #[arg(long, value_name = "FILE", conflicts_with = "from")]
        seed: Option<PathBuf>,
        /// Install secrets for the manifests: placeholder (no Vault needed; the secrets phase is
        /// skipped) or vault (read from the inventory's Vault, read-only)
        #[arg(long, value_enum, default_value_t = SecretsMode::Placeholder, value_name = "MODE")]
        secrets: SecretsMode,
        /// Only write the seed and print the two commands of a rehearsal (run nothing)
        #[arg(long)]
        prepare_only: bool,
        /// Where the simulator listens [default: a free 127.0.0.1 port; 127.0.0.1:18006 with
        /// --prepare-only]
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Folder for the seed, the simulator's CA and the rehearsal's work files
        /// [default: <project>/.proxshift/rehearse/<cluster>]
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// The pvesim binary [default: next to proxshift, on PATH, or in the checkout's target/]
        #[arg(long, env = "PVESIM_BIN", value_name = "PATH")]
        pvesim: Option<PathBuf>,
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
            Cmd::Start { args, recover } => call(Action::Start { recover: *recover }, args, false),
            Cmd::Stop {
                args,
                max_days,
                ignore_certificate_expiry,
                drain,
                hard,
            } => call(
                Action::Stop {
                    max_days: *max_days,
                    ignore_certificate_expiry: *ignore_certificate_expiry,
                    drain: *drain,
                    hard: *hard,
                },
                args,
                false,
            ),
            Cmd::Backup {
                args,
                name,
                keep,
                stay_stopped,
                etcd,
            } => call(
                Action::Backup {
                    name: name.clone(),
                    keep: *keep,
                    stay_stopped: *stay_stopped,
                    etcd: *etcd,
                },
                args,
                false,
            ),
            Cmd::Restore {
                args,
                restore_point,
                yes,
            } => call(
                Action::Restore {
                    restore_point: restore_point.clone(),
                },
                args,
                *yes,
            ),
            Cmd::Status { args } => call(Action::Status, args, false),
            Cmd::Deprovision { args, vault, yes } => {
                call(Action::Deprovision { vault: *vault }, args, *yes)
            }
            Cmd::Scale {
                args,
                remove,
                replace,
                yes,
            } => call(
                Action::Scale {
                    remove: remove.clone(),
                    replace: replace.clone(),
                },
                args,
                *yes,
            ),
            Cmd::Remediate {
                args,
                max_unhealthy,
                unhealthy_timeout,
            } => call(
                Action::Remediate {
                    max_unhealthy: max_unhealthy.clone(),
                    unhealthy_timeout: *unhealthy_timeout,
                },
                args,
                false,
            ),
            Cmd::AcmImport { args } => call(Action::AcmImport, args, false),
            Cmd::Certs { args, warn_days } => call(
                Action::Certs {
                    warn_days: *warn_days,
                },
                args,
                false,
            ),
            Cmd::ProxmoxAccess { extra } => PlaybookCall {
                action: Action::ProxmoxAccess,
                cluster: None,
                extra,
                yes: false,
            },
        })
    }
}
