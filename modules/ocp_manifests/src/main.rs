//! The `proxshift.openshift.ocp_manifests` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(ocp_manifests::argument_spec(), ocp_manifests::run)
}
