//! The Ansible binary-module protocol in Rust — the equivalent of Python's `AnsibleModule`.
//!
//! A module binary is a thin `main`:
//!
//! ```no_run
//! use ansible_module::{run, ArgSpec, Opt, Outcome};
//! fn main() {
//!     run(ArgSpec::new(vec![Opt::str("name").required()]), |m| {
//!         let name = m.params["name"].as_str().unwrap_or_default().to_string();
//!         Ok(Outcome::new(false).msg(format!("hello {name}")))
//!     })
//! }
//! ```
//!
//! ansible-core runs a binary as `MODULE ARGS_FILE` and trusts it with everything `AnsibleModule` does
//! for Python modules: type coercion, check mode, diff, no_log masking and the result shape. This crate
//! does all of it; see `ARCHITECTURE.md` for the invariants.

pub mod child;
pub mod coerce;
pub mod mask;
pub mod module;
pub mod sidecar;
pub mod spec;
pub mod validate;

pub use module::{execute, forget_secrets, run, run_plugin, run_stdin, Failure, Module, Outcome};
pub use spec::{ArgSpec, Opt, Type};
