//! The embedded API-schema subset (`schema/pve-api-subset.json`, AGPL-3.0-or-later data
//! from proxmox/pve-docs) and request validation driven by it.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use regex_lite::Regex;
use serde_json::{Map, Value};

use crate::propstr;
use crate::sim::{Generation, PveVersion};

const SUBSET: &str = include_str!("../schema/pve-api-subset.json");

#[derive(Debug)]
pub struct MethodDef {
    pub method: String,
    pub path: String,
    pub name: String,
    pub props: Map<String, Value>,
    pub additional: bool,
    pub allowtoken: bool,
    pub proxyto_node: bool,
    pub permissions: Value,
    pub raw: Value,
}

#[derive(Debug)]
pub struct Route {
    pub path: String,
    segments: Vec<Segment>,
    pub methods: HashMap<String, MethodDef>,
}

#[derive(Debug)]
enum Segment {
    Lit(String),
    Var(String),
}

pub struct Schema {
    pub routes: Vec<Route>,
    regex_cache: std::sync::Mutex<HashMap<String, Option<Regex>>>,
}

pub enum RouteMatch<'a> {
    Found(&'a MethodDef, BTreeMap<String, String>),
    /// Path known, method not.
    NoMethod,
    NoPath,
}

pub fn schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| Schema::parse(SUBSET).expect("embedded schema subset is valid"))
}

fn flag(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0) != 0,
        Some(Value::String(s)) => s == "1",
        _ => false,
    }
}

/// The embedded schema subset is malformed (a build-time mistake).
#[derive(Debug, thiserror::Error)]
enum SchemaError {
    #[error("schema is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("schema entry without {0}")]
    Missing(&'static str),
}

impl Schema {
    fn parse(text: &str) -> Result<Schema, SchemaError> {
        let entries: Vec<Value> = serde_json::from_str(text)?;
        let mut routes = Vec::new();
        for e in entries {
            let path = e["path"]
                .as_str()
                .ok_or(SchemaError::Missing("path"))?
                .to_string();
            let segments = path
                .split('/')
                .filter(|s| !s.is_empty())
                .map(|s| {
                    if s.starts_with('{') && s.ends_with('}') {
                        Segment::Var(s[1..s.len() - 1].to_string())
                    } else {
                        Segment::Lit(s.to_string())
                    }
                })
                .collect();
            let mut methods = HashMap::new();
            for (m, def) in e["methods"]
                .as_object()
                .ok_or(SchemaError::Missing("methods"))?
            {
                let params = &def["parameters"];
                methods.insert(
                    m.clone(),
                    MethodDef {
                        method: m.clone(),
                        path: path.clone(),
                        name: def["name"].as_str().unwrap_or_default().to_string(),
                        props: params["properties"]
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                        additional: flag(params.get("additionalProperties")),
                        allowtoken: flag(def.get("allowtoken")),
                        proxyto_node: def.get("proxyto").and_then(Value::as_str) == Some("node"),
                        permissions: def.get("permissions").cloned().unwrap_or(Value::Null),
                        raw: def.clone(),
                    },
                );
            }
            routes.push(Route {
                path,
                segments,
                methods,
            });
        }
        Ok(Schema {
            routes,
            regex_cache: Default::default(),
        })
    }

    pub fn find(&self, method: &str, path: &str) -> RouteMatch<'_> {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        for r in &self.routes {
            if r.segments.len() != parts.len() {
                continue;
            }
            let mut vars = BTreeMap::new();
            let ok = r.segments.iter().zip(&parts).all(|(s, p)| match s {
                Segment::Lit(l) => l == p,
                Segment::Var(v) => {
                    let decoded = percent_encoding::percent_decode_str(p)
                        .decode_utf8_lossy()
                        .to_string();
                    vars.insert(v.clone(), decoded);
                    true
                }
            });
            if ok {
                return match r.methods.get(method) {
                    Some(m) => RouteMatch::Found(m, vars),
                    None => RouteMatch::NoMethod,
                };
            }
        }
        RouteMatch::NoPath
    }

    pub fn method(&self, method: &str, path: &str) -> Option<&MethodDef> {
        self.routes
            .iter()
            .find(|r| r.path == path)
            .and_then(|r| r.methods.get(method))
    }

    fn regex(&self, pattern: &str) -> Option<Regex> {
        let mut cache = self.regex_cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(pattern.to_string())
            .or_insert_with(|| {
                // Perl's `(?^:…)` is a plain group; PVE anchors patterns at both ends.
                let p = pattern.replace("(?^:", "(?:").replace("(?^i:", "(?i:");
                Regex::new(&format!("^(?:{p})$")).ok()
            })
            .clone()
    }
}

/// Resolves `net3` to the schema key `net[n]`, checking the index range.
pub fn lookup_prop<'a>(def: &'a MethodDef, key: &str) -> Option<(&'a str, &'a Value)> {
    if let Some((k, v)) = def.props.get_key_value(key) {
        return Some((k.as_str(), v));
    }
    let digits = key.len() - key.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits == key.len() {
        return None;
    }
    let (base, idx) = key.split_at(key.len() - digits);
    let idx: u32 = idx.parse().ok()?;
    if idx.to_string().len() != digits {
        return None; // `net01` is not `net1`
    }
    let (k, v) = def.props.get_key_value(&format!("{base}[n]"))?;
    (idx <= index_max(base, v)).then_some((k.as_str(), v))
}

/// Highest index of an indexed option, from the "(n is 0 to N)" in upstream's description,
/// else qemu-server's constants.
pub fn index_max(base: &str, prop: &Value) -> u32 {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"n is 0 to (\d+)").unwrap());
    if let Some(d) = prop.get("description").and_then(Value::as_str) {
        if let Some(c) = re.captures(d) {
            if let Ok(n) = c[1].parse() {
                return n;
            }
        }
    }
    match base {
        "net" | "ipconfig" => 31,
        "hostpci" => 15,
        "numa" => 7,
        "unused" => 255,
        "virtiofs" => 9,
        "usb" => 13,
        "serial" => 3,
        "parallel" => 2,
        _ => 0,
    }
}

/// String form of a parameter value (form values are strings already; JSON booleans
/// become 1/0 as Proxmox stores them).
pub fn value_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub type FieldErrors = BTreeMap<String, String>;

/// Validates request parameters as `PVE::JSONSchema::validate` (`check_object`) of the release
/// played does; returns every failing field like PVE does.
pub fn validate(
    def: &MethodDef,
    params: &BTreeMap<String, Value>,
    version: PveVersion,
) -> Result<(), FieldErrors> {
    let mut errors = FieldErrors::new();
    for (key, value) in params {
        match lookup_prop(def, key) {
            Some((_, prop)) => {
                let checked =
                    check_value(prop, value).and_then(|()| release_check(prop, value, version));
                if let Err(e) = checked {
                    add_error(&mut errors, key, &release_wording(e, version).to_string());
                }
            }
            None if !def.additional => {
                add_error(
                    &mut errors,
                    key,
                    "property is not defined in schema and the schema does not allow additional properties",
                );
            }
            None => {}
        }
    }
    for (key, prop) in &def.props {
        if key.ends_with("[n]") || flag(prop.get("optional")) {
            continue;
        }
        if !params.contains_key(key) {
            add_error(
                &mut errors,
                key,
                "property is missing and it is not optional",
            );
        }
    }
    // After the per-property checks, as `check_object` walks the given keys second.
    for key in params.keys() {
        let requires = lookup_prop(def, key).and_then(|(_, p)| p.get("requires"));
        if let Some(required) = requires.and_then(Value::as_str) {
            if !params.contains_key(required) {
                add_error(&mut errors, required, &requires_text(key, version));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// pve-common `PVE::JSONSchema::add_error`: a second error for the same field is appended after
/// a literal backslash-n (the Perl source joins with the single-quoted `'\n'`).
fn add_error(errors: &mut FieldErrors, key: &str, msg: &str) {
    errors
        .entry(key.to_string())
        .and_modify(|e| {
            e.push_str("\\n");
            e.push_str(msg);
        })
        .or_insert_with(|| msg.to_string());
}

/// The error `check_object` files under a missing `requires` property (e.g. qemu-server's config
/// `force` requires `delete`, an access role's `append` requires `privs`). pve-common commit
/// 0f0e791 ("schema: clarify error on missing property dependency", libpve-common-perl 9.0.8)
/// reworded it; pve-manager 9.0.0 already depends on libpve-common-perl >= 9.0.8, so every PVE 9
/// has the new text and every PVE 8 (stable-bookworm) the old one.
fn requires_text(present: &str, version: PveVersion) -> String {
    match version.generation() {
        Generation::Pve8 => format!("missing property - '{present}' requires this property"),
        Generation::Pve9 => format!("missing property required by '{present}'"),
    }
}

/// Checks that depend on the release. `pve-priv-list` (pve-common `check_format`'s `-list` form
/// of pve-access-control's `pve-priv` format, `verify_privname`): every privilege must be one the
/// release knows, so PVE 8 refuses `VM.GuestAgent.Audit` and PVE 9 `VM.Monitor` at parameter
/// verification (400), before the handler runs.
fn release_check(prop: &Value, value: &Value, version: PveVersion) -> Result<(), ValueError> {
    if prop.get("format").and_then(Value::as_str) != Some("pve-priv-list") {
        return Ok(());
    }
    let known = crate::auth::privileges(version.generation());
    let text = value_str(value);
    let unknown = text
        .split([',', ';', ' '])
        .filter(|p| !p.is_empty())
        .find(|p| !known.contains(p));
    match unknown {
        Some(p) => Err(FormatError::Privilege(p.to_string()).into()),
        None => Ok(()),
    }
}

/// A value error as the release words it. pve-common `PVE::JSONSchema::parse_id` (the
/// `pve-storage-id` format) says "cannot be shorter than 2 characters" for a one-character ID
/// since commit d43c573 ("fix #7077", libpve-common-perl 9.1.7; pve-manager 9.1.7 is the first to
/// depend on >= 9.1.8); before, and on PVE 8, such an ID "contains illegal characters".
fn release_wording(e: ValueError, version: PveVersion) -> ValueError {
    match e {
        ValueError::Format(FormatError::StorageId(id))
            if id.chars().count() < 2 && version.at_least(9, 1, 7) =>
        {
            ValueError::Format(FormatError::StorageIdTooShort(id))
        }
        other => other,
    }
}

/// Why a value does not fit its schema property (PVE's per-field texts).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error("type check ('{ty}') failed - got '{got}'")]
    Type { ty: &'static str, got: String },
    #[error("value '{value}' does not have a value in the enumeration '{allowed}'")]
    Enum { value: String, allowed: String },
    #[error("value may only be {0} characters long")]
    MaxLength(u64),
    #[error("value must be at least {0} characters long")]
    MinLength(u64),
    #[error("value does not match the regex pattern")]
    Pattern,
    #[error("value must have a minimum value of {0}")]
    Minimum(String),
    #[error("value must have a maximum value of {0}")]
    Maximum(String),
    #[error("invalid format - {0}")]
    Format(#[from] FormatError),
    #[error("invalid format - {0}")]
    PropString(#[from] PropStringInvalid),
}

/// A property-string value that does not fit its sub-schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PropStringInvalid {
    #[error(transparent)]
    Syntax(#[from] propstr::PropStringError),
    /// `key: problem` per failing key.
    #[error("format error\n{}", .0.join("\n"))]
    Fields(Vec<String>),
}

/// A value that does not fit a named format (`PVE::JSONSchema` `register_format`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FormatError {
    #[error("value does not look like a valid node name")]
    NodeName,
    #[error("value does not look like a valid DNS name")]
    DnsName,
    #[error("value does not look like a valid unicast MAC address")]
    MacAddr,
    #[error("storage ID '{0}' contains illegal characters")]
    StorageId(String),
    /// PVE ≥ 9.1.7's text for a one-character storage ID (see `release_wording`).
    #[error("storage ID '{0}' cannot be shorter than 2 characters")]
    StorageIdTooShort(String),
    #[error("value '{0}' does not look like a valid user name")]
    UserId(String),
    #[error("role name '{0}' contains illegal characters")]
    RoleId(String),
    #[error("invalid bridge ID '{0}'")]
    BridgeId(String),
    #[error("unable to parse size '{0}'")]
    DiskSize(String),
    #[error("value '{0}' is not urlencoded")]
    Urlencoded(String),
    #[error("unable to parse volume ID '{0}'")]
    VolumeId(String),
    #[error("invalid configuration ID '{0}'")]
    ConfigId(String),
    #[error("invalid characters in tag '{0}'")]
    Tag(String),
    /// pve-access-control `verify_privname`.
    #[error("invalid privilege '{0}'")]
    Privilege(String),
}

/// Type, range, enum, length, pattern and format checks of one value.
pub fn check_value(prop: &Value, value: &Value) -> Result<(), ValueError> {
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("string");
    let text = value_str(value);
    match ty {
        "boolean" => match value {
            Value::Bool(_) => {}
            Value::Number(n) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {}
            // PVE's check_type accepts exactly '1' and '0' from forms.
            Value::String(s) if s == "1" || s == "0" => {}
            _ => return Err(type_error("boolean", text)),
        },
        "integer" => {
            let ok = match value {
                Value::Number(n) => n.is_i64() || n.is_u64(),
                Value::String(s) => is_integer(s),
                _ => false,
            };
            if !ok {
                return Err(type_error("integer", text));
            }
            check_range(prop, text.parse::<f64>().unwrap_or(0.0))?;
        }
        "number" => {
            let ok = match value {
                Value::Number(_) => true,
                Value::String(s) => is_number(s),
                _ => false,
            };
            if !ok {
                return Err(type_error("number", text));
            }
            check_range(prop, text.parse::<f64>().unwrap_or(0.0))?;
        }
        "string" => {
            if matches!(value, Value::Array(_) | Value::Object(_)) {
                return Err(type_error("string", text));
            }
        }
        "array" | "object" => return Ok(()),
        _ => {}
    }
    if let Some(list) = prop.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = list.iter().map(value_str).collect();
        if !names.contains(&text) {
            return Err(ValueError::Enum {
                value: text,
                allowed: names.join(", "),
            });
        }
    }
    if ty == "string" {
        if let Some(max) = prop.get("maxLength").and_then(Value::as_u64) {
            if text.chars().count() as u64 > max {
                return Err(ValueError::MaxLength(max));
            }
        }
        if let Some(min) = prop.get("minLength").and_then(Value::as_u64) {
            if (text.chars().count() as u64) < min {
                return Err(ValueError::MinLength(min));
            }
        }
        if let Some(p) = prop.get("pattern").and_then(Value::as_str) {
            if let Some(re) = schema().regex(p) {
                if !re.is_match(&text) {
                    return Err(ValueError::Pattern);
                }
            }
        }
    }
    match prop.get("format") {
        Some(Value::String(f)) => check_format(f, &text)?,
        Some(Value::Object(fmt)) => check_prop_string(fmt, &text)?,
        _ => {}
    }
    Ok(())
}

fn type_error(ty: &'static str, got: String) -> ValueError {
    ValueError::Type { ty, got }
}

fn check_range(prop: &Value, n: f64) -> Result<(), ValueError> {
    if let Some(min) = prop.get("minimum").and_then(Value::as_f64) {
        if n < min {
            return Err(ValueError::Minimum(num(min)));
        }
    }
    if let Some(max) = prop.get("maximum").and_then(Value::as_f64) {
        if n > max {
            return Err(ValueError::Maximum(num(max)));
        }
    }
    Ok(())
}

fn num(f: f64) -> String {
    if f.fract() == 0.0 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

pub fn is_integer(s: &str) -> bool {
    let d = s.strip_prefix(['-', '+']).unwrap_or(s);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}

pub fn is_number(s: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$").unwrap())
        .is_match(s)
}

/// Validates a property string against its sub-schema: keys, aliases, required keys and
/// each sub-value.
pub fn check_prop_string(fmt: &Map<String, Value>, text: &str) -> Result<(), PropStringInvalid> {
    let ps = propstr::parse(fmt, text)?;
    let mut errs = Vec::new();
    for (k, v) in &ps.items {
        if let Some(sub) = fmt.get(k) {
            if let Err(e) = check_value(sub, &Value::String(v.clone())) {
                errs.push(format!("{k}: {e}"));
            }
        }
    }
    for (k, sub) in fmt {
        if sub.get("alias").is_some() || flag(sub.get("optional")) {
            continue;
        }
        if ps.get(k).is_none() {
            errs.push(format!("{k}: property is missing and it is not optional"));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(PropStringInvalid::Fields(errs))
    }
}

fn re(cell: &'static OnceLock<Regex>, p: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(p).unwrap())
}

/// Named string formats (PVE::JSONSchema register_format) used by the subset.
/// Unknown names are accepted: the simulator only rejects what it can judge.
pub fn check_format(name: &str, v: &str) -> Result<(), FormatError> {
    static NODE: OnceLock<Regex> = OnceLock::new();
    static DNS: OnceLock<Regex> = OnceLock::new();
    static MAC: OnceLock<Regex> = OnceLock::new();
    static STORAGE: OnceLock<Regex> = OnceLock::new();
    static CONFIGID: OnceLock<Regex> = OnceLock::new();
    static TAG: OnceLock<Regex> = OnceLock::new();
    static USER: OnceLock<Regex> = OnceLock::new();
    static ROLE: OnceLock<Regex> = OnceLock::new();
    static BRIDGE: OnceLock<Regex> = OnceLock::new();
    static VOLID: OnceLock<Regex> = OnceLock::new();
    static SIZE: OnceLock<Regex> = OnceLock::new();
    static URLENC: OnceLock<Regex> = OnceLock::new();
    static PRIV: OnceLock<Regex> = OnceLock::new();
    let list = |v: &str| -> Vec<String> {
        v.split([',', ';', ' '])
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let ok = match name {
        "pve-node" => re(&NODE, r"^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$").is_match(v),
        "dns-name" => {
            let label = r"[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?";
            re(&DNS, &format!(r"^({label}\.)*{label}$")).is_match(v)
        }
        "mac-addr" => re(&MAC, r"^(?i)[a-f0-9][02468ace](?::[a-f0-9]{2}){5}$").is_match(v),
        "pve-storage-id" => re(&STORAGE, r"^(?i)[a-z][a-z0-9\-_.]*[a-z0-9]$").is_match(v),
        "pve-configid" => return check_configid(&CONFIGID, v),
        "pve-configid-list" => {
            for id in list(v) {
                check_configid(&CONFIGID, &id)?;
            }
            true
        }
        "pve-tag-list" => {
            if let Some(tag) = list(v)
                .into_iter()
                .find(|t| !re(&TAG, r"^(?i)[a-z0-9_][a-z0-9_\-+.]*$").is_match(t))
            {
                return Err(FormatError::Tag(tag));
            }
            true
        }
        "pve-userid" => {
            v.len() <= 64 && re(&USER, r"^[^\s:/]+@[A-Za-z][A-Za-z0-9.\-_]+$").is_match(v)
        }
        "pve-roleid" => re(&ROLE, r"^[A-Za-z0-9.\-_]+$").is_match(v),
        "pve-priv-list" => {
            if let Some(p) = list(v)
                .into_iter()
                .find(|p| !re(&PRIV, r"^[A-Za-z.]+$").is_match(p))
            {
                return Err(FormatError::Privilege(p));
            }
            true
        }
        "pve-bridge-id" => re(&BRIDGE, r"^[-_.\w\d]+$").is_match(v),
        "pve-volume-id" | "pve-volume-id-or-qm-path" | "pve-volume-id-or-absolute-path" => {
            v == "none"
                || v == "cdrom"
                || v.starts_with('/')
                || re(&VOLID, r"^(?i)[a-z][a-z0-9\-_.]*[a-z0-9]:.+$").is_match(v)
        }
        "disk-size" => re(&SIZE, r"^\d+(\.\d+)?[KMGT]?$").is_match(v),
        "urlencoded" => re(&URLENC, r"^[-%a-zA-Z0-9_.!~*'()]*$").is_match(v),
        _ => true,
    };
    if ok {
        return Ok(());
    }
    let v = v.to_string();
    Err(match name {
        "pve-node" => FormatError::NodeName,
        "dns-name" => FormatError::DnsName,
        "mac-addr" => FormatError::MacAddr,
        "pve-storage-id" => FormatError::StorageId(v),
        "pve-userid" => FormatError::UserId(v),
        "pve-roleid" => FormatError::RoleId(v),
        "pve-bridge-id" => FormatError::BridgeId(v),
        "disk-size" => FormatError::DiskSize(v),
        "urlencoded" => FormatError::Urlencoded(v),
        _ => FormatError::VolumeId(v),
    })
}

fn check_configid(cell: &'static OnceLock<Regex>, id: &str) -> Result<(), FormatError> {
    if !re(cell, r"^(?i)[a-z][a-z0-9_\-]+$").is_match(id) {
        return Err(FormatError::ConfigId(id.to_string()));
    }
    Ok(())
}

/// Sub-schema (`format` object) of a config key such as `net0` or `scsi1`, from the
/// create method, which lists every VM option.
pub fn config_format(key: &str) -> Option<&'static Map<String, Value>> {
    let def = schema().method("POST", "/nodes/{node}/qemu")?;
    lookup_prop(def, key)?.1.get("format")?.as_object()
}

#[cfg(test)]
mod tests {
    use super::{lookup_prop, schema, validate, BTreeMap, MethodDef, PveVersion, Value};
    use serde_json::json;

    fn create() -> &'static MethodDef {
        schema().method("POST", "/nodes/{node}/qemu").unwrap()
    }

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect()
    }

    #[test]
    fn indexed_keys_respect_ranges() {
        assert!(lookup_prop(create(), "scsi30").is_some());
        assert!(lookup_prop(create(), "scsi31").is_none());
        assert!(lookup_prop(create(), "ide3").is_some());
        assert!(lookup_prop(create(), "ide4").is_none());
        assert!(lookup_prop(create(), "net31").is_some());
        assert!(lookup_prop(create(), "net32").is_none());
        assert!(lookup_prop(create(), "virtio15").is_some());
        assert!(lookup_prop(create(), "virtio16").is_none());
        assert!(lookup_prop(create(), "sata6").is_none());
        assert!(lookup_prop(create(), "net01").is_none());
    }

    #[test]
    fn reports_every_bad_field() {
        let p = params(&[
            ("node", "pve1"),
            ("vmid", "101"),
            ("memory", "x"),
            ("onboot", "true"),
            ("cores", "4k"),
            ("bogus", "1"),
            ("net0", "virtio,bogus=1"),
            ("name", "bad_name"),
        ]);
        let e = validate(create(), &p, PveVersion::CURRENT).unwrap_err();
        assert_eq!(e.len(), 6, "{e:?}");
        assert_eq!(e["onboot"], "type check ('boolean') failed - got 'true'");
        assert_eq!(e["cores"], "type check ('integer') failed - got '4k'");
        assert!(e["bogus"].contains("does not allow additional properties"));
        assert_eq!(
            e["net0"],
            "invalid format - invalid key in comma-separated list property: bogus"
        );
        assert!(e["memory"].starts_with("invalid format - format error"));
        assert_eq!(
            e["name"],
            "invalid format - value does not look like a valid DNS name"
        );
    }

    #[test]
    fn missing_required_and_ranges() {
        let e = validate(create(), &params(&[("node", "pve1")]), PveVersion::CURRENT).unwrap_err();
        assert_eq!(e["vmid"], "property is missing and it is not optional");
        let e = validate(
            create(),
            &params(&[("node", "pve1"), ("vmid", "99")]),
            PveVersion::CURRENT,
        )
        .unwrap_err();
        assert_eq!(e["vmid"], "value must have a minimum value of 100");
        let e = validate(
            create(),
            &params(&[("node", "pve1"), ("vmid", "100"), ("bios", "uefi")]),
            PveVersion::CURRENT,
        )
        .unwrap_err();
        assert_eq!(
            e["bios"],
            "value 'uefi' does not have a value in the enumeration 'seabios, ovmf'"
        );
    }

    #[test]
    fn property_string_subkeys() {
        let ok = params(&[
            ("node", "pve1"),
            ("vmid", "100"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10"),
            ("scsi0", "local-lvm:32,iothread=1,discard=on,ssd=1"),
            ("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=0"),
            ("ide2", "local:iso/agent.iso,media=cdrom"),
            ("agent", "1"),
            ("memory", "16384"),
        ]);
        validate(create(), &ok, PveVersion::CURRENT).unwrap();
        let bad = params(&[
            ("node", "pve1"),
            ("vmid", "100"),
            ("net0", "virtio=01:24:11:00:00:01,tag=0"),
        ]);
        let e = validate(create(), &bad, PveVersion::CURRENT).unwrap_err();
        assert!(e["net0"].contains("value does not look like a valid unicast MAC address"));
        assert!(e["net0"].contains("tag: value must have a minimum value of 1"));
    }

    #[test]
    fn json_booleans_accepted() {
        let mut p = params(&[("node", "pve1"), ("vmid", "100")]);
        p.insert("onboot".into(), json!(true));
        p.insert("cores".into(), json!(2));
        validate(create(), &p, PveVersion::CURRENT).unwrap();
    }
}
