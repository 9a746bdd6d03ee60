//! The `proxshift.openshift.cluster_config` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(cluster_config::argument_spec(), cluster_config::run)
}
