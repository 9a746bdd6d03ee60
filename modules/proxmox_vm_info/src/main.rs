//! The `proxshift.proxmox.proxmox_vm_info` module binary; with `--inventory` (JSON options on stdin)
//! the backend of the `proxshift.proxmox.proxmox` inventory plugin. All logic lives in the library.

fn main() {
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("--inventory")) {
        proxmox_vm_info::inventory::main()
    }
    ansible_module::run(proxmox_vm_info::argument_spec(), proxmox_vm_info::run)
}
