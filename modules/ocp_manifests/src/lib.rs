//! `proxshift.openshift.ocp_manifests`: Validate and render OpenShift agent-based install manifests.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};

/// The module's options; the sidecar `plugins/modules/ocp_manifests.yml` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![Opt::str("state")])
}

pub fn run(_m: &mut Module) -> Result<Outcome, Failure> {
    Err(Failure::new(
        "proxshift.openshift.ocp_manifests is not implemented yet",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!(
            "../../../ansible_collections/proxshift/openshift/plugins/modules/ocp_manifests.yml"
        );
        let problems =
            ansible_module::sidecar::check(&super::argument_spec(), yaml, "ocp_manifests");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
