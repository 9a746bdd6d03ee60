//! Shared pieces of the fuzz targets: a spec-aware JSON generator (random bytes alone rarely get past
//! the JSON parser into the interesting validation paths) and the invariants every module result must
//! hold.

use std::collections::BTreeSet;

use ansible_module::{ArgSpec, Opt, Type};
use arbitrary::{Result, Unstructured};
use serde_json::{Map, Number, Value};

/// Every module's argument spec (and the plugin backends' `--inventory`/`--lookup` specs, which validate
/// their stdin JSON), by name. Built once: the specs are plain data and building fifteen per input
/// would dominate the run.
pub fn module_specs() -> &'static [(&'static str, ArgSpec)] {
    static SPECS: std::sync::OnceLock<Vec<(&'static str, ArgSpec)>> = std::sync::OnceLock::new();
    SPECS.get_or_init(|| {
        vec![
            ("proxmox_vm", proxmox_vm::argument_spec()),
            ("vm_lifecycle", vm_lifecycle::argument_spec()),
            ("hashicorp_vault", hashicorp_vault::argument_spec()),
            ("ocp_manifests", ocp_manifests::argument_spec()),
            ("acm_import", acm_import::argument_spec()),
            ("cluster_auth", cluster_auth::argument_spec()),
            ("proxmox_access", proxmox_access::argument_spec()),
            ("proxmox_vm_info", proxmox_vm_info::argument_spec()),
            ("proxmox_ha", proxmox_ha::argument_spec()),
            ("proxmox_snap", proxmox_snap::argument_spec()),
            (
                "proxshift.proxmox.proxmox",
                proxmox_vm_info::inventory::argument_spec(),
            ),
            (
                "hashicorp_vault_info",
                hashicorp_vault_info::argument_spec(),
            ),
            (
                "proxshift.hashi_vault.kv",
                hashicorp_vault_info::lookup::argument_spec(),
            ),
            ("acm_cluster_info", acm_cluster_info::argument_spec()),
            ("cluster_nodes", cluster_nodes::argument_spec()),
            ("etcd_backup", etcd_backup::argument_spec()),
            ("cluster_upgrade", cluster_upgrade::argument_spec()),
            ("cluster_config", cluster_config::argument_spec()),
        ]
    })
}

/// Every option name (aliases and sub-options included) of a spec.
pub fn option_names(spec: &ArgSpec) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    for o in &spec.options {
        out.insert(o.name);
        out.extend(o.aliases.iter().copied());
        if let Some(sub) = &o.options {
            out.extend(option_names(sub));
        }
    }
    out
}

/// A value of the option's own type most of the time, of any type otherwise (to reach coercion).
fn value_for(
    u: &mut Unstructured,
    ty: Type,
    sub: Option<&ArgSpec>,
    elements: Option<Type>,
    depth: u32,
) -> Result<Value> {
    if depth > 4 || u.ratio(1, 5)? {
        return any_value(u, depth);
    }
    Ok(match ty {
        Type::Str | Type::Path | Type::Json | Type::Raw => Value::String(string(u)?),
        Type::Int => Value::from(u.arbitrary::<i64>()?),
        Type::Float => Number::from_f64(u.arbitrary::<f64>()?)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Type::Bool => Value::Bool(u.arbitrary()?),
        Type::Dict => match sub {
            Some(s) => object(u, s, depth + 1)?,
            None => any_value(u, depth)?,
        },
        Type::List => {
            let n = u.int_in_range(0..=3)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value_for(
                    u,
                    elements.unwrap_or(Type::Raw),
                    sub,
                    None,
                    depth + 1,
                )?);
            }
            Value::Array(items)
        }
    })
}

/// Strings that look like what modules parse (sizes, MACs, CIDRs, property strings) plus raw ones.
fn string(u: &mut Unstructured) -> Result<String> {
    const PIECES: &[&str] = &[
        "",
        "0",
        "1",
        "-1",
        "yes",
        "no",
        "on",
        "true",
        "False",
        "120G",
        "1.5T",
        "0x10",
        "4.19",
        "4.16.3",
        "BC:24:11:00:00:01",
        "bc-24-11-00-00-01",
        "10.0.0.0/24",
        "10.0.0.5",
        "::1",
        "fd00::/64",
        "vmbr0",
        "local-lvm:vm-100-disk-0,size=20G",
        "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10",
        "a=b,a=c",
        "=x",
        ",,,",
        "local:iso/agent.x86_64.iso",
        "ocp1",
        "pve1",
        "~/x",
        "$HOME/y",
        "{\"a\": 1}",
        "[1,2]",
        "é",
        "\u{0}",
        "9999999999999999999999",
        "NaN",
        "1e309",
        "scsi0",
        "ide2",
        "net0",
        "none",
    ];
    if u.ratio(2, 3)? {
        Ok(u.choose(PIECES)?.to_string())
    } else {
        u.arbitrary()
    }
}

fn any_value(u: &mut Unstructured, depth: u32) -> Result<Value> {
    Ok(match u.int_in_range(0..=6)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => Number::from_f64(u.arbitrary::<f64>()?)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        4 if depth < 4 => {
            let n = u.int_in_range(0..=2)?;
            Value::Array(
                (0..n)
                    .map(|_| any_value(u, depth + 1))
                    .collect::<Result<_>>()?,
            )
        }
        5 if depth < 4 => {
            let mut m = Map::new();
            for _ in 0..u.int_in_range(0..=2)? {
                m.insert(string(u)?, any_value(u, depth + 1)?);
            }
            Value::Object(m)
        }
        _ => Value::String(string(u)?),
    })
}

/// An arguments object for `spec`: a random subset of its options (by name or alias), sometimes an
/// unknown key, sometimes Ansible's internal `_ansible_*` keys.
pub fn object(u: &mut Unstructured, spec: &ArgSpec, depth: u32) -> Result<Value> {
    let mut m = Map::new();
    for o in &spec.options {
        if !u.ratio(1, 2)? {
            continue;
        }
        let key = if !o.aliases.is_empty() && u.ratio(1, 4)? {
            *u.choose(&o.aliases)?
        } else {
            o.name
        };
        let v = if !o.choices.is_empty() && u.ratio(2, 3)? {
            u.choose(&o.choices)?.clone()
        } else {
            value_for(u, o.ty, o.options.as_deref(), o.elements, depth)?
        };
        m.insert(key.to_string(), v);
    }
    if u.ratio(1, 8)? {
        m.insert(string(u)?, any_value(u, depth)?);
    }
    if depth == 0 && u.ratio(1, 3)? {
        m.insert("_ansible_check_mode".into(), any_value(u, 3)?);
        m.insert("_ansible_diff".into(), Value::Bool(u.arbitrary()?));
        m.insert(
            "_ansible_module_name".into(),
            Value::String("fuzzed".into()),
        );
    }
    Ok(Value::Object(m))
}

/// The result contract: one JSON object; `changed` a bool; a failure has a non-empty `msg`; a
/// validation failure (the module body never ran) names an option, the arguments file or its JSON.
pub fn check_result(result: &Value, spec: &ArgSpec, body_ran: bool, input: &str) {
    let obj = result
        .as_object()
        .unwrap_or_else(|| panic!("result is not an object: {result}"));
    assert!(
        matches!(obj.get("changed"), Some(Value::Bool(_))),
        "changed is not a bool: {result}"
    );
    if obj.get("failed") == Some(&Value::Bool(true)) {
        let msg = obj.get("msg").and_then(Value::as_str).unwrap_or("");
        assert!(!msg.trim().is_empty(), "failed without a msg: {result}");
        // A no_log value that happens to occur inside the message (a fuzzed one-letter "secret") is
        // masked wherever it appears, by design, option names included: nothing left to check then.
        if !body_ran && !msg.contains("********") {
            let names = option_names(spec);
            let keys: Vec<String> = serde_json::from_str::<Value>(input)
                .ok()
                .and_then(|v| v.as_object().map(|m| m.keys().cloned().collect()))
                .unwrap_or_default();
            let named = names.iter().any(|n| msg.contains(n))
                || keys
                    .iter()
                    .any(|k| !k.is_empty() && msg.contains(k.as_str()))
                || msg.contains("arguments file")
                || msg.contains("JSON");
            assert!(named, "failure names no option: {msg}\ninput: {input}");
        }
    }
}

/// A canary: lowercase letters and hex digits between `nlg` and `q`, so it cannot occur in the masks
/// (`VALUE_SPECIFIED_IN_NO_LOG_PARAMETER`, `********`), an option name or a message by chance.
fn canary(u: &mut Unstructured, canaries: &mut Vec<String>) -> Result<Value> {
    let c = format!("nlg{:08x}{:04x}q", u.arbitrary::<u32>()?, canaries.len());
    canaries.push(c.clone());
    Ok(Value::String(c))
}

/// A value for a `no_log` option made of canaries: a string, or a list or dict of them (a no_log
/// option may hold several secrets; a dict's keys are not secrets, as in core).
fn canary_value(u: &mut Unstructured, canaries: &mut Vec<String>) -> Result<Value> {
    Ok(match u.int_in_range(0..=3)? {
        0 => Value::Array(vec![canary(u, canaries)?, canary(u, canaries)?]),
        1 => {
            let mut m = Map::new();
            m.insert("k".into(), canary(u, canaries)?);
            m.insert("nested".into(), Value::Array(vec![canary(u, canaries)?]));
            Value::Object(m)
        }
        _ => canary(u, canaries)?,
    })
}

/// Put canaries into `args` (an object [`object`] generated for `spec`): every `no_log` option, at any
/// depth and under whichever name it was given, gets one (or is added with one), and a free dict with
/// `no_log_keys` gets one under each of them. Returns the canaries.
pub fn plant_canaries(
    u: &mut Unstructured,
    args: &mut Value,
    spec: &ArgSpec,
) -> Result<Vec<String>> {
    let mut canaries = Vec::new();
    if let Value::Object(m) = args {
        plant_level(u, m, spec, &mut canaries)?;
    }
    Ok(canaries)
}

fn plant_level(
    u: &mut Unstructured,
    m: &mut Map<String, Value>,
    spec: &ArgSpec,
    canaries: &mut Vec<String>,
) -> Result<()> {
    for o in &spec.options {
        let given = o.names().find(|n| m.contains_key(*n));
        if o.no_log {
            let name = match given {
                Some(n) => n,
                None if u.ratio(1, 2)? => o.name,
                None => continue,
            };
            m.insert(name.to_string(), canary_value(u, canaries)?);
            continue;
        }
        if let Some(v) = given.and_then(|n| m.get_mut(n)) {
            plant_option(u, o, v, canaries)?;
        }
    }
    Ok(())
}

fn plant_option(
    u: &mut Unstructured,
    o: &Opt,
    v: &mut Value,
    canaries: &mut Vec<String>,
) -> Result<()> {
    if let Value::Object(m) = v {
        for key in &o.no_log_keys {
            m.insert(key.to_string(), canary(u, canaries)?);
        }
    }
    let Some(sub) = &o.options else {
        return Ok(());
    };
    match v {
        Value::Object(m) => plant_level(u, m, sub, canaries),
        Value::Array(items) => {
            for item in items.iter_mut() {
                if let Value::Object(m) = item {
                    plant_level(u, m, sub, canaries)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
