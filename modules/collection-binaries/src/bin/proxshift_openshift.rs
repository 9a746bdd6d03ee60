//! The modules of `proxshift.openshift` in one binary (see the crate docs for how one is chosen).

use collection_binaries::{dispatch, Entry};

fn main() {
    dispatch(
        &[
            Entry {
                name: "ocp_manifests",
                main: || ansible_module::run(ocp_manifests::argument_spec(), ocp_manifests::run),
            },
            Entry {
                name: "cluster_auth",
                main: || ansible_module::run(cluster_auth::argument_spec(), cluster_auth::run),
            },
            Entry {
                name: "cluster_upgrade",
                main: || {
                    ansible_module::run(cluster_upgrade::argument_spec(), cluster_upgrade::run)
                },
            },
            Entry {
                name: "acm_import",
                main: || ansible_module::run(acm_import::argument_spec(), acm_import::run),
            },
            Entry {
                name: "acm_cluster_info",
                main: || {
                    ansible_module::run(acm_cluster_info::argument_spec(), acm_cluster_info::run)
                },
            },
            Entry {
                name: "cluster_nodes",
                main: || ansible_module::run(cluster_nodes::argument_spec(), cluster_nodes::run),
            },
            Entry {
                name: "etcd_backup",
                main: || ansible_module::run(etcd_backup::argument_spec(), etcd_backup::run),
            },
            Entry {
                name: "cluster_config",
                main: || ansible_module::run(cluster_config::argument_spec(), cluster_config::run),
            },
        ],
        &[],
    )
}
