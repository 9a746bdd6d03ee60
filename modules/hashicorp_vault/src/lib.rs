//! `proxshift.hashi_vault.hashicorp_vault`: Read, write and delete KV secrets in HashiCorp Vault or OpenBao.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};

/// The module's options; the sidecar `plugins/modules/hashicorp_vault.yml` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![Opt::str("state")])
}

pub fn run(_m: &mut Module) -> Result<Outcome, Failure> {
    Err(Failure::new(
        "proxshift.hashi_vault.hashicorp_vault is not implemented yet",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!("../../../ansible_collections/proxshift/hashi_vault/plugins/modules/hashicorp_vault.yml");
        let problems =
            ansible_module::sidecar::check(&super::argument_spec(), yaml, "hashicorp_vault");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
