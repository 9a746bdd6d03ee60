//! `proxshift_test.probe.protocol_probe`: a tiny file-managing module used only by the tests, so the
//! protocol crate is proven under real `ansible-playbook` (check mode, diff, no_log, errors, panics,
//! module_defaults) independently of any product module.

use ansible_module::{run, ArgSpec, Failure, Module, Opt, Outcome, Type};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Options {
    path: String,
    content: String,
    secret: Option<String>,
    mode: String,
    count: i64,
    flags: Option<Vec<String>>,
    settings: Option<serde_json::Value>,
    api_host: Option<String>,
}

fn spec() -> ArgSpec {
    ArgSpec::new(vec![
        Opt::path("path").required().aliases(&["dest"]),
        Opt::str("content").default(""),
        Opt::str("secret").no_log().env(&["PROBE_SECRET"]),
        Opt::str("mode")
            .choices(&["ok", "fail", "panic"])
            .default("ok"),
        Opt::int("count").default(1),
        Opt::list("flags", Type::Str),
        Opt::dict("settings").options(ArgSpec::new(vec![
            Opt::str("name").required(),
            Opt::bool("enabled").default(true),
        ])),
        Opt::str("api_host"),
    ])
}

fn body(m: &mut Module) -> Result<Outcome, Failure> {
    let o: Options = m.options()?;
    match o.mode.as_str() {
        "panic" => panic!("probe was asked to panic"),
        "fail" => {
            // Deliberately puts the secret in the message: the module must mask it.
            let secret = o.secret.unwrap_or_default();
            return Err(
                Failure::new(format!("login failed with secret {secret}")).with("echo", secret)
            );
        }
        _ => {}
    }
    let before = std::fs::read_to_string(&o.path).ok();
    let changed = before.as_deref() != Some(o.content.as_str());
    if changed {
        m.add_diff(
            json!(before.clone().unwrap_or_default()),
            json!(o.content),
            &o.path,
            &o.path,
        );
        if !m.check_mode {
            std::fs::write(&o.path, &o.content)
                .map_err(|e| Failure::new(format!("cannot write path {}: {e}", o.path)))?;
        }
    }
    Ok(Outcome::new(changed)
        .msg(if changed {
            "content updated"
        } else {
            "content already right"
        })
        .with("path", o.path)
        .with("count", o.count)
        .with("flags", json!(o.flags))
        .with("settings", o.settings.unwrap_or_default())
        .with("api_host", json!(o.api_host))
        .with("secret_echo", json!(o.secret))
        .with("check_mode", m.check_mode))
}

fn main() {
    run(spec(), body)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sidecar_matches_spec() {
        let yaml = include_str!(
            "../../../tests/collections/ansible_collections/proxshift_test/probe/plugins/modules/protocol_probe.yml"
        );
        let problems = ansible_module::sidecar::check(&super::spec(), yaml, "protocol_probe");
        assert!(
            problems.is_empty(),
            "sidecar drift:\n{}",
            problems.join("\n")
        );
    }
}
