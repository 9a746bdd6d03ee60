//! `proxshift.proxmox.proxmox_vm`: Create, converge and remove Proxmox VE virtual machines for OpenShift nodes.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};

/// The module's options; the sidecar `plugins/modules/proxmox_vm.yml` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![Opt::str("state")])
}

pub fn run(_m: &mut Module) -> Result<Outcome, Failure> {
    Err(Failure::new(
        "proxshift.proxmox.proxmox_vm is not implemented yet",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!(
            "../../../ansible_collections/proxshift/proxmox/plugins/modules/proxmox_vm.yml"
        );
        let problems = ansible_module::sidecar::check(&super::argument_spec(), yaml, "proxmox_vm");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
