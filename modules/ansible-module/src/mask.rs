//! no_log masking done by the module itself: ansible-core does not mask a binary module's output.
//! Same rules as core's `remove_values`: a string equal to a secret becomes
//! `VALUE_SPECIFIED_IN_NO_LOG_PARAMETER`; a secret inside a longer string becomes `********`; a number
//! whose text holds a secret is masked whole. Dict keys are masked too, as core's `sanitize_keys` does
//! for results that carry data as keys (a header name, a Secret's `NAMESPACE/NAME`).
//!
//! A secret is also hidden in the forms it takes when an error quotes a request or a body: JSON-escaped
//! (a proxy echoing the JSON it was sent), URL-encoded (a form body, a query), base64 (a Basic header, a
//! Kubernetes Secret's `data`) at each of the three alignments it can start at inside a longer encoding
//! ([`with_encodings`]).

use serde_json::{Map, Value};

use crate::spec::{ArgSpec, Opt};

pub const MASK_WHOLE: &str = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER";
pub const MASK_PART: &str = "********";

/// Shortest secret whose base64 forms are masked: a shorter one's alignment cores (4 characters and less)
/// would match unrelated base64 text.
const BASE64_MIN: usize = 6;

/// `secrets` and, after them, every other form each takes quoted in a body: JSON-escaped (as serde and as
/// Python's `json.dumps` write it, and escaped twice), URL-encoded (RFC 3986 and form style, upper and lower
/// case hex), and base64 (standard and URL-safe) at the three alignments it can have inside a longer
/// encoded text — for each alignment the characters that depend on the secret's bytes alone.
pub fn with_encodings(secrets: &[String]) -> Vec<String> {
    let mut out: Vec<String> = secrets.to_vec();
    let mut add = |form: String| {
        if !form.is_empty() && !out.contains(&form) {
            out.push(form);
        }
    };
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        for form in json_forms(s).into_iter().chain(url_forms(s)) {
            add(form);
        }
        if s.len() >= BASE64_MIN {
            for form in base64_forms(s.as_bytes()) {
                add(form);
            }
        }
    }
    out
}

fn json_escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted[1..quoted.len().saturating_sub(1).max(1)].to_string()
}

fn json_forms(s: &str) -> Vec<String> {
    let once = json_escaped(s);
    // Python's json.dumps: non-ASCII as \uXXXX (UTF-16), and `/` as `\/` by some servers.
    let ascii: String = once
        .chars()
        .flat_map(|c| match c.is_ascii() {
            true => vec![c.to_string()],
            false => c
                .encode_utf16(&mut [0; 2])
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect(),
        })
        .collect();
    let twice = json_escaped(&once);
    // PHP's json_encode does both.
    [
        once.replace('/', "\\/"),
        ascii.replace('/', "\\/"),
        once,
        ascii,
        twice,
    ]
    .into_iter()
    .filter(|f| f != s)
    .collect()
}

fn url_forms(s: &str) -> Vec<String> {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const RFC3986: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    const FORM: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'*');
    let rfc = utf8_percent_encode(s, RFC3986).to_string();
    let form = utf8_percent_encode(s, FORM).to_string().replace("%20", "+");
    let lower = |e: &str| {
        let mut out = String::with_capacity(e.len());
        let mut hex_left = 0u8;
        for c in e.chars() {
            if c == '%' {
                hex_left = 2;
                out.push(c);
            } else if hex_left > 0 {
                hex_left -= 1;
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    };
    [lower(&rfc), lower(&form), rfc, form]
        .into_iter()
        .filter(|f| f != s)
        .collect()
}

fn base64_forms(bytes: &[u8]) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    use base64::Engine;
    let mut forms = Vec::new();
    for k in 0..3 {
        let mut shifted = vec![0u8; k];
        shifted.extend_from_slice(bytes);
        // Character i covers bits [6i, 6i+6): keep the ones inside the secret's bits [8k, 8(k+n)).
        let (start, end) = ((8 * k).div_ceil(6), 8 * (k + bytes.len()) / 6);
        for engine in [&STANDARD, &URL_SAFE] {
            let text = engine.encode(&shifted);
            if let Some(core) = text.get(start..end) {
                forms.push(core.to_string());
            }
        }
    }
    forms
}

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
        Value::Object(m) => mask_entries(m, secrets, true),
        Value::Number(n) => {
            let text = n.to_string();
            if secrets
                .iter()
                .any(|x| !x.is_empty() && text.contains(x.as_str()))
            {
                *v = Value::String(MASK_WHOLE.into());
            }
        }
        _ => {}
    }
}

/// Mask a module's whole result: as [`mask_value`], except that the keys of the result itself
/// (`changed`, `msg`, ...) and the option names in `invocation.module_args` stay as they are, since
/// they are the protocol, not data (a one-letter secret would otherwise take `changed` away).
pub fn mask_result(result: &mut Value, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let Value::Object(top) = result else {
        return mask_value(result, secrets);
    };
    let invocation = top.remove("invocation");
    mask_entries(top, secrets, false);
    if let Some(mut inv) = invocation {
        if let Value::Object(i) = &mut inv {
            for (_, args) in i.iter_mut() {
                match args {
                    Value::Object(a) => mask_entries(a, secrets, false),
                    other => mask_value(other, secrets),
                }
            }
        }
        top.insert("invocation".into(), inv);
    }
}

/// Mask the values of `m`, and its keys when `keys` is set.
fn mask_entries(m: &mut Map<String, Value>, secrets: &[String], keys: bool) {
    let entries = std::mem::take(m);
    for (key, mut x) in entries {
        mask_value(&mut x, secrets);
        let key = match keys {
            true => mask_str(&key, secrets).unwrap_or(key),
            false => key,
        };
        m.insert(key, x);
    }
}

/// The options as `invocation.module_args` shows them: every `no_log` option masked whole under
/// whichever name it was given (aliases too), at any depth of the sub-options, and the values under a
/// free dict's `no_log_keys`. Works on the input as given as well as on validated options, so a
/// failure before validation finished shows no more than a success.
pub fn mask_options(args: &Map<String, Value>, spec: &ArgSpec) -> Map<String, Value> {
    let mut args = args.clone();
    mask_options_in(&mut args, spec);
    args
}

fn mask_options_in(args: &mut Map<String, Value>, spec: &ArgSpec) {
    for opt in &spec.options {
        for name in opt.names() {
            if let Some(v) = args.get_mut(name) {
                mask_option(opt, v);
            }
        }
    }
}

fn mask_option(opt: &Opt, v: &mut Value) {
    if v.is_null() {
        return;
    }
    if opt.no_log {
        *v = Value::String(MASK_WHOLE.into());
        return;
    }
    mask_under_keys(v, &opt.no_log_keys);
    if let Some(sub) = &opt.options {
        match v {
            Value::Object(m) => mask_options_in(m, sub),
            Value::Array(items) => items
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .for_each(|m| mask_options_in(m, sub)),
            _ => {}
        }
    }
}

fn mask_under_keys(v: &mut Value, keys: &[&str]) {
    if keys.is_empty() {
        return;
    }
    match v {
        Value::Array(a) => a.iter_mut().for_each(|x| mask_under_keys(x, keys)),
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if keys.contains(&k.as_str()) {
                    if !x.is_null() {
                        *x = Value::String(MASK_WHOLE.into());
                    }
                } else {
                    mask_under_keys(x, keys);
                }
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
    fn a_secret_is_hidden_in_every_encoding_a_quoted_body_gives_it() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        use base64::Engine;
        let secret = "p\"w/ä d&=+?~*".to_string();
        let forms = with_encodings(std::slice::from_ref(&secret));
        assert_eq!(forms[0], secret);
        let body = |s: &str| format!("upstream said: {s} (echoed)");
        let json = serde_json::to_string(&json!({"password": secret})).unwrap();
        let python_json = r#"{"password": "p\"w\/\u00e4 d&=+?~*"}"#;
        let form = "user=a&password=p%22w%2F%C3%A4+d%26%3D%2B%3F%7E*";
        let query = "?password=p%22w%2f%c3%a4%20d%26%3d%2b%3f~%2a&x=1";
        let twice = serde_json::to_string(&json).unwrap();
        let mut quoted: Vec<String> = [json.as_str(), python_json, form, query, twice.as_str()]
            .iter()
            .map(|s| body(s))
            .collect();
        // base64 of the secret inside a longer text, at each alignment, both alphabets.
        for prefix in ["", "a", "ab"] {
            let plain = format!("{prefix}user:{secret}:rest");
            quoted.push(body(&STANDARD.encode(&plain)));
            quoted.push(body(&URL_SAFE.encode(&plain)));
        }
        for text in quoted {
            let masked = mask_str(&text, &forms).unwrap_or_else(|| panic!("not masked: {text}"));
            assert!(masked.contains(MASK_PART), "{masked}");
            for form in &forms {
                assert!(!masked.contains(form.as_str()), "{form:?} left in {masked}");
            }
        }
        // A secret with nothing to escape adds no text form; a short one no base64 form.
        assert_eq!(
            with_encodings(&["abc".to_string()]),
            vec!["abc".to_string()]
        );
        assert_eq!(with_encodings(&["abcdef".to_string()]).len(), 1 + 3);
    }

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
        let mut v = json!({"pin": 1234, "longer": 912345, "other": 5});
        mask_value(&mut v, &["1234".to_string()]);
        assert_eq!(
            v,
            json!({"pin": MASK_WHOLE, "longer": MASK_WHOLE, "other": 5})
        );
    }

    #[test]
    fn a_result_keeps_its_own_keys_and_the_option_names() {
        let secrets = vec!["c".to_string(), "tok".to_string()];
        let mut v = json!({
            "changed": false, "msg": "tok here",
            "invocation": {"module_args": {"token": "tok", "headers": {"tok-h": 1}}},
            "data": {"tok": "x"},
        });
        mask_result(&mut v, &secrets);
        assert_eq!(v["changed"], json!(false));
        assert_eq!(v["msg"], json!("******** here"));
        let args = &v["invocation"]["module_args"];
        assert_eq!(args["token"], json!(MASK_WHOLE));
        assert_eq!(args["headers"], json!({"********-h": 1}));
        assert_eq!(v["data"], json!({MASK_WHOLE: "x"}));
    }

    fn spec() -> ArgSpec {
        use crate::spec::Type;
        ArgSpec::new(vec![
            Opt::str("token").no_log().aliases(&["api_token"]),
            Opt::bool("pin").no_log(),
            Opt::dict("extra").no_log_keys(&["cipassword"]),
            Opt::list("vms", Type::Dict).options(ArgSpec::new(vec![
                Opt::str("name"),
                Opt::str("password").no_log(),
                Opt::dict("extra").no_log_keys(&["cipassword"]),
            ])),
        ])
    }

    #[test]
    fn options_are_masked_by_name_alias_depth_and_key() {
        let args = json!({
            "api_token": "t1", "pin": false,
            "extra": {"cipassword": "c1", "tablet": 0, "nested": {"cipassword": 7}},
            "vms": [{"name": "a", "password": "p1", "extra": {"cipassword": "c2"}}, "not a dict"],
        });
        let masked = mask_options(args.as_object().unwrap(), &spec());
        assert_eq!(
            Value::Object(masked),
            json!({
                "api_token": MASK_WHOLE, "pin": MASK_WHOLE,
                "extra": {"cipassword": MASK_WHOLE, "tablet": 0, "nested": {"cipassword": MASK_WHOLE}},
                "vms": [{"name": "a", "password": MASK_WHOLE, "extra": {"cipassword": MASK_WHOLE}}, "not a dict"],
            })
        );
    }

    #[test]
    fn dict_keys_are_masked_at_any_depth() {
        let secrets = vec!["tok-key-1".to_string()];
        let mut v = json!({
            "tok-key-1": 1,
            "headers": {"x-tok-key-1-y": "v", "plain": "tok-key-1"},
            "list": [{"tok-key-1": {"tok-key-1": true}}],
        });
        mask_value(&mut v, &secrets);
        assert_eq!(
            v,
            json!({
                MASK_WHOLE: 1,
                "headers": {"x-********-y": "v", "plain": MASK_WHOLE},
                "list": [{MASK_WHOLE: {MASK_WHOLE: true}}],
            })
        );
    }
}
