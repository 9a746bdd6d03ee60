//! `proxshift.openshift.acm_import`: Import an OpenShift cluster into Red Hat ACM / open-cluster-management.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};

/// The module's options; the sidecar `plugins/modules/acm_import.yml` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![Opt::str("state")])
}

pub fn run(_m: &mut Module) -> Result<Outcome, Failure> {
    Err(Failure::new(
        "proxshift.openshift.acm_import is not implemented yet",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!(
            "../../../ansible_collections/proxshift/openshift/plugins/modules/acm_import.yml"
        );
        let problems = ansible_module::sidecar::check(&super::argument_spec(), yaml, "acm_import");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
