//! `proxshift.openshift.cluster_auth`: Log in to an OpenShift cluster and wait for it to be ready.

use ansible_module::{ArgSpec, Failure, Module, Opt, Outcome};

/// The module's options; the sidecar `plugins/modules/cluster_auth.yml` documents exactly these.
pub fn argument_spec() -> ArgSpec {
    ArgSpec::new(vec![Opt::str("state")])
}

pub fn run(_m: &mut Module) -> Result<Outcome, Failure> {
    Err(Failure::new(
        "proxshift.openshift.cluster_auth is not implemented yet",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!(
            "../../../ansible_collections/proxshift/openshift/plugins/modules/cluster_auth.yml"
        );
        let problems =
            ansible_module::sidecar::check(&super::argument_spec(), yaml, "cluster_auth");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
