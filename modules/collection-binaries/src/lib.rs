//! One binary per collection and architecture, holding every module of the collection: the Galaxy
//! tarball carries one build per architecture instead of one per module (a collection's modules share
//! most of their code: the HTTP/TLS stack, the clients, the module protocol).
//!
//! Which module runs is decided from, in order:
//! 1. the name the binary was started under (`argv[0]`, e.g. a link `proxmox_vm`, or Ansible's remote
//!    copy `AnsiballZ_proxmox_vm`), when it is one of the collection's modules;
//! 2. a backend flag in `argv[1]` (`--lookup`, `--inventory`: the controller-side plugins' entry points),
//!    which only one module of a collection serves;
//! 3. `_ansible_module_name` in the args file named by `argv[1]`, which ansible-core writes for every
//!    module (`proxshift.proxmox.proxmox_vm`, or the short name under a play's `collections:`).
//!
//! The chosen module then runs exactly as its own binary would (it reads `argv` itself). A name that is
//! none of the collection's modules ends in one failed JSON result naming the modules it holds.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::Value;

/// A module of the collection: its short name and its `main`.
pub struct Entry {
    pub name: &'static str,
    pub main: fn() -> !,
}

/// Why no module could be chosen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DispatchError {
    #[error("this binary holds the modules {known}; it was called as {called:?} with no args file naming one")]
    NoModuleName { called: String, known: String },
    #[error("cannot read the args file {path}: {reason}")]
    ArgsFile { path: String, reason: String },
    #[error(
        "the args file {path} holds no _ansible_module_name (is it an Ansible module args file?)"
    )]
    NoNameInArgs { path: String },
    #[error("{name} is not a module of this collection, which holds {known}")]
    Unknown { name: String, known: String },
}

/// The module name in `argv[0]`: the file name, without Ansible's `AnsiballZ_` prefix.
pub fn name_from_argv0(argv0: &str) -> &str {
    let base = Path::new(argv0)
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or(argv0);
    base.strip_prefix("AnsiballZ_").unwrap_or(base)
}

/// The short module name in an args file's text: `_ansible_module_name`'s last dotted part.
pub fn name_from_args(text: &str) -> Option<String> {
    let args: Value = serde_json::from_str(text).ok()?;
    let full = args.get("_ansible_module_name")?.as_str()?;
    full.rsplit('.').next().map(str::to_string)
}

fn known(table: &[Entry]) -> String {
    table.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

fn find<'t>(table: &'t [Entry], name: &str) -> Option<&'t Entry> {
    table.iter().find(|e| e.name == name)
}

/// Choose the module for `argv0`/`argv1` (pure; `read` reads the args file).
pub fn choose<'t>(
    table: &'t [Entry],
    flags: &[(&str, &str)],
    argv0: &str,
    argv1: Option<&str>,
    read: impl FnOnce(&str) -> Result<String, String>,
) -> Result<&'t Entry, DispatchError> {
    if let Some(entry) = find(table, name_from_argv0(argv0)) {
        return Ok(entry);
    }
    let no_name = || DispatchError::NoModuleName {
        called: argv0.to_string(),
        known: known(table),
    };
    let arg = argv1.ok_or_else(no_name)?;
    if let Some((_, module)) = flags.iter().find(|(flag, _)| *flag == arg) {
        return find(table, module).ok_or_else(|| DispatchError::Unknown {
            name: module.to_string(),
            known: known(table),
        });
    }
    if arg.starts_with("--") {
        return Err(no_name());
    }
    let text = read(arg).map_err(|reason| DispatchError::ArgsFile {
        path: arg.to_string(),
        reason,
    })?;
    let name = name_from_args(&text).ok_or_else(|| DispatchError::NoNameInArgs {
        path: arg.to_string(),
    })?;
    find(table, &name).ok_or_else(|| DispatchError::Unknown {
        name,
        known: known(table),
    })
}

/// `main` of a collection binary: run the chosen module, or print one failed result.
pub fn dispatch(table: &[Entry], flags: &[(&str, &str)]) -> ! {
    let argv: Vec<String> = std::env::args_os()
        .take(2)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let argv0 = argv.first().map(String::as_str).unwrap_or_default();
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| e.to_string());
    match choose(table, flags, argv0, argv.get(1).map(String::as_str), read) {
        Ok(entry) => (entry.main)(),
        Err(e) => {
            let result =
                serde_json::json!({"failed": true, "changed": false, "msg": e.to_string()});
            println!("{result}");
            std::process::exit(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> ! {
        unreachable!()
    }

    const TABLE: [Entry; 2] = [
        Entry {
            name: "proxmox_vm",
            main: never,
        },
        Entry {
            name: "proxmox_vm_info",
            main: never,
        },
    ];
    const FLAGS: [(&str, &str); 1] = [("--inventory", "proxmox_vm_info")];

    fn pick(
        argv0: &str,
        argv1: Option<&str>,
        file: Result<&str, &str>,
    ) -> Result<&'static str, DispatchError> {
        choose(&TABLE, &FLAGS, argv0, argv1, |_| {
            file.map(str::to_string).map_err(str::to_string)
        })
        .map(|e| e.name)
    }

    #[test]
    fn the_name_it_was_started_under_wins() {
        assert_eq!(
            pick("/x/proxmox_vm", Some("--argument-spec"), Err("unread")),
            Ok("proxmox_vm")
        );
        assert_eq!(
            pick(
                "/tmp/AnsiballZ_proxmox_vm_info",
                Some("args"),
                Err("unread")
            ),
            Ok("proxmox_vm_info")
        );
    }

    #[test]
    fn a_backend_flag_names_its_module() {
        assert_eq!(
            pick("proxshift_proxmox", Some("--inventory"), Err("unread")),
            Ok("proxmox_vm_info")
        );
    }

    #[test]
    fn the_args_file_names_the_module_by_fqcn_or_short_name() {
        let args = r#"{"_ansible_module_name": "proxshift.proxmox.proxmox_vm", "name": "x"}"#;
        assert_eq!(
            pick("/t/AnsiballZ_proxshift_proxmox", Some("/t/args"), Ok(args)),
            Ok("proxmox_vm")
        );
        let short = r#"{"_ansible_module_name": "proxmox_vm_info"}"#;
        assert_eq!(
            pick("proxshift_proxmox", Some("/t/args"), Ok(short)),
            Ok("proxmox_vm_info")
        );
    }

    #[test]
    fn what_names_no_module_of_the_collection_is_refused_clearly() {
        let other = r#"{"_ansible_module_name": "proxshift.openshift.ocp_manifests"}"#;
        let err = pick("proxshift_proxmox", Some("/t/args"), Ok(other)).unwrap_err();
        assert_eq!(err.to_string(), "ocp_manifests is not a module of this collection, which holds proxmox_vm, proxmox_vm_info");
        assert!(matches!(
            pick("proxshift_proxmox", None, Ok("{}")),
            Err(DispatchError::NoModuleName { .. })
        ));
        assert!(matches!(
            pick("proxshift_proxmox", Some("--argument-spec"), Ok("{}")),
            Err(DispatchError::NoModuleName { .. })
        ));
        assert!(matches!(
            pick("p", Some("/t/args"), Ok("{}")),
            Err(DispatchError::NoNameInArgs { .. })
        ));
        assert!(matches!(
            pick("p", Some("/t/args"), Ok("not json")),
            Err(DispatchError::NoNameInArgs { .. })
        ));
        let err = pick("p", Some("/t/args"), Err("No such file")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read the args file /t/args: No such file"
        );
    }
}
