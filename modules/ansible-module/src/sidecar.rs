//! Keep a module's documentation and the Rust argument spec in step: the documentation stub
//! `plugins/modules/NAME.py` ([`check_stub`]: `DOCUMENTATION`, `EXAMPLES`, `RETURN` as Python strings), or a
//! sidecar `plugins/modules/NAME.yml` ([`check`]: the same three as YAML keys).
//!
//! The spec in Rust is the source of truth for validation (it alone knows `no_log`, which the docs may
//! not carry); the documentation is what `ansible-doc` shows. [`check_stub`] lists every difference, so
//! each module has a unit test that fails the moment the two drift.

use serde_json::{Map, Value};

use crate::spec::{ArgSpec, Opt, Type};

/// Every difference between `spec` and the sidecar text `yaml`, plus structural problems of the
/// sidecar itself (missing sections, examples using options that do not exist).
pub fn check(spec: &ArgSpec, yaml: &str, module: &str) -> Vec<String> {
    match serde_yaml_ng::from_str(yaml) {
        Ok(doc) => check_doc(spec, &doc, module),
        Err(e) => vec![format!("sidecar is not valid YAML: {e}")],
    }
}

/// As [`check`], for a Python documentation stub (`DOCUMENTATION = r"""..."""`, `EXAMPLES`, `RETURN`).
pub fn check_stub(spec: &ArgSpec, python: &str, module: &str) -> Vec<String> {
    check_stub_with(spec, python, module, &|_| None)
}

/// As [`check_stub`], with the documentation fragments the stub names in
/// `extends_documentation_fragment` read through `fragment` (a fragment's name → the text of its
/// Python file, `None` when there is none): their options count as the stub's, the stub's own
/// winning where both document one, as ansible-doc merges them.
pub fn check_stub_with(
    spec: &ArgSpec,
    python: &str,
    module: &str,
    fragment: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut doc = Map::new();
    for (name, yaml) in [
        ("DOCUMENTATION", true),
        ("EXAMPLES", false),
        ("RETURN", true),
    ] {
        let Some(text) = python_block(python, name) else {
            return vec![format!("no {name} = r\"\"\"...\"\"\" block")];
        };
        let value = if yaml {
            match serde_yaml_ng::from_str(text) {
                Ok(v) => v,
                Err(e) => return vec![format!("{name} is not valid YAML: {e}")],
            }
        } else {
            Value::String(text.to_string())
        };
        doc.insert(name.to_string(), value);
    }
    if let Err(e) = merge_fragments(&mut doc["DOCUMENTATION"], fragment) {
        return vec![e];
    }
    check_doc(spec, &Value::Object(doc), module)
}

/// Adds the options of the fragments `documentation` extends to its own (its own kept).
fn merge_fragments(
    documentation: &mut Value,
    fragment: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let names: Vec<String> = match documentation.get("extends_documentation_fragment") {
        None => return Ok(()),
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or("extends_documentation_fragment lists something that is not a name")?,
        Some(other) => return Err(format!("extends_documentation_fragment is {other}")),
    };
    for name in names {
        let text = fragment(&name).ok_or(format!("documentation fragment {name} not found"))?;
        let block = python_block(&text, "DOCUMENTATION").ok_or(format!(
            "fragment {name} has no DOCUMENTATION = r\"\"\"...\"\"\" block"
        ))?;
        let frag: Value = serde_yaml_ng::from_str(block)
            .map_err(|e| format!("fragment {name}'s DOCUMENTATION is not valid YAML: {e}"))?;
        let Some(Value::Object(options)) = frag.get("options") else {
            continue;
        };
        if !documentation["options"].is_object() {
            documentation["options"] = Value::Object(Map::new());
        }
        let own = documentation["options"].as_object_mut().expect("a mapping");
        for (k, v) in options {
            own.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    Ok(())
}

/// The text of `NAME = r"""..."""` in a Python file.
pub fn python_block<'a>(python: &'a str, name: &str) -> Option<&'a str> {
    let (_, rest) = python.split_once(&format!("{name} = r\"\"\""))?;
    rest.split_once("\"\"\"").map(|(block, _)| block)
}

fn check_doc(spec: &ArgSpec, doc: &Value, module: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let documentation = &doc["DOCUMENTATION"];
    for key in [
        "module",
        "short_description",
        "description",
        "author",
        "options",
    ] {
        if documentation.get(key).is_none() {
            problems.push(format!("DOCUMENTATION has no '{key}'"));
        }
    }
    if documentation["module"].as_str() != Some(module) {
        problems.push(format!(
            "DOCUMENTATION.module is {:?}, expected {module:?}",
            documentation["module"]
        ));
    }
    if !doc["RETURN"].is_object() {
        problems.push("RETURN is missing or not a mapping".into());
    }
    match doc["EXAMPLES"].as_str() {
        None => problems.push("EXAMPLES is missing or not a string".into()),
        Some(ex) => problems.extend(check_examples(spec, ex, module)),
    }
    let empty = Map::new();
    let options = documentation["options"].as_object().unwrap_or(&empty);
    compare_level(spec, options, "", &mut problems);
    problems
}

/// Every difference between `spec` and the `DOCUMENTATION = r"""..."""` of a controller-side plugin
/// (an inventory or lookup plugin whose backend binary validates with `spec`): options, types,
/// defaults, choices, aliases and environment variables. `internal` names spec options the plugin
/// fills in itself (undocumented); `ansible_only` names documented options the plugin handles in
/// Python (never sent to the backend).
pub fn check_plugin(
    spec: &ArgSpec,
    python: &str,
    name: &str,
    internal: &[&str],
    ansible_only: &[&str],
) -> Vec<String> {
    let Some(text) = python_block(python, "DOCUMENTATION") else {
        return vec!["no DOCUMENTATION = r\"\"\"...\"\"\" block".into()];
    };
    let doc: Value = match serde_yaml_ng::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![format!("DOCUMENTATION is not valid YAML: {e}")],
    };
    let mut problems = Vec::new();
    if doc["name"].as_str() != Some(name) {
        problems.push(format!(
            "DOCUMENTATION.name is {:?}, expected {name:?}",
            doc["name"]
        ));
    }
    let mut options = doc["options"].as_object().cloned().unwrap_or_default();
    options.retain(|k, _| !ansible_only.contains(&k.as_str()));
    let visible = ArgSpec::new(
        spec.options
            .iter()
            .filter(|o| !internal.contains(&o.name))
            .cloned()
            .collect(),
    );
    compare_level(&visible, &options, "", &mut problems);
    for opt in &visible.options {
        let documented: Vec<&str> = options
            .get(opt.name)
            .and_then(|d| d["env"].as_array())
            .map(|a| a.iter().filter_map(|e| e["name"].as_str()).collect())
            .unwrap_or_default();
        if documented != opt.env_fallback {
            problems.push(format!(
                "option '{}': documented env {documented:?}, spec env {:?}",
                opt.name, opt.env_fallback
            ));
        }
    }
    problems
}

fn compare_level(
    spec: &ArgSpec,
    docs: &Map<String, Value>,
    prefix: &str,
    problems: &mut Vec<String>,
) {
    for opt in &spec.options {
        let name = format!("{prefix}{}", opt.name);
        match docs.get(opt.name) {
            None => problems.push(format!("option '{name}' is in the spec but not documented")),
            Some(d) => compare_option(opt, d, &name, problems),
        }
    }
    for key in docs.keys() {
        if spec.get(key).is_none() {
            problems.push(format!(
                "option '{prefix}{key}' is documented but not in the spec"
            ));
        }
    }
}

fn compare_option(opt: &Opt, d: &Value, name: &str, problems: &mut Vec<String>) {
    if d.get("description").is_none() {
        problems.push(format!("option '{name}' has no description"));
    }
    if d.get("no_log").is_some() {
        problems.push(format!(
            "option '{name}': no_log may not appear in documentation (ansible-test rejects it)"
        ));
    }
    let doc_type = d["type"].as_str().unwrap_or("str");
    if doc_type != opt.ty.ansible_name() {
        problems.push(format!(
            "option '{name}': documented type {doc_type}, spec type {}",
            opt.ty.ansible_name()
        ));
    }
    let doc_required = d["required"].as_bool().unwrap_or(false);
    if doc_required != opt.required {
        problems.push(format!(
            "option '{name}': documented required={doc_required}, spec required={}",
            opt.required
        ));
    }
    let doc_default = d.get("default").cloned().unwrap_or(Value::Null);
    let spec_default = opt.default.clone().unwrap_or(Value::Null);
    if !same_value(&doc_default, &spec_default) {
        problems.push(format!(
            "option '{name}': documented default {doc_default}, spec default {spec_default}"
        ));
    }
    let doc_choices = d["choices"].as_array().cloned().unwrap_or_default();
    let same_choices = doc_choices.len() == opt.choices.len()
        && doc_choices
            .iter()
            .zip(&opt.choices)
            .all(|(a, b)| same_value(a, b));
    if !same_choices {
        problems.push(format!(
            "option '{name}': documented choices {doc_choices:?}, spec choices {:?}",
            opt.choices
        ));
    }
    let doc_aliases: Vec<&str> = d["aliases"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if doc_aliases != opt.aliases {
        problems.push(format!(
            "option '{name}': documented aliases {doc_aliases:?}, spec aliases {:?}",
            opt.aliases
        ));
    }
    let doc_elements = d["elements"].as_str();
    if doc_elements != opt.elements.map(Type::ansible_name) {
        problems.push(format!(
            "option '{name}': documented elements {doc_elements:?}, spec elements {:?}",
            opt.elements.map(Type::ansible_name)
        ));
    }
    match (&opt.options, d.get("suboptions").and_then(Value::as_object)) {
        (Some(sub), Some(docs)) => compare_level(sub, docs, &format!("{name}."), problems),
        (Some(_), None) => problems.push(format!(
            "option '{name}' has sub-options that are not documented"
        )),
        (None, Some(_)) => problems.push(format!(
            "option '{name}' documents suboptions the spec does not have"
        )),
        (None, None) => {}
    }
}

/// YAML and JSON disagree on little, but `1` vs `1.0` and the like should not count as drift.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Every task in EXAMPLES that calls this module may only use options the spec knows.
fn check_examples(spec: &ArgSpec, examples: &str, module: &str) -> Vec<String> {
    let parsed: Value = match serde_yaml_ng::from_str(examples) {
        Ok(v) => v,
        Err(e) => return vec![format!("EXAMPLES is not valid YAML: {e}")],
    };
    let Some(tasks) = parsed.as_array() else {
        return vec!["EXAMPLES must be a list of tasks".into()];
    };
    let short = module.rsplit('.').next().unwrap_or(module);
    let mut problems = Vec::new();
    let mut calls = 0;
    for task in tasks {
        let Some(t) = task.as_object() else { continue };
        for (key, args) in t {
            if key != short && !key.ends_with(&format!(".{short}")) {
                continue;
            }
            calls += 1;
            if let Some(args) = args.as_object() {
                check_example_args(
                    spec,
                    args,
                    &format!(
                        "example '{}'",
                        t.get("name").and_then(Value::as_str).unwrap_or("?")
                    ),
                    &mut problems,
                );
            }
        }
    }
    if calls == 0 {
        problems.push(format!("EXAMPLES never calls {module}"));
    }
    problems
}

fn check_example_args(
    spec: &ArgSpec,
    args: &Map<String, Value>,
    where_: &str,
    problems: &mut Vec<String>,
) {
    for (key, value) in args {
        let Some(opt) = spec.options.iter().find(|o| o.names().any(|n| n == key)) else {
            problems.push(format!("{where_} uses unknown option '{key}'"));
            continue;
        };
        if let Some(sub) = &opt.options {
            let items: Vec<&Map<String, Value>> = match value {
                Value::Object(m) => vec![m],
                Value::Array(a) => a.iter().filter_map(Value::as_object).collect(),
                _ => vec![],
            };
            for item in items {
                check_example_args(sub, item, &format!("{where_} ({key})"), problems);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Opt;

    #[test]
    fn plugin_documentation_drift_is_listed() {
        let spec = ArgSpec::new(vec![
            Opt::str("url").required().env(&["X_URL"]),
            Opt::int("timeout").default(30),
            Opt::list("terms", Type::Str),
        ]);
        let py = "DOCUMENTATION = r\"\"\"\nname: demo\noptions:\n  _terms: {description: t}\n  url:\n    description: u\n    required: true\n    env: [{name: X_URL}]\n  timeout: {description: t, type: int, default: 10}\n\"\"\"\n";
        let problems = check_plugin(&spec, py, "demo", &["terms"], &["_terms"]);
        assert_eq!(
            problems,
            vec!["option 'timeout': documented default 10, spec default 30"]
        );
        let fixed = py
            .replace("default: 10", "default: 30")
            .replace("X_URL}", "Y_URL}");
        let problems = check_plugin(&spec, &fixed, "demo", &["terms"], &["_terms"]);
        assert_eq!(
            problems,
            vec!["option 'url': documented env [\"Y_URL\"], spec env [\"X_URL\"]"]
        );
    }

    #[test]
    fn fragment_options_count_as_the_stubs_own_unless_it_documents_them() {
        let spec = ArgSpec::new(vec![
            Opt::str("name").required(),
            Opt::str("host").required(),
            Opt::int("timeout").default(60),
        ]);
        let stub = |timeout: &str| {
            format!(
                "DOCUMENTATION = r\"\"\"\nmodule: thing\nshort_description: t\ndescription: [t]\nauthor: [a]\n\
                 extends_documentation_fragment: [proxshift.test.conn]\noptions:\n  name: {{description: n, type: str, \
                 required: true}}\n{timeout}\"\"\"\nEXAMPLES = r\"\"\"\n- proxshift.test.thing: {{name: a, host: h}}\n\"\"\"\nRETURN = r\"\"\"\n{{}}\n\"\"\"\n"
            )
        };
        let frag = "class ModuleDocFragment(object):\n    DOCUMENTATION = r\"\"\"\noptions:\n  host: {description: h, \
                    type: str, required: true}\n  timeout: {description: t, type: int, default: 30}\n\"\"\"\n";
        let known = |name: &str| (name == "proxshift.test.conn").then(|| frag.to_string());
        // The fragment's default 30 is not the spec's 60 …
        let problems = check_stub_with(&spec, &stub(""), "thing", &known);
        assert_eq!(
            problems,
            vec!["option 'timeout': documented default 30, spec default 60"]
        );
        // … unless the stub documents timeout itself.
        let own = "  timeout: {description: t, type: int, default: 60}\n";
        assert_eq!(
            check_stub_with(&spec, &stub(own), "thing", &known),
            Vec::<String>::new()
        );
        assert_eq!(
            check_stub(&spec, &stub(own), "thing"),
            vec!["documentation fragment proxshift.test.conn not found"]
        );
    }

    const GOOD: &str = r#"
DOCUMENTATION:
  module: thing
  short_description: A thing
  description: [Does a thing.]
  author: [ProxShift developers]
  options:
    name:
      description: Name.
      type: str
      required: true
    count:
      description: How many.
      type: int
      default: 1
    disks:
      description: Disks.
      type: list
      elements: dict
      suboptions:
        slot:
          description: Slot.
          required: true
EXAMPLES: |
  - name: Make one
    proxshift.test.thing:
      name: a
      disks: [{slot: scsi0}]
RETURN:
  name:
    description: The name.
    returned: always
    type: str
"#;

    fn spec() -> ArgSpec {
        ArgSpec::new(vec![
            Opt::str("name").required(),
            Opt::int("count").default(1),
            Opt::list("disks", Type::Dict).options(ArgSpec::new(vec![Opt::str("slot").required()])),
        ])
    }

    #[test]
    fn matching_sidecar_has_no_problems() {
        assert_eq!(check(&spec(), GOOD, "thing"), Vec::<String>::new());
    }

    /// GOOD as a Python documentation stub: each top-level key's block, dedented, as a raw string.
    fn stub(sidecar: &str) -> String {
        let mut out = String::from("#!/usr/bin/python\n");
        for line in sidecar.lines().filter(|l| !l.is_empty()) {
            match line.split_once(':') {
                Some((key, _)) if !line.starts_with(' ') => {
                    let close = if out.contains(" = r") { "\"\"\"\n" } else { "" };
                    out.push_str(&format!("{close}{key} = r\"\"\"\n"));
                }
                _ => out.push_str(&format!("{}\n", line.strip_prefix("  ").unwrap_or(line))),
            }
        }
        out + "\"\"\"\n"
    }

    #[test]
    fn a_documentation_stub_is_checked_as_its_sidecar() {
        assert_eq!(
            check_stub(&spec(), &stub(GOOD), "thing"),
            Vec::<String>::new()
        );
        let bad = stub(&GOOD.replace("default: 1", "default: 2"));
        let p = check_stub(&spec(), &bad, "thing");
        assert!(
            p.iter()
                .any(|x| x.contains("'count': documented default 2")),
            "{p:?}"
        );
        let p = check_stub(
            &spec(),
            "DOCUMENTATION = r\"\"\"\nmodule: thing\n\"\"\"\n",
            "thing",
        );
        assert_eq!(p, vec!["no EXAMPLES = r\"\"\"...\"\"\" block".to_string()]);
    }

    #[test]
    fn drift_is_reported() {
        let bad = GOOD
            .replace("default: 1", "default: 2")
            .replace("slot: scsi0", "slot: scsi0, size: 3");
        let p = check(&spec(), &bad, "thing");
        assert!(
            p.iter()
                .any(|x| x.contains("'count': documented default 2")),
            "{p:?}"
        );
        assert!(
            p.iter().any(|x| x.contains("unknown option 'size'")),
            "{p:?}"
        );
        let mut s = spec();
        s.options.push(Opt::bool("force"));
        let p = check(&s, GOOD, "thing");
        assert_eq!(p, vec!["option 'force' is in the spec but not documented"]);
    }
}
