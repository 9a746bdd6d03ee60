//! The modules of `proxshift.hashi_vault` in one binary (see the crate docs for how one is chosen).

use collection_binaries::{dispatch, Entry};

fn main() {
    dispatch(
        &[
            Entry {
                name: "hashicorp_vault",
                main: hashicorp_vault::main,
            },
            Entry {
                name: "hashicorp_vault_info",
                main: hashicorp_vault_info::main,
            },
        ],
        &[("--lookup", "hashicorp_vault_info")],
    )
}
