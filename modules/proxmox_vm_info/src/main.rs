//! The `proxshift.proxmox.proxmox_vm_info` module binary; with `--inventory` (JSON options on stdin)
//! the backend of the `proxshift.proxmox.proxmox` inventory plugin. All logic lives in the library.

fn main() {
    proxmox_vm_info::main()
}
