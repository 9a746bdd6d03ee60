//! Pure Proxmox VE types for ProxShift: no I/O, everything unit-tested.
//!
//! - [`propstring`]: property strings (`virtio=BC:24:11:…,bridge=vmbr0`), sizes, MACs, tags, names.
//! - [`spec`]: the typed VM spec ([`VmSpec`], [`Disk`], [`Nic`], [`EfiDisk`], [`Tpm`], [`Cdrom`]), its
//!   validation and the parameters that create it; parsers for the current config's drives and NICs.
//! - [`error`]: what the parsers and the spec refuse, one small `thiserror` type each.
//! - [`diff`]: normalise desired and current config the way Proxmox does and compute exactly the keys
//!   to set, the `delete` list, the resizes and what cannot be converged.
//! - [`extra`]: the proxmox_kvm-style options (cloud-init, vcpus, numa, vga, serial, rng0, startup,
//!   hostpci, `extra_config`): PVE's value rules, normal form, `sshkeys` URL encoding.
//! - [`hotplug`]: which changes a running VM takes at once and which wait for a restart.
//! - [`placement`]: CAPMOX-style memory-aware placement over allowed nodes, vmid candidates from a
//!   range, storage-type disk formats, the volumes that keep a clone on its source's node.

pub mod diff;
pub mod error;
pub mod extra;
pub mod hotplug;
pub mod placement;
pub mod propstring;
pub mod spec;

pub use diff::{canonical, config_str, diff, purge_unlisted_disks, ConfigDiff, Resize};
pub use error::{MacError, PropStringError, RangeError, SizeError, SpecError};
pub use hotplug::{needs_restart, Hotplug};
pub use placement::{commit, local_volumes, place, vmid_candidates, NodeLoad, PlacementError};
pub use propstring::{format_size, normalize_mac, normalize_tags, parse_size, PropString};
pub use spec::{Cdrom, CloudinitDrive, CurrentDrive, Disk, EfiDisk, Nic, NicValue, Tpm, VmSpec};
