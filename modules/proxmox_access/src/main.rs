//! The `proxshift.proxmox.proxmox_access` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(proxmox_access::argument_spec(), proxmox_access::run)
}
