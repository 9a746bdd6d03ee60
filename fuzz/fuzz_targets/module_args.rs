//! Argument parsing, coercion and validation of every module's real spec through the protocol crate's
//! `execute` (what each binary runs on its args file), plus the per-type coercion rules. The module
//! bodies that talk to APIs are replaced by their pure option parsing, so no input ever reaches I/O.
#![no_main]

use ansible_module::{coerce, execute, ArgSpec, Failure, Module, Outcome, Type};
use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use proxshift_fuzz::{check_result, object};

type Body = fn(&mut Module) -> Result<Outcome, Failure>;

fn typed_proxmox_vm(m: &mut Module) -> Result<Outcome, Failure> {
    use proxmox_vm::options::{merge_item, shared_defaults, vm_args, Args};
    let args: Args = m.options()?;
    let defaults = shared_defaults(&m.params);
    let items: Vec<_> = match &args.vms {
        Some(list) => list.iter().map(|i| merge_item(&defaults, i)).collect(),
        None => vec![defaults],
    };
    for item in items {
        if let Ok(a) = vm_args(item) {
            let _ = proxmox_vm::check_args(&a);
        }
    }
    Ok(Outcome::new(false))
}

fn typed_cluster_upgrade(m: &mut Module) -> Result<Outcome, Failure> {
    if let Some(v) = m.params.get("version").and_then(|v| v.as_str()) {
        let _ = cluster_upgrade::decide::parse_request(v);
    }
    Ok(Outcome::new(false))
}

fn validate_only(_: &mut Module) -> Result<Outcome, Failure> {
    Ok(Outcome::new(false))
}

type Entry = (&'static str, ArgSpec, Body);

/// Built once: the specs are plain data and building thirteen per input would dominate the run.
/// The plugin backends (`--inventory`, `--lookup`) validate their stdin JSON with their own specs.
fn modules() -> &'static [Entry; 15] {
    static MODULES: std::sync::OnceLock<[Entry; 15]> = std::sync::OnceLock::new();
    MODULES.get_or_init(|| {
        [
            ("proxmox_vm", proxmox_vm::argument_spec(), typed_proxmox_vm),
            ("vm_lifecycle", vm_lifecycle::argument_spec(), validate_only),
            (
                "hashicorp_vault",
                hashicorp_vault::argument_spec(),
                validate_only,
            ),
            (
                "ocp_manifests",
                ocp_manifests::argument_spec(),
                validate_only,
            ),
            ("acm_import", acm_import::argument_spec(), validate_only),
            ("cluster_auth", cluster_auth::argument_spec(), validate_only),
            (
                "proxmox_access",
                proxmox_access::argument_spec(),
                validate_only,
            ),
            (
                "proxmox_vm_info",
                proxmox_vm_info::argument_spec(),
                validate_only,
            ),
            (
                "proxshift.proxmox.proxmox",
                proxmox_vm_info::inventory::argument_spec(),
                validate_only,
            ),
            (
                "hashicorp_vault_info",
                hashicorp_vault_info::argument_spec(),
                validate_only,
            ),
            (
                "proxshift.hashi_vault.kv",
                hashicorp_vault_info::lookup::argument_spec(),
                validate_only,
            ),
            (
                "acm_cluster_info",
                acm_cluster_info::argument_spec(),
                validate_only,
            ),
            (
                "cluster_nodes",
                cluster_nodes::argument_spec(),
                validate_only,
            ),
            (
                "cluster_upgrade",
                cluster_upgrade::argument_spec(),
                typed_cluster_upgrade,
            ),
            (
                "cluster_config",
                cluster_config::argument_spec(),
                validate_only,
            ),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let mods = modules();
    let (name, spec, body) = &mods[data[0] as usize % mods.len()];
    let mut u = Unstructured::new(&data[2..]);
    // Half the inputs are raw text (the JSON parser and top-level shape), half spec-shaped objects.
    let text = if data[1] & 1 == 0 {
        String::from_utf8_lossy(&data[2..]).into_owned()
    } else {
        match object(&mut u, spec, 0) {
            Ok(v) => v.to_string(),
            Err(_) => return,
        }
    };
    let ran = std::cell::Cell::new(false);
    let (result, code) = execute(&text, name, spec, |m| {
        ran.set(true);
        body(m)
    });
    let failed = result.get("failed") == Some(&serde_json::Value::Bool(true));
    assert_eq!(
        code != 0,
        failed,
        "exit code {code} disagrees with the result: {result}"
    );
    check_result(&result, spec, ran.get(), &text);

    // Coercion alone, every type: never a panic, an error names the types involved.
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        for ty in [
            Type::Str,
            Type::Int,
            Type::Float,
            Type::Bool,
            Type::List,
            Type::Dict,
            Type::Path,
            Type::Raw,
            Type::Json,
        ] {
            if let Err(e) = coerce::coerce(&v, ty) {
                assert!(!e.to_string().is_empty());
            }
        }
    }
});
