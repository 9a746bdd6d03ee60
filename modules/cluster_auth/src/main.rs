//! The `proxshift.openshift.cluster_auth` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(cluster_auth::argument_spec(), cluster_auth::run)
}
