//! `proxshift.proxmox.vm_lifecycle`: Power, readiness and health of a cluster's Proxmox VE virtual machines.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};

/// The module's options; the sidecar `plugins/modules/vm_lifecycle.yml` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![Opt::str("state")])
}

pub fn run(_m: &mut Module) -> Result<Outcome, Failure> {
    Err(Failure::new(
        "proxshift.proxmox.vm_lifecycle is not implemented yet",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!(
            "../../../ansible_collections/proxshift/proxmox/plugins/modules/vm_lifecycle.yml"
        );
        let problems =
            ansible_module::sidecar::check(&super::argument_spec(), yaml, "vm_lifecycle");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
