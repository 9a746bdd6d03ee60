//! Validate user options against an [`ArgSpec`]: aliases, unknown options, env fallbacks, required
//! rules, type coercion, choices, defaults and nested options. Every problem is collected (not just the
//! first) and each message names the option, in the words ansible-core uses.

use serde_json::{Map, Value};

use crate::coerce::{coerce, type_name, CoerceError};
use crate::spec::{ArgSpec, Opt, Type};

/// The outcome of validation. `no_log_values` is filled even when there are errors, so a failure
/// message can never echo a secret.
#[derive(Debug, Default)]
pub struct Validated {
    /// Every option of the spec under its canonical name: the given value (coerced), else the
    /// default, else `null`.
    pub params: Map<String, Value>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    pub no_log_values: Vec<String>,
    /// The top-level options the task did not give that an environment fallback filled.
    pub from_env: Vec<String>,
}

/// Validate `raw` (user options only, no `_ansible_*` keys) for the module `module_name`.
pub fn validate(
    raw: &Map<String, Value>,
    spec: &ArgSpec,
    module_name: &str,
    ignore_unknown: bool,
) -> Validated {
    let mut out = Validated {
        no_log_values: no_log_values(raw, spec),
        ..Default::default()
    };
    let ctx = Level {
        module_name,
        path: None,
        ignore_unknown,
    };
    out.params = validate_level(raw, spec, &ctx, &mut out);
    out.no_log_values.sort();
    out.no_log_values.dedup();
    out
}

struct Level<'a> {
    module_name: &'a str,
    /// Where a nested dict sits (`disks[1]`), for messages.
    path: Option<String>,
    ignore_unknown: bool,
}

impl Level<'_> {
    fn suffix(&self) -> String {
        match &self.path {
            Some(p) => format!(" found in {p}"),
            None => String::new(),
        }
    }
}

fn is_given(v: Option<&Value>) -> bool {
    matches!(v, Some(v) if !v.is_null())
}

fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Every string inside `v` (a no_log option may be a dict or list of secrets). As core's
/// `_return_datastructure_name`: a dict's values, not its keys.
fn collect_strings(v: &Value, into: &mut Vec<String>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, into)),
        Value::Object(m) => m.values().for_each(|x| collect_strings(x, into)),
        other => into.extend(scalar_string(other)),
    }
}

/// Every string under one of `keys`, at any depth of `v`.
fn collect_under_keys(v: &Value, keys: &[&str], into: &mut Vec<String>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| collect_under_keys(x, keys, into)),
        Value::Object(m) => {
            for (k, x) in m {
                if keys.contains(&k.as_str()) {
                    collect_strings(x, into);
                } else {
                    collect_under_keys(x, keys, into);
                }
            }
        }
        _ => {}
    }
}

/// The values of every `no_log` option (and of every `no_log_keys` key) in `raw`, at any depth and
/// under any name, read from the input as given: before, and whatever the outcome of, validation, so
/// no exit path — a rejected type, a parent option that does not convert, a panic — can echo one.
pub fn no_log_values(raw: &Map<String, Value>, spec: &ArgSpec) -> Vec<String> {
    let mut out = Vec::new();
    collect_level(raw, spec, &mut out);
    out.sort();
    out.dedup();
    out
}

fn collect_level(raw: &Map<String, Value>, spec: &ArgSpec, into: &mut Vec<String>) {
    for opt in &spec.options {
        for v in opt.names().filter_map(|n| raw.get(n)) {
            collect_option(opt, v, into);
        }
    }
}

fn collect_option(opt: &Opt, v: &Value, into: &mut Vec<String>) {
    if opt.no_log {
        return collect_strings(v, into);
    }
    if opt.no_log_keys.is_empty() && opt.options.is_none() {
        return;
    }
    // A dict may come as a string (JSON or k=v); look inside the form it converts to as well.
    let converted = match v {
        Value::String(_) => coerce(v, Type::Dict).ok(),
        _ => None,
    };
    for v in std::iter::once(v).chain(converted.as_ref()) {
        collect_under_keys(v, &opt.no_log_keys, into);
        if let Some(sub) = &opt.options {
            match v {
                Value::Object(m) => collect_level(m, sub, into),
                Value::Array(items) => items
                    .iter()
                    .filter_map(Value::as_object)
                    .for_each(|m| collect_level(m, sub, into)),
                _ => {}
            }
        }
    }
}

fn supported_list(spec: &ArgSpec) -> String {
    let mut names: Vec<String> = spec
        .options
        .iter()
        .map(|o| {
            if o.aliases.is_empty() {
                o.name.to_string()
            } else {
                format!("{} ({})", o.name, o.aliases.join(", "))
            }
        })
        .collect();
    names.sort();
    names.join(", ")
}

fn validate_level(
    raw: &Map<String, Value>,
    spec: &ArgSpec,
    ctx: &Level,
    out: &mut Validated,
) -> Map<String, Value> {
    let mut given = resolve_names(raw, spec, ctx, out);
    apply_env_fallbacks(spec, &mut given, ctx, out);
    check_given_rules(spec, &given, ctx, out);
    let params = convert_all(spec, &given, ctx, out);
    // required_if is checked on converted values, so `state: "absent"` and aliases compare right.
    check_required_if(spec, &given, &params, ctx, out);
    params
}

/// The given options under their canonical names (aliases resolved, `null`s dropped); unknown
/// options are an error (a warning with `ignore_unknown`).
fn resolve_names(
    raw: &Map<String, Value>,
    spec: &ArgSpec,
    ctx: &Level,
    out: &mut Validated,
) -> Map<String, Value> {
    let mut given: Map<String, Value> = Map::new();
    let mut unknown = Vec::new();
    for (key, value) in raw {
        match spec.options.iter().find(|o| o.names().any(|n| n == key)) {
            Some(opt) => {
                if given.contains_key(opt.name) && !value.is_null() {
                    out.warnings.push(format!(
                        "Both option {} and its alias {} are set{}.",
                        opt.name,
                        key,
                        ctx.suffix()
                    ));
                    if key != opt.name {
                        continue; // the canonical name wins, as in core
                    }
                }
                if !value.is_null() || !given.contains_key(opt.name) {
                    given.insert(opt.name.to_string(), value.clone());
                }
            }
            None => unknown.push(key.as_str()),
        }
    }
    if !unknown.is_empty() {
        let msg = format!(
            "Unsupported parameters for ({}) module: {}{}. Supported parameters include: {}.",
            ctx.module_name,
            unknown.join(", "),
            ctx.suffix(),
            supported_list(spec)
        );
        if ctx.ignore_unknown {
            out.warnings.push(msg);
        } else {
            out.errors.push(msg);
        }
    }
    given.retain(|_, v| !v.is_null());
    given
}

/// Environment fallbacks for options not given.
fn apply_env_fallbacks(
    spec: &ArgSpec,
    given: &mut Map<String, Value>,
    ctx: &Level,
    out: &mut Validated,
) {
    for opt in &spec.options {
        if given.contains_key(opt.name) {
            continue;
        }
        // An empty variable counts as unset: AWX renders optional credential inputs as "".
        if let Some(val) = opt
            .env_fallback
            .iter()
            .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        {
            if opt.no_log {
                out.no_log_values.push(val.clone());
            }
            if ctx.path.is_none() {
                out.from_env.push(opt.name.to_string());
            }
            given.insert(opt.name.to_string(), Value::String(val));
        }
    }
}

/// The cross-option rules that look only at which options are given: mutually exclusive,
/// required, required together, required one of, required by.
fn check_given_rules(spec: &ArgSpec, given: &Map<String, Value>, ctx: &Level, out: &mut Validated) {
    let has = |n: &str| is_given(given.get(n));
    for group in &spec.mutually_exclusive {
        let set: Vec<&str> = group.iter().copied().filter(|n| has(n)).collect();
        if set.len() > 1 {
            out.errors.push(format!(
                "parameters are mutually exclusive: {}{}",
                set.join("|"),
                ctx.suffix()
            ));
        }
    }
    let missing: Vec<&str> = spec
        .options
        .iter()
        .filter(|o| o.required && !has(o.name))
        .map(|o| o.name)
        .collect();
    if !missing.is_empty() {
        out.errors.push(format!(
            "missing required arguments: {}{}",
            missing.join(", "),
            ctx.suffix()
        ));
    }
    for group in &spec.required_together {
        let n_set = group.iter().filter(|n| has(n)).count();
        if n_set > 0 && n_set < group.len() {
            out.errors.push(format!(
                "parameters are required together: {}{}",
                group.join(", "),
                ctx.suffix()
            ));
        }
    }
    for group in &spec.required_one_of {
        if !group.iter().any(|n| has(n)) {
            out.errors.push(format!(
                "one of the following is required: {}{}",
                group.join(", "),
                ctx.suffix()
            ));
        }
    }
    for (key, reqs) in &spec.required_by {
        if has(key) {
            let missing: Vec<&str> = reqs.iter().copied().filter(|n| !has(n)).collect();
            if !missing.is_empty() {
                out.errors.push(format!(
                    "missing parameter(s) required by '{key}': {}{}",
                    missing.join(", "),
                    ctx.suffix()
                ));
            }
        }
    }
}

/// Every option of the spec: its given value converted (types, choices, nested options), else its
/// default, else `null`.
fn convert_all(
    spec: &ArgSpec,
    given: &Map<String, Value>,
    ctx: &Level,
    out: &mut Validated,
) -> Map<String, Value> {
    let mut params = Map::new();
    for opt in &spec.options {
        let value = match given.get(opt.name) {
            Some(v) => convert(opt, v, ctx, out),
            None => opt.default.clone().unwrap_or(Value::Null),
        };
        params.insert(opt.name.to_string(), value);
    }
    params
}

/// `required_if`: when an option's converted value matches, the rule's options must be given
/// (any or all of them).
fn check_required_if(
    spec: &ArgSpec,
    given: &Map<String, Value>,
    params: &Map<String, Value>,
    ctx: &Level,
    out: &mut Validated,
) {
    let has = |n: &str| is_given(given.get(n));
    for rule in &spec.required_if {
        let actual = params.get(rule.key).cloned().unwrap_or(Value::Null);
        if actual != rule.value {
            continue;
        }
        let missing: Vec<&str> = rule
            .requirements
            .iter()
            .copied()
            .filter(|n| !has(n))
            .collect();
        let failed = if rule.any {
            missing.len() == rule.requirements.len()
        } else {
            !missing.is_empty()
        };
        if failed {
            let shown = match &rule.value {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            out.errors.push(format!(
                "{} is {} but {} of the following are missing: {}{}",
                rule.key,
                shown,
                if rule.any { "any" } else { "all" },
                missing.join(", "),
                ctx.suffix()
            ));
        }
    }
}

fn type_error(opt: &Opt, v: &Value, ty: Type, why: &CoerceError, ctx: &Level) -> String {
    format!(
        "argument '{}' is of type {} and we were unable to convert to {}: {}{}",
        opt.name,
        type_name(v),
        ty.ansible_name(),
        why,
        ctx.suffix()
    )
}

fn convert(opt: &Opt, v: &Value, ctx: &Level, out: &mut Validated) -> Value {
    let value = match coerce(v, opt.ty) {
        Ok(c) => c,
        Err(why) => {
            out.errors.push(type_error(opt, v, opt.ty, &why, ctx));
            return Value::Null;
        }
    };
    if opt.no_log {
        collect_strings(&value, &mut out.no_log_values);
    }
    collect_under_keys(&value, &opt.no_log_keys, &mut out.no_log_values);
    let value = match (opt.ty, &value) {
        (Type::List, Value::Array(items)) => Value::Array(convert_elements(opt, items, ctx, out)),
        (Type::Dict, Value::Object(m)) => match &opt.options {
            Some(sub) => {
                let level = Level {
                    module_name: ctx.module_name,
                    path: Some(child_path(ctx, opt.name)),
                    ..*ctx
                };
                Value::Object(validate_level(m, sub, &level, out))
            }
            None => value,
        },
        _ => value,
    };
    check_choices(opt, &value, ctx, out);
    value
}

fn child_path(ctx: &Level, name: &str) -> String {
    match &ctx.path {
        Some(p) => format!("{p}.{name}"),
        None => name.to_string(),
    }
}

fn convert_elements(opt: &Opt, items: &[Value], ctx: &Level, out: &mut Validated) -> Vec<Value> {
    let Some(el_ty) = opt.elements else {
        return items.to_vec();
    };
    let mut converted = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let c = match coerce(item, el_ty) {
            Ok(c) => c,
            Err(why) => {
                out.errors.push(format!(
                    "Elements value for option '{}' is of type {} and we were unable to convert to {}: {}{}",
                    opt.name,
                    type_name(item),
                    el_ty.ansible_name(),
                    why,
                    ctx.suffix()
                ));
                continue;
            }
        };
        let c = match (&opt.options, c) {
            (Some(sub), Value::Object(m)) => {
                let level = Level {
                    module_name: ctx.module_name,
                    path: Some(format!("{}[{i}]", child_path(ctx, opt.name))),
                    ..*ctx
                };
                Value::Object(validate_level(&m, sub, &level, out))
            }
            (_, c) => c,
        };
        converted.push(c);
    }
    converted
}

fn check_choices(opt: &Opt, value: &Value, ctx: &Level, out: &mut Validated) {
    if opt.choices.is_empty() || value.is_null() {
        return;
    }
    let shown = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let choices = opt.choices.iter().map(shown).collect::<Vec<_>>().join(", ");
    match value {
        Value::Array(items) => {
            let bad: Vec<String> = items
                .iter()
                .filter(|i| !opt.choices.contains(i))
                .map(shown)
                .collect();
            if !bad.is_empty() {
                out.errors.push(format!(
                    "value of {} must be one or more of: {}. Got no match for: {}{}",
                    opt.name,
                    choices,
                    bad.join(", "),
                    ctx.suffix()
                ));
            }
        }
        v if !opt.choices.contains(v) => {
            out.errors.push(format!(
                "value of {} must be one of: {}, got: {}{}",
                opt.name,
                choices,
                shown(v),
                ctx.suffix()
            ));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ArgSpec, Opt, Type};
    use serde_json::json;

    fn spec() -> ArgSpec {
        ArgSpec::new(vec![
            Opt::str("name").required().aliases(&["vm_name"]),
            Opt::int("memory").default(4096),
            Opt::bool("force").default(false),
            Opt::str("state")
                .choices(&["present", "absent"])
                .default("present"),
            Opt::str("api_password")
                .no_log()
                .env(&["PS_TEST_PASSWORD_VAR"]),
            Opt::str("api_token_secret").no_log(),
            Opt::list("tags", Type::Str),
            Opt::list("disks", Type::Dict).options(ArgSpec::new(vec![
                Opt::str("slot").required(),
                Opt::int("size"),
                Opt::str("format").choices(&["raw", "qcow2"]),
            ])),
            Opt::dict("efidisk").options(ArgSpec::new(vec![Opt::str("storage").required()])),
            Opt::str("purge_mode"),
        ])
        .mutually_exclusive(&["api_password", "api_token_secret"])
        .required_if("state", "absent", &["purge_mode"])
    }

    fn run(v: Value) -> Validated {
        validate(v.as_object().unwrap(), &spec(), "proxshift.test.mod", false)
    }

    #[test]
    fn coerces_and_fills_defaults() {
        let r = run(json!({"vm_name": "a", "memory": "8192", "force": "yes", "tags": "x,y"}));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.params["name"], json!("a"));
        assert_eq!(r.params["memory"], json!(8192));
        assert_eq!(r.params["force"], json!(true));
        assert_eq!(r.params["state"], json!("present"));
        assert_eq!(r.params["tags"], json!(["x", "y"]));
        assert_eq!(r.params["disks"], Value::Null);
    }

    #[test]
    fn collects_every_error_naming_each_option() {
        let r = run(
            json!({"memory": "lots", "force": "perhaps", "state": "gone", "bogus": 1, "other": 2}),
        );
        let all = r.errors.join("\n");
        assert!(
            all.contains("Unsupported parameters for (proxshift.test.mod) module: bogus, other."),
            "{all}"
        );
        assert!(
            all.contains("Supported parameters include:") && all.contains("name (vm_name)"),
            "{all}"
        );
        assert!(all.contains("missing required arguments: name"), "{all}");
        assert!(
            all.contains("argument 'memory' is of type str and we were unable to convert to int"),
            "{all}"
        );
        assert!(all.contains("argument 'force'"), "{all}");
        assert!(
            all.contains("value of state must be one of: present, absent, got: gone"),
            "{all}"
        );
        assert_eq!(r.errors.len(), 5, "{all}");
    }

    #[test]
    fn nested_options_are_validated_with_their_path() {
        let r = run(
            json!({"name": "a", "disks": [{"slot": "scsi0", "size": "32"}, {"size": 1, "format": "vmdk", "x": 1}],
                           "efidisk": {}}),
        );
        let all = r.errors.join("\n");
        assert!(
            all.contains("missing required arguments: slot found in disks[1]"),
            "{all}"
        );
        assert!(
            all.contains("value of format must be one of: raw, qcow2, got: vmdk found in disks[1]"),
            "{all}"
        );
        assert!(
            all.contains(
                "Unsupported parameters for (proxshift.test.mod) module: x found in disks[1]"
            ),
            "{all}"
        );
        assert!(
            all.contains("missing required arguments: storage found in efidisk"),
            "{all}"
        );
        assert_eq!(
            r.params["disks"][0],
            json!({"slot": "scsi0", "size": 32, "format": null})
        );
    }

    #[test]
    fn cross_option_rules() {
        let r = run(
            json!({"name": "a", "api_password": "p", "api_token_secret": "s", "state": "absent"}),
        );
        let all = r.errors.join("\n");
        assert!(
            all.contains("parameters are mutually exclusive: api_password|api_token_secret"),
            "{all}"
        );
        assert!(
            all.contains("state is absent but all of the following are missing: purge_mode"),
            "{all}"
        );
    }

    #[test]
    fn no_log_values_are_collected_even_on_error() {
        let r = run(json!({"api_password": "hunter2", "api_token_secret": ["nested-secret"]}));
        assert!(!r.errors.is_empty());
        assert!(r.no_log_values.contains(&"hunter2".to_string()));
        assert!(r.no_log_values.contains(&"nested-secret".to_string()));
    }

    #[test]
    fn empty_env_fallback_counts_as_unset() {
        std::env::set_var("PS_TEST_EMPTY_VAR", "");
        let s = ArgSpec::new(vec![Opt::str("ca")
            .env(&["PS_TEST_EMPTY_VAR"])
            .default("fallback-default")]);
        let r = validate(json!({}).as_object().unwrap(), &s, "m", false);
        std::env::remove_var("PS_TEST_EMPTY_VAR");
        assert_eq!(r.params["ca"], json!("fallback-default"));
    }

    #[test]
    fn env_fallback_fills_and_is_masked() {
        std::env::set_var("PS_TEST_PASSWORD_VAR", "from-env");
        let r = run(json!({"name": "a"}));
        std::env::remove_var("PS_TEST_PASSWORD_VAR");
        assert_eq!(r.params["api_password"], json!("from-env"));
        assert!(r.no_log_values.contains(&"from-env".to_string()));
        // The module learns which options came from the environment, not from the task.
        assert_eq!(r.from_env, ["api_password"]);
    }

    #[test]
    fn null_means_not_given() {
        let r = run(json!({"name": "a", "memory": null}));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.params["memory"], json!(4096));
    }

    #[test]
    fn unknown_options_only_warn_when_asked() {
        let r = validate(
            json!({"name": "a", "zzz": 1}).as_object().unwrap(),
            &spec(),
            "m",
            true,
        );
        assert!(r.errors.is_empty());
        assert_eq!(r.warnings.len(), 1);
    }

    #[test]
    fn list_choices() {
        let s = ArgSpec::new(vec![
            Opt::list("wait_for", Type::Str).choices(&["api", "nodes"])
        ]);
        let r = validate(
            json!({"wait_for": "api,bogus"}).as_object().unwrap(),
            &s,
            "m",
            false,
        );
        assert_eq!(
            r.errors,
            vec!["value of wait_for must be one or more of: api, nodes. Got no match for: bogus"]
        );
    }
}

#[cfg(test)]
mod plugin_tests {
    use super::*;
    use crate::spec::{Opt, Type};
    use serde_json::json;

    fn spec() -> ArgSpec {
        ArgSpec::new(vec![
            Opt::str("url").required().env(&["PS_TEST_PLUGIN_URL"]),
            Opt::list("nodes", Type::Dict).options(ArgSpec::new(vec![
                Opt::str("token").env(&["PS_TEST_PLUGIN_TOKEN"])
            ])),
        ])
    }

    #[test]
    fn a_plugin_backend_reads_no_environment_variable() {
        std::env::set_var("PS_TEST_PLUGIN_URL", "https://from-env");
        std::env::set_var("PS_TEST_PLUGIN_TOKEN", "from-env");
        let raw = json!({"nodes": [{}]});
        let module = validate(raw.as_object().unwrap(), &spec(), "m", false);
        let plugin = validate(
            raw.as_object().unwrap(),
            &spec().without_env_fallbacks(),
            "p",
            false,
        );
        std::env::remove_var("PS_TEST_PLUGIN_URL");
        std::env::remove_var("PS_TEST_PLUGIN_TOKEN");
        assert_eq!(module.params["url"], json!("https://from-env"));
        assert_eq!(module.params["nodes"][0]["token"], json!("from-env"));
        // The plugin's options are final: a missing required one is an error, not an env lookup.
        assert_eq!(plugin.errors, ["missing required arguments: url"]);
        assert!(plugin.from_env.is_empty() && plugin.no_log_values.is_empty());
    }
}
