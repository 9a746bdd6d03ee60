//! no_log masking done by the module itself: ansible-core does not mask a binary module's output.
//! Same rules as core's `remove_values`: a string equal to a secret becomes
//! `VALUE_SPECIFIED_IN_NO_LOG_PARAMETER`; a secret inside a longer string becomes `********`.

use serde_json::Value;

pub const MASK_WHOLE: &str = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER";
pub const MASK_PART: &str = "********";

/// Mask every occurrence of `secrets` anywhere in `v` (dict values, list items, nested).
pub fn mask_value(v: &mut Value, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    match v {
        Value::String(s) => {
            if let Some(masked) = mask_str(s, secrets) {
                *s = masked;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mask_value(x, secrets)),
        Value::Object(m) => m.values_mut().for_each(|x| mask_value(x, secrets)),
        Value::Number(n) => {
            let text = n.to_string();
            if secrets.contains(&text) {
                *v = Value::String(MASK_WHOLE.into());
            }
        }
        _ => {}
    }
}

/// The masked form of `s`, or `None` when it holds no secret.
pub fn mask_str(s: &str, secrets: &[String]) -> Option<String> {
    if secrets.iter().any(|x| x == s) {
        return Some(MASK_WHOLE.to_string());
    }
    // Longest first, so a secret that contains a shorter one is hidden whole.
    let mut sorted: Vec<&String> = secrets
        .iter()
        .filter(|x| !x.is_empty() && s.contains(x.as_str()))
        .collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by_key(|x| std::cmp::Reverse(x.len()));
    let mut out = s.to_string();
    for secret in sorted {
        out = out.replace(secret.as_str(), MASK_PART);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_and_partial() {
        let secrets = vec!["s3cr3t".to_string(), "s3cr3tLonger".to_string()];
        let mut v = json!({
            "msg": "login failed for s3cr3tLonger and s3cr3t",
            "invocation": {"module_args": {"pw": "s3cr3t", "list": ["x", "s3cr3t"]}},
            "keep": "nothing here",
        });
        mask_value(&mut v, &secrets);
        assert_eq!(v["msg"], json!("login failed for ******** and ********"));
        assert_eq!(v["invocation"]["module_args"]["pw"], json!(MASK_WHOLE));
        assert_eq!(v["invocation"]["module_args"]["list"][1], json!(MASK_WHOLE));
        assert_eq!(v["keep"], json!("nothing here"));
    }

    #[test]
    fn numeric_secrets() {
        let mut v = json!({"pin": 1234, "other": 5});
        mask_value(&mut v, &["1234".to_string()]);
        assert_eq!(v, json!({"pin": MASK_WHOLE, "other": 5}));
    }
}
