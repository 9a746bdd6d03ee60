//! The `proxshift` command: the operator's front door to the ProxShift playbooks.
//!
//! Pure parts (unit-tested): [`plan`] (subcommand → playbook, tags, extra vars → command line),
//! [`command`] (shell quoting), [`output`] (ansible-playbook output lines, PLAY RECAP), [`tracker`]
//! (phase detection, per-phase results, progress line), [`inventory`] (clusters from
//! `ansible-inventory --list`), [`live`] (VM states behind the [`live::VmSource`] trait), [`table`],
//! [`report`] (text and JSON output), [`certs`] (the kept certificates' table, over `cert_check`), [`style`] (colour rules), [`exit`] (exit codes), and the pure
//! parts of [`rehearse`] (seed, commands, layout problems, report).
//! I/O: [`runner`] (child processes, streaming), [`app`] (project and tool discovery, dispatch),
//! `clusters` (the clusters command), [`rehearse`] (the rehearsal's files and run) and `simulator`
//! (the pvesim process a rehearsal runs against).

pub mod app;
pub mod certs;
pub mod cli;
mod clusters;
pub mod command;
pub mod exit;
pub mod inventory;
pub mod live;
pub mod output;
pub mod plan;
pub mod rehearse;
pub mod report;
pub mod runner;
mod simulator;
pub mod style;
pub mod table;
pub mod tracker;

pub use app::main_with;
