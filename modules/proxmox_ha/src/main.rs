//! The `proxshift.proxmox.proxmox_ha` module binary. All logic lives in the library.

fn main() {
    ansible_module::run(proxmox_ha::argument_spec(), proxmox_ha::run)
}
