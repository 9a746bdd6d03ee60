//! No `no_log` value ever appears in a module result. Every module's spec gets arguments with canaries
//! in each of its `no_log` options (any depth, any name, a free dict's `no_log_keys`), often next to
//! options that fail to validate; the body then echoes everything it was given the ways a module can
//! (in `msg`, as data, as dict keys, in a failure with details, as a number-bearing text). The JSON
//! result — `invocation` included — must hold none of the canaries.
#![no_main]

use ansible_module::{execute, forget_secrets, Failure, Module, Outcome};
use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use proxshift_fuzz::{module_specs, object, plant_canaries};
use serde_json::{json, Map, Value};

/// Every string leaf of the validated options, as a module might quote them.
fn leaves(v: &Value, into: &mut Vec<String>) {
    match v {
        Value::String(s) => into.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| leaves(x, into)),
        Value::Object(m) => m.values().for_each(|x| leaves(x, into)),
        _ => {}
    }
}

fn echo(m: &mut Module, how: u8) -> Result<Outcome, Failure> {
    let params = Value::Object(m.params.clone());
    let mut strings = Vec::new();
    leaves(&params, &mut strings);
    let as_keys: Map<String, Value> = strings
        .iter()
        .map(|s| (format!("key {s}"), json!(s.len())))
        .collect();
    let text = format!("options: {params} / {}", strings.join(" "));
    m.warn(format!("warning about {text}"));
    m.add_diff(params.clone(), json!(text), "before", "after");
    match how % 3 {
        0 => Ok(Outcome::new(true)
            .msg(text)
            .with("echo", params)
            .with("keys", Value::Object(as_keys))),
        1 => Err(Failure::new(format!("cannot connect: {text}"))
            .with("response", json!({"body": strings, "headers": as_keys}))),
        _ => Err(Failure::new("failed").with("detail", params)),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let mods = module_specs();
    let (name, spec) = &mods[data[0] as usize % mods.len()];
    let how = data[1];
    let mut u = Unstructured::new(&data[3..]);
    let Ok(mut args) = object(&mut u, spec, 0) else {
        return;
    };
    let Ok(canaries) = plant_canaries(&mut u, &mut args, spec) else {
        return;
    };
    if let Value::Object(m) = &mut args {
        m.insert("_ansible_diff".into(), json!(data[2] & 1 == 1));
        m.insert("_ansible_inject_invocation".into(), json!(data[2] & 2 == 0));
    }
    let text = args.to_string();
    forget_secrets();
    let (result, _) = execute(&text, name, spec, |m| echo(m, how));
    let shown = result.to_string();
    for c in &canaries {
        assert!(
            !shown.contains(c.as_str()),
            "no_log value {c} shown in the result of {name}: {shown}\ninput: {text}"
        );
    }
});
