//! The `proxshift.openshift.acm_cluster_info` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(acm_cluster_info::argument_spec(), acm_cluster_info::run)
}
