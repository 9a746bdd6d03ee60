//! The `proxshift.openshift.cluster_upgrade` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(cluster_upgrade::argument_spec(), cluster_upgrade::run)
}
