//! install-config / agent-config validation: arguments → typed options → `plan` (every check) →
//! render → verify, exactly the module's pure path (no files written, no installer run). Never a panic;
//! an invalid cluster is a list of problems, each naming the option path it is about.
#![no_main]

use ansible_module::{execute, Failure, Outcome};
use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use ocp_manifests::model::Options;
use ocp_manifests::{plan, render, verify};
use proxshift_fuzz::{check_result, object, option_names};
use serde_json::{json, Value};

/// A valid SNO cluster; mutations of it reach far deeper into `plan` than random objects do.
fn base() -> Value {
    json!({
        "cluster_name": "sno1", "base_domain": "example.com", "version": "4.19",
        "machine_networks": ["10.0.0.0/24"], "gateway": "10.0.0.1", "dns_servers": ["10.0.0.2"],
        "pull_secret": "{\"auths\":{\"r.example.com\":{\"auth\":\"Y2FuYXJ5OnB1bGw=\"}}}",
        "nodes": [{"name": "sno1-0", "role": "master", "mac": "BC:24:11:00:00:01", "ip": "10.0.0.10"}],
        "output_dir": "/nonexistent/fuzz"
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    static SPEC: std::sync::OnceLock<ansible_module::ArgSpec> = std::sync::OnceLock::new();
    let spec = SPEC.get_or_init(ocp_manifests::argument_spec);
    let mut u = Unstructured::new(rest);
    let args = match mode % 3 {
        0 => match object(&mut u, spec, 0) {
            Ok(v) => v,
            Err(_) => return,
        },
        // Replace a few top-level options of the valid base with generated values.
        1 => {
            let Ok(Value::Object(gen)) = object(&mut u, spec, 0) else {
                return;
            };
            let mut b = base();
            for (k, v) in gen.into_iter().take(3) {
                b[k] = v;
            }
            b
        }
        _ => match serde_json::from_slice::<Value>(rest) {
            Ok(v) => v,
            Err(_) => return,
        },
    };
    let text = args.to_string();
    let ran = std::cell::Cell::new(false);
    let (result, _) = execute(&text, "ocp_manifests", spec, |m| {
        ran.set(true);
        let mut o: Options = m.options()?;
        o.template_dir = None; // the only input that reads files
        let planned = plan::plan(&o);
        let Some(p) = planned.plan else {
            assert!(!planned.problems.is_empty(), "no plan and no problem");
            let names = option_names(spec);
            for pr in &planned.problems {
                let head = pr.path.split(['.', '[']).next().unwrap_or("");
                assert!(
                    names.contains(head),
                    "problem path {:?} names no option ({})",
                    pr.path,
                    pr.msg
                );
                assert!(!pr.msg.is_empty());
            }
            return Err(Failure::new(format!("{} problems", planned.problems.len())));
        };
        let (ic, ac) = render::render(&p, None).map_err(|e| Failure::new(e.to_string()))?;
        let problems = verify::verify(&p, &ic, &ac);
        assert!(
            problems.is_empty(),
            "a validated plan renders files that fail verification: {problems:?}\nargs: {text}"
        );
        Ok(Outcome::new(false))
    });
    check_result(&result, spec, ran.get(), &text);
});
