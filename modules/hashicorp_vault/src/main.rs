//! The `proxshift.hashi_vault.hashicorp_vault` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(hashicorp_vault::argument_spec(), hashicorp_vault::run)
}
