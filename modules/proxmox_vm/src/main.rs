//! The `proxshift.proxmox.proxmox_vm` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(proxmox_vm::argument_spec(), proxmox_vm::run)
}
