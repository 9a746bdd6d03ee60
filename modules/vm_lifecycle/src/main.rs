//! The `proxshift.proxmox.vm_lifecycle` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(vm_lifecycle::argument_spec(), vm_lifecycle::run)
}
