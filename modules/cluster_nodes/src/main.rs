//! The `proxshift.openshift.cluster_nodes` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(cluster_nodes::argument_spec(), cluster_nodes::run)
}
