//! The modules of `proxshift.proxmox` in one binary (see the crate docs for how one is chosen).

use collection_binaries::{dispatch, Entry};

fn main() {
    dispatch(
        &[
            Entry {
                name: "proxmox_vm",
                main: || ansible_module::run(proxmox_vm::argument_spec(), proxmox_vm::run),
            },
            Entry {
                name: "vm_lifecycle",
                main: || ansible_module::run(vm_lifecycle::argument_spec(), vm_lifecycle::run),
            },
            Entry {
                name: "proxmox_access",
                main: || ansible_module::run(proxmox_access::argument_spec(), proxmox_access::run),
            },
            Entry {
                name: "proxmox_vm_info",
                main: proxmox_vm_info::main,
            },
            Entry {
                name: "proxmox_ha",
                main: || ansible_module::run(proxmox_ha::argument_spec(), proxmox_ha::run),
            },
            Entry {
                name: "proxmox_snap",
                main: || ansible_module::run(proxmox_snap::argument_spec(), proxmox_snap::run),
            },
        ],
        &[("--inventory", "proxmox_vm_info")],
    )
}
