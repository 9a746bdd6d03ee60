//! A small structural JSON-schema walker for the InstallConfig CRD's `openAPIV3Schema` (test-only):
//! types, enums, required, unknown properties, item counts, string lengths and numeric bounds.
//! `pattern`, `format` and the CEL `x-kubernetes-validations` are not evaluated.

use serde_json::Value;

pub fn crd_schema() -> Value {
    let crd: Value = serde_yaml_ng::from_str(include_str!(
        "../schema/install.openshift.io_installconfigs.yaml"
    ))
    .expect("CRD parses");
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn type_ok(ty: &str, v: &Value, int_or_string: bool) -> bool {
    if int_or_string && (v.is_string() || v.is_i64() || v.is_u64()) {
        return true;
    }
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    }
}

/// CRD rules that do not apply to agent-based installs. `platform.baremetal.hosts` is required for
/// installer-provisioned baremetal; with the agent installer the hosts live in agent-config.yaml and
/// the agent overlay drops the requirement.
const AGENT_OVERRIDES: &[&str] = &["/platform/baremetal: required property 'hosts' is missing"];

/// `serviceNetwork`'s `maxItems: 1` is a stale marker ("currently only one entry is supported"):
/// the installer's own `validateNetworkingIPVersion` requires two service networks for dual stack
/// (and openshift-install never applies the CRD), so two are allowed, never three.
const SERVICE_NETWORK_MAX: &str = "/networking/serviceNetwork: more than 1 items";

/// Every violation as `path: reason`, minus [`AGENT_OVERRIDES`] and a dual-stack service pair.
pub fn validate(schema: &Value, v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, v, "", &mut out);
    let services = v
        .pointer("/networking/serviceNetwork")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    out.retain(|e| {
        !(AGENT_OVERRIDES.contains(&e.as_str()) || (e == SERVICE_NETWORK_MAX && services == 2))
    });
    out
}

fn walk(s: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    let at = if path.is_empty() { "/" } else { path };
    let int_or_string = s
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(ty) = s.get("type").and_then(Value::as_str) {
        if !type_ok(ty, v, int_or_string) {
            out.push(format!("{at}: expected {ty}, got {v}"));
            return;
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            out.push(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    for sub in ["allOf"] {
        for x in s.get(sub).and_then(Value::as_array).into_iter().flatten() {
            walk(x, v, path, out);
        }
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|x| {
            let mut o = Vec::new();
            walk(x, v, path, &mut o);
            o.is_empty()
        });
        if !ok {
            out.push(format!("{at}: matches none of anyOf"));
        }
    }
    match v {
        Value::Object(m) => {
            for r in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !m.contains_key(r) {
                    out.push(format!("{at}: required property '{r}' is missing"));
                }
            }
            if let Some(n) = s.get("minProperties").and_then(Value::as_u64) {
                if (m.len() as u64) < n {
                    out.push(format!("{at}: needs at least {n} properties"));
                }
            }
            let props = s.get("properties").and_then(Value::as_object);
            let preserve = s
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            for (k, val) in m {
                match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                    (Some(ps), _) => walk(ps, val, &format!("{path}/{k}"), out),
                    (None, Some(ap)) if ap.is_object() => {
                        walk(ap, val, &format!("{path}/{k}"), out)
                    }
                    (None, Some(Value::Bool(true))) => {}
                    (None, _) if props.is_some() && !preserve => {
                        out.push(format!("{path}/{k}: unknown property"))
                    }
                    _ => {}
                }
            }
        }
        Value::Array(a) => {
            if let Some(n) = s.get("maxItems").and_then(Value::as_u64) {
                if a.len() as u64 > n {
                    out.push(format!("{at}: more than {n} items"));
                }
            }
            if let Some(n) = s.get("minItems").and_then(Value::as_u64) {
                if (a.len() as u64) < n {
                    out.push(format!("{at}: fewer than {n} items"));
                }
            }
            if let Some(items) = s.get("items") {
                for (i, x) in a.iter().enumerate() {
                    walk(items, x, &format!("{path}/{i}"), out);
                }
            }
        }
        Value::String(st) => {
            let len = st.chars().count() as u64;
            if s.get("maxLength")
                .and_then(Value::as_u64)
                .is_some_and(|n| len > n)
            {
                out.push(format!("{at}: longer than maxLength"));
            }
            if s.get("minLength")
                .and_then(Value::as_u64)
                .is_some_and(|n| len < n)
            {
                out.push(format!("{at}: shorter than minLength"));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if s.get("maximum")
                .and_then(Value::as_f64)
                .is_some_and(|m| x > m)
            {
                out.push(format!("{at}: above maximum"));
            }
            if s.get("minimum")
                .and_then(Value::as_f64)
                .is_some_and(|m| x < m)
            {
                out.push(format!("{at}: below minimum"));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn walker_catches_type_enum_required_and_unknown() {
        let s = crd_schema();
        let bad = json!({
            "apiVersion": "v1", "baseDomain": "x.com", "metadata": {"name": "a"},
            "platform": {"none": {}}, "pullSecret": 5,
            "fips": "no",
            "additionalTrustBundlePolicy": "Sometimes",
            "controlPlane": {"name": "master", "replicas": 3, "rootVolume": {"device": "/dev/sda"}},
            "networking": {"serviceNetwork": ["172.30.0.0/16", "fd02::/112", "fd03::/112"]},
        });
        let errs = validate(&s, &bad);
        for want in [
            "/pullSecret: expected string",
            "/fips: expected boolean",
            "/additionalTrustBundlePolicy:",
            "/controlPlane/rootVolume: unknown property",
            "/networking/serviceNetwork: more than 1 items",
        ] {
            assert!(
                errs.iter().any(|e| e.starts_with(want)),
                "{want} not in {errs:?}"
            );
        }
        let missing = validate(&s, &json!({"apiVersion": "v1"}));
        assert!(
            missing
                .iter()
                .any(|e| e.contains("'pullSecret' is missing")),
            "{missing:?}"
        );
    }
}
