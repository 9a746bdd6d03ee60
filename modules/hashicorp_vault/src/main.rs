//! The `proxshift.hashi_vault.hashicorp_vault` module binary: all logic lives in the library.

fn main() {
    hashicorp_vault::main()
}
