//! The `proxshift.openshift.etcd_backup` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(etcd_backup::argument_spec(), etcd_backup::run)
}
