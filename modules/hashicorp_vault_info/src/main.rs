//! The `proxshift.hashi_vault.hashicorp_vault_info` module binary; with `--lookup` (JSON options on
//! stdin) the backend of the `proxshift.hashi_vault.kv` lookup. All logic lives in the library.

fn main() {
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("--lookup")) {
        hashicorp_vault_info::lookup::main()
    }
    ansible_module::run(
        hashicorp_vault_info::argument_spec(),
        hashicorp_vault_info::run,
    )
}
