//! `proxshift rehearse`: run `site.yaml`'s first phases against a `pvesim` copy of the real Proxmox
//! layout and report what would be created and what would fail.
//!
//! - [`seed`]: the simulator's seed, from the inventory's `proxmox_layout`, a live cluster's API
//!   answers or a pvesim seed file;
//! - [`commands`]: the `pvesim` and `ansible-playbook` command lines;
//! - [`layout`]: problems seen in the layout before the run, and what the run created;
//! - [`report`]: the result, as text or JSON;
//! - [`vm_config`]: reading a VM config's MACs, disks and tags.

pub mod commands;
pub mod layout;
pub mod report;
pub mod seed;
pub mod vm_config;
