//! Ansible's type coercion rules (`ansible.module_utils.common.validation.check_type_*`).
//!
//! ansible-core does not normalise types for binary modules: ad-hoc `k=v` arguments arrive as strings,
//! and templated values arrive as strings on older cores. So the module converts like `AnsibleModule`.

use serde_json::{Map, Number, Value};

use crate::spec::Type;

/// Why a value cannot be converted to an option's type; the text is the reason part of Ansible's
/// "argument 'x' is of type ... and we were unable to convert to ...: REASON".
#[derive(Debug, thiserror::Error)]
pub enum CoerceError {
    #[error("cannot convert a {from} to {to}")]
    WrongType {
        from: &'static str,
        to: &'static str,
    },
    #[error("{0} is not a whole number")]
    NotWhole(f64),
    #[error("invalid literal for int: '{0}'")]
    BadInt(String),
    #[error("a bool is not an int")]
    BoolIsNotInt,
    #[error("could not convert string to float: '{0}'")]
    BadFloat(String),
    #[error("'{0}' is not a finite number")]
    NotFinite(String),
    #[error("the value {0} is not a valid boolean; valid booleans include yes/no, true/false, on/off, 1/0")]
    BadBoolNumber(Number),
    #[error("the value '{0}' is not a valid boolean; valid booleans include yes/no, true/false, on/off, 1/0")]
    BadBoolString(String),
    #[error("invalid JSON dict: {0}")]
    BadJsonDict(#[source] serde_json::Error),
    #[error("'{0}' is not a key=value pair")]
    NotKeyValue(String),
}

fn wrong_type(v: &Value, to: &'static str) -> CoerceError {
    CoerceError::WrongType {
        from: type_name(v),
        to,
    }
}

const TRUE_STRINGS: &[&str] = &["y", "yes", "on", "1", "true", "t"];
const FALSE_STRINGS: &[&str] = &["n", "no", "off", "0", "false", "f"];

/// A short name for a JSON value's type, as Ansible users know them.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Convert `v` to `ty`, or say why it cannot be.
pub fn coerce(v: &Value, ty: Type) -> Result<Value, CoerceError> {
    match ty {
        Type::Raw => Ok(v.clone()),
        Type::Str => to_str(v).map(Value::String),
        Type::Path => to_str(v).map(|s| Value::String(expand_path(&s))),
        Type::Int => to_int(v),
        Type::Float => to_float(v),
        Type::Bool => to_bool(v).map(Value::Bool),
        Type::List => to_list(v),
        Type::Dict => to_dict(v),
        Type::Json => to_json_string(v),
    }
}

fn to_str(v: &Value) -> Result<String, CoerceError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(if *b { "True".into() } else { "False".into() }),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(wrong_type(other, "str")),
    }
}

fn to_int(v: &Value) -> Result<Value, CoerceError> {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(v.clone()),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 && f.is_finite() && f.abs() < 9.0e15 {
                Ok(Value::from(f as i64))
            } else {
                Err(CoerceError::NotWhole(f))
            }
        }
        Value::String(s) => {
            let t = s.trim();
            t.parse::<i64>()
                .map(Value::from)
                .or_else(|_| t.parse::<u64>().map(Value::from))
                .map_err(|_| CoerceError::BadInt(s.clone()))
        }
        Value::Bool(_) => Err(CoerceError::BoolIsNotInt),
        other => Err(wrong_type(other, "int")),
    }
}

fn to_float(v: &Value) -> Result<Value, CoerceError> {
    match v {
        Value::Number(n) => Ok(Value::Number(
            Number::from_f64(n.as_f64().unwrap_or(0.0)).unwrap_or_else(|| Number::from(0)),
        )),
        Value::String(s) => {
            let f: f64 = s
                .trim()
                .parse()
                .map_err(|_| CoerceError::BadFloat(s.clone()))?;
            Number::from_f64(f)
                .map(Value::Number)
                .ok_or_else(|| CoerceError::NotFinite(s.clone()))
        }
        other => Err(wrong_type(other, "float")),
    }
}

/// Ansible's `boolean()`: JSON bools, `1`/`0`, and yes/no/on/off/true/false/y/n/t/f in any case.
pub fn to_bool(v: &Value) -> Result<bool, CoerceError> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Ok(true),
            Some(0.0) => Ok(false),
            _ => Err(CoerceError::BadBoolNumber(n.clone())),
        },
        Value::String(s) => {
            let l = s.trim().to_ascii_lowercase();
            if TRUE_STRINGS.contains(&l.as_str()) {
                Ok(true)
            } else if FALSE_STRINGS.contains(&l.as_str()) {
                Ok(false)
            } else {
                Err(CoerceError::BadBoolString(s.clone()))
            }
        }
        other => Err(wrong_type(other, "bool")),
    }
}

fn to_list(v: &Value) -> Result<Value, CoerceError> {
    match v {
        Value::Array(_) => Ok(v.clone()),
        // "a,b,c" is a list of three strings, as in core.
        Value::String(s) => Ok(Value::Array(
            s.split(',').map(|p| Value::String(p.to_string())).collect(),
        )),
        Value::Number(_) | Value::Bool(_) => Ok(Value::Array(vec![Value::String(to_str(v)?)])),
        other => Err(wrong_type(other, "list")),
    }
}

fn to_dict(v: &Value) -> Result<Value, CoerceError> {
    match v {
        Value::Object(_) => Ok(v.clone()),
        Value::String(s) => {
            let t = s.trim();
            if t.starts_with('{') {
                return serde_json::from_str::<Map<String, Value>>(t)
                    .map(Value::Object)
                    .map_err(CoerceError::BadJsonDict);
            }
            // core's k=v form: "a=1, b=2" or "a=1 b=2".
            let mut m = Map::new();
            for part in t.split([',', ' ']).map(str::trim).filter(|p| !p.is_empty()) {
                let (k, val) = part
                    .split_once('=')
                    .ok_or_else(|| CoerceError::NotKeyValue(part.to_string()))?;
                m.insert(k.trim().to_string(), Value::String(val.trim().to_string()));
            }
            Ok(Value::Object(m))
        }
        other => Err(wrong_type(other, "dict")),
    }
}

fn to_json_string(v: &Value) -> Result<Value, CoerceError> {
    match v {
        Value::String(_) => Ok(v.clone()),
        Value::Array(_) | Value::Object(_) => Ok(Value::String(v.to_string())),
        other => Err(wrong_type(other, "json")),
    }
}

/// `os.path.expanduser(os.path.expandvars(p))`: `$VAR`/`${VAR}` that are set are replaced, then a
/// leading `~` or `~/` becomes `$HOME`.
pub fn expand_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut rest = p;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, consumed) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        match (name.is_empty(), std::env::var(name)) {
            (false, Ok(val)) => out.push_str(&val),
            _ => out.push_str(&rest[i..i + 1 + consumed]),
        }
        rest = &after[consumed..];
    }
    out.push_str(rest);
    if out == "~" || out.starts_with("~/") {
        if let Ok(home) = std::env::var("HOME") {
            return format!("{home}{}", &out[1..]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bools_follow_ansible() {
        for t in ["yes", "YES", "on", "1", "true", "True", "t", "y"] {
            assert_eq!(to_bool(&json!(t)).ok(), Some(true), "{t}");
        }
        for f in ["no", "off", "0", "false", "FALSE", "f", "n"] {
            assert_eq!(to_bool(&json!(f)).ok(), Some(false), "{f}");
        }
        assert_eq!(to_bool(&json!(1)).ok(), Some(true));
        assert_eq!(to_bool(&json!(0)).ok(), Some(false));
        assert!(to_bool(&json!("maybe"))
            .unwrap_err()
            .to_string()
            .contains("'maybe'"));
        assert!(to_bool(&json!(2)).is_err());
    }

    #[test]
    fn ints_from_strings_and_whole_floats() {
        assert_eq!(coerce(&json!("42"), Type::Int).ok(), Some(json!(42)));
        assert_eq!(coerce(&json!(" 7 "), Type::Int).ok(), Some(json!(7)));
        assert_eq!(coerce(&json!(3.0), Type::Int).ok(), Some(json!(3)));
        assert!(coerce(&json!(3.5), Type::Int).is_err());
        assert!(coerce(&json!("4k"), Type::Int)
            .unwrap_err()
            .to_string()
            .contains("'4k'"));
        assert!(coerce(&json!(true), Type::Int).is_err());
        assert!(coerce(&json!([1]), Type::Int).is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(coerce(&json!("1.5"), Type::Float).ok(), Some(json!(1.5)));
        assert_eq!(coerce(&json!(2), Type::Float).ok(), Some(json!(2.0)));
        assert!(coerce(&json!("x"), Type::Float).is_err());
    }

    #[test]
    fn strings_from_scalars_only() {
        assert_eq!(coerce(&json!(5), Type::Str).ok(), Some(json!("5")));
        assert_eq!(coerce(&json!(true), Type::Str).ok(), Some(json!("True")));
        assert!(coerce(&json!({"a": 1}), Type::Str).is_err());
    }

    #[test]
    fn lists_from_comma_strings() {
        assert_eq!(
            coerce(&json!("a,b,c"), Type::List).ok(),
            Some(json!(["a", "b", "c"]))
        );
        assert_eq!(coerce(&json!(3), Type::List).ok(), Some(json!(["3"])));
        assert!(coerce(&json!({"a": 1}), Type::List).is_err());
    }

    #[test]
    fn dicts_from_json_and_key_value_strings() {
        assert_eq!(
            coerce(&json!("{\"a\": 1}"), Type::Dict).ok(),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            coerce(&json!("a=1, b=2"), Type::Dict).ok(),
            Some(json!({"a": "1", "b": "2"}))
        );
        assert!(coerce(&json!("novalue"), Type::Dict).is_err());
        assert!(coerce(&json!(1), Type::Dict).is_err());
    }

    #[test]
    fn json_serialises_structures() {
        assert_eq!(
            coerce(&json!({"a": 1}), Type::Json).ok(),
            Some(json!("{\"a\":1}"))
        );
        assert_eq!(coerce(&json!("[1]"), Type::Json).ok(), Some(json!("[1]")));
    }

    #[test]
    fn paths_expand_home_and_vars() {
        std::env::set_var("PS_TEST_DIR", "/srv/x");
        let home = std::env::var("HOME").unwrap();
        assert_eq!(expand_path("~/a"), format!("{home}/a"));
        assert_eq!(expand_path("$PS_TEST_DIR/b"), "/srv/x/b");
        assert_eq!(expand_path("${PS_TEST_DIR}/c"), "/srv/x/c");
        assert_eq!(expand_path("$PS_TEST_UNSET_VAR/d"), "$PS_TEST_UNSET_VAR/d");
        assert_eq!(expand_path("a~b"), "a~b");
    }
}
