//! The `proxshift.proxmox.proxmox_snap` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(proxmox_snap::argument_spec(), proxmox_snap::run)
}
