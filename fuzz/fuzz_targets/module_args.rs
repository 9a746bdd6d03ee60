//! Argument parsing, coercion and validation of every module's real spec through the protocol crate's
//! `execute` (what each binary runs on its args file), plus the per-type coercion rules. The module
//! bodies that talk to APIs are replaced by their pure option parsing, so no input ever reaches I/O.
#![no_main]

use ansible_module::{coerce, execute, forget_secrets, Failure, Module, Outcome, Type};
use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use proxshift_fuzz::{check_result, module_specs, object};

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

/// The body a fuzzed module runs after validation: its pure option parsing where it has one.
fn body_for(name: &str) -> Body {
    match name {
        "proxmox_vm" => typed_proxmox_vm,
        "cluster_upgrade" => typed_cluster_upgrade,
        _ => validate_only,
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let mods = module_specs();
    let (name, spec) = &mods[data[0] as usize % mods.len()];
    let body = body_for(name);
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
    forget_secrets();
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
