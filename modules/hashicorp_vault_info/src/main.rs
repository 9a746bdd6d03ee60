//! The `proxshift.hashi_vault.hashicorp_vault_info` module binary; with `--lookup` (JSON options on
//! stdin) the backend of the `proxshift.hashi_vault.kv` lookup. All logic lives in the library.

fn main() {
    hashicorp_vault_info::main()
}
