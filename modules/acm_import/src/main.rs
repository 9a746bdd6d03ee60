//! The `proxshift.openshift.acm_import` module binary: all logic lives in the library.

fn main() {
    ansible_module::run(acm_import::argument_spec(), acm_import::run)
}
