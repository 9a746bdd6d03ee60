//! The module runtime: read the args file, validate, run the module body, mask secrets, print exactly
//! one JSON object. A panic anywhere becomes a clean `failed` result, never "Module result
//! deserialization failed".

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use crate::mask::{mask_options, mask_result};
use crate::spec::ArgSpec;
use crate::validate::validate;

/// What a module body gets: validated options, Ansible's internal flags, and places to put warnings,
/// deprecations, diffs and secrets learnt at run time.
#[derive(Debug)]
pub struct Module {
    /// Validated options, every option of the spec present (default or `null` when not given).
    pub params: Map<String, Value>,
    pub check_mode: bool,
    pub diff_mode: bool,
    /// `_ansible_no_log`: the task is `no_log`; the controller censors the display.
    pub no_log: bool,
    pub verbosity: u64,
    pub module_name: String,
    /// Options the task did not give that their environment fallback filled (`K8S_AUTH_HOST` …).
    pub from_env: Vec<String>,
    /// `_ansible_keep_remote_files`: leave scratch files for debugging.
    pub keep_remote_files: bool,
    tmpdir: Option<PathBuf>,
    warnings: Vec<String>,
    deprecations: Vec<Value>,
    diffs: Vec<Value>,
}

impl Module {
    /// The options as a typed struct. Validation already coerced the types, so a serde struct whose
    /// fields mirror the spec deserialises without surprises.
    pub fn options<T: DeserializeOwned>(&self) -> Result<T, Failure> {
        serde_json::from_value(Value::Object(self.params.clone())).map_err(|e| {
            Failure::new(format!(
                "internal error: options do not match the module's types: {e}"
            ))
        })
    }

    pub fn warn(&mut self, msg: impl Into<String>) {
        self.warnings.push(msg.into());
    }

    /// A deprecation warning, shown by the controller as `[DEPRECATION WARNING]`.
    pub fn deprecate(&mut self, msg: impl Into<String>, version: &str, collection: &str) {
        self.deprecations
            .push(json!({"msg": msg.into(), "version": version, "collection_name": collection}));
    }

    /// Add one before/after pair; several pairs are returned as a list (one diff each).
    pub fn add_diff(
        &mut self,
        before: Value,
        after: Value,
        before_header: &str,
        after_header: &str,
    ) {
        if self.diff_mode {
            self.diffs.push(json!({"before": before, "after": after,
                                   "before_header": before_header, "after_header": after_header}));
        }
    }

    /// Mask this value everywhere in the output too (a token or ticket obtained at run time).
    pub fn add_secret(&mut self, secret: impl Into<String>) {
        let s = secret.into();
        if !s.is_empty() {
            if let Ok(mut g) = secrets().lock() {
                g.push(s);
            }
        }
    }

    /// The per-task scratch directory (`_ansible_tmpdir`), or the system temp dir when Ansible sends
    /// none (become to an unprivileged user).
    pub fn tmpdir(&self) -> PathBuf {
        self.tmpdir.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// A successful result: `changed`, an optional `msg`, and domain data under stable names.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub changed: bool,
    pub msg: Option<String>,
    pub data: Map<String, Value>,
}

impl Outcome {
    pub fn new(changed: bool) -> Self {
        Outcome {
            changed,
            ..Default::default()
        }
    }
    pub fn msg(mut self, msg: impl Into<String>) -> Self {
        self.msg = Some(msg.into());
        self
    }
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_string(), value.into());
        self
    }
}

/// A failed result: a clear `msg`, whether anything changed before the failure, and details.
#[derive(Debug, Default, Clone)]
pub struct Failure {
    pub msg: String,
    pub changed: bool,
    pub data: Map<String, Value>,
}

impl Failure {
    pub fn new(msg: impl Into<String>) -> Self {
        Failure {
            msg: msg.into(),
            ..Default::default()
        }
    }
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_string(), value.into());
        self
    }
    pub fn changed(mut self, changed: bool) -> Self {
        self.changed = changed;
        self
    }
}

impl From<String> for Failure {
    fn from(msg: String) -> Self {
        Failure::new(msg)
    }
}

impl From<&str> for Failure {
    fn from(msg: &str) -> Self {
        Failure::new(msg)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        // `{:#}` gives the whole context chain on one line: "creating VM 101: task failed: …".
        Failure::new(format!("{e:#}"))
    }
}

/// Secrets known to this process, read by the panic hook as well as the normal output path.
fn secrets() -> &'static Mutex<Vec<String>> {
    static SECRETS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    SECRETS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Forget the secrets earlier runs of this process learnt. For an in-process harness that runs one
/// module input after another on one thread (the fuzz targets: thousands of runs would otherwise mask
/// every result against every earlier run's secrets); a module binary runs once and never needs it.
pub fn forget_secrets() {
    if let Ok(mut g) = secrets().lock() {
        g.clear();
    }
}

fn remember(values: Vec<String>) {
    if let Ok(mut g) = secrets().lock() {
        g.extend(values.into_iter().filter(|x| !x.is_empty()));
    }
}

/// The secrets to mask: each as given and in the forms it takes inside a quoted body (JSON-escaped,
/// URL-encoded, base64 — [`crate::mask::with_encodings`]).
fn current_secrets() -> Vec<String> {
    crate::mask::with_encodings(&secrets().lock().map(|g| g.clone()).unwrap_or_default())
}

/// Run a module: the whole `main` of a module binary.
///
/// `argv[1]` names the args file. `--argument-spec` instead prints the spec as JSON (for tooling and
/// the documentation drift tests). Never returns.
pub fn run<F>(spec: ArgSpec, body: F) -> !
where
    F: FnOnce(&mut Module) -> Result<Outcome, Failure>,
{
    install_panic_hook();
    let arg = std::env::args_os().nth(1);
    if arg.as_deref() == Some(std::ffi::OsStr::new("--argument-spec")) {
        println!("{}", spec.to_json());
        std::process::exit(0);
    }
    let text = match &arg {
        None => Err("no arguments file: a module is run as `MODULE ARGS_FILE`, with the JSON arguments in ARGS_FILE"
            .to_string()),
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the arguments file {}: {e}", PathBuf::from(path).display())),
    };
    let default_name = std::env::args()
        .next()
        .and_then(|p| {
            PathBuf::from(p).file_name().map(|f| {
                f.to_string_lossy()
                    .trim_start_matches("AnsiballZ_")
                    .to_string()
            })
        })
        .unwrap_or_else(|| "module".into());
    let (result, code) = match text {
        Ok(t) => execute(&t, &default_name, &spec, body),
        Err(msg) => finish(json!({"failed": true, "changed": false, "msg": msg}), &[]),
    };
    emit(&result);
    std::process::exit(code)
}

/// Run a module body as the backend of a controller-side plugin (inventory, lookup): as
/// [`run_stdin`], with the options final as the plugin sends them. Ansible resolved them from the
/// plugin's `DOCUMENTATION` (`get_option`: task, variables, environment, `ansible.cfg`), so `spec`'s
/// environment fallbacks are dropped: the binary reads no variable the plugin did not resolve, and
/// the documentation is the one list of names each option has. Never returns.
pub fn run_plugin<F>(name: &str, spec: ArgSpec, body: F) -> !
where
    F: FnOnce(&mut Module) -> Result<Outcome, Failure>,
{
    run_stdin(name, spec.without_env_fallbacks(), body)
}

/// Run a module body with its options as one JSON object on stdin instead of an args file (the
/// lease keeper a module starts; plugin backends use [`run_plugin`]); the result (validated,
/// masked, without `invocation`) goes to stdout as for [`run`]. `name` appears in validation
/// errors. Never returns.
pub fn run_stdin<F>(name: &str, spec: ArgSpec, body: F) -> !
where
    F: FnOnce(&mut Module) -> Result<Outcome, Failure>,
{
    use std::io::Read;
    install_panic_hook();
    let mut text = String::new();
    let (result, code) = match std::io::stdin().read_to_string(&mut text) {
        Err(e) => finish(
            json!({"failed": true, "changed": false, "msg": format!("cannot read the options from stdin: {e}")}),
            &[],
        ),
        Ok(_) => {
            let args = match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(mut m)) => {
                    m.insert("_ansible_inject_invocation".into(), json!(false));
                    Value::Object(m).to_string()
                }
                _ => text,
            };
            execute(&args, name, &spec, body)
        }
    };
    emit(&result);
    std::process::exit(code)
}

/// The arguments file's JSON object, split into Ansible's `_ansible_*` keys and the user's options.
type SplitArgs = (Map<String, Value>, Map<String, Value>);

fn split_args(args_text: &str) -> Result<SplitArgs, String> {
    let raw = match serde_json::from_str::<Value>(args_text) {
        Ok(Value::Object(m)) => m,
        Ok(other) => {
            return Err(format!(
                "the arguments file must hold a JSON object, not {}",
                crate::coerce::type_name(&other)
            ))
        }
        Err(e) => return Err(format!("the arguments file is not valid JSON: {e}")),
    };
    Ok(raw
        .into_iter()
        .partition(|(k, _)| k.starts_with("_ansible_")))
}

/// The testable core of [`run`]: args text in, masked result and exit code out.
pub fn execute<F>(args_text: &str, default_name: &str, spec: &ArgSpec, body: F) -> (Value, i32)
where
    F: FnOnce(&mut Module) -> Result<Outcome, Failure>,
{
    let (internal, user) = match split_args(args_text) {
        Ok(parts) => parts,
        Err(msg) => return finish(json!({"failed": true, "changed": false, "msg": msg}), &[]),
    };
    let flag = |k: &str| {
        internal
            .get(k)
            .map(|v| crate::coerce::to_bool(v).unwrap_or(false))
            .unwrap_or(false)
    };
    let module_name = internal
        .get("_ansible_module_name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| default_name.to_string());
    // ≤ 2.20 cores always expected `invocation`; 2.21 asks for it explicitly.
    let inject_invocation = internal
        .get("_ansible_inject_invocation")
        .map(|_| flag("_ansible_inject_invocation"))
        .unwrap_or(true);
    let tracebacks = internal
        .get("_ansible_tracebacks_for")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x == "error" || x == "always"));

    // The secrets of the input are known before anything can fail or panic on it.
    remember(crate::validate::no_log_values(&user, spec));
    let v = validate(
        &user,
        spec,
        &module_name,
        flag("_ansible_ignore_unknown_opts"),
    );
    remember(v.no_log_values.clone());
    let invocation = inject_invocation.then(|| {
        let args = if v.errors.is_empty() {
            &v.params
        } else {
            &user
        };
        json!({"module_args": mask_options(args, spec)})
    });

    let mut result = Map::new();
    if !v.errors.is_empty() {
        result.insert("failed".into(), json!(true));
        result.insert("changed".into(), json!(false));
        result.insert("msg".into(), json!(v.errors.join("; ")));
        result.insert("errors".into(), json!(v.errors));
        if !v.warnings.is_empty() {
            result.insert("warnings".into(), json!(v.warnings));
        }
        if let Some(inv) = invocation {
            result.insert("invocation".into(), inv);
        }
        return finish(Value::Object(result), &current_secrets());
    }

    let mut module = Module {
        params: v.params,
        check_mode: flag("_ansible_check_mode"),
        diff_mode: flag("_ansible_diff"),
        no_log: flag("_ansible_no_log"),
        verbosity: internal
            .get("_ansible_verbosity")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        module_name,
        from_env: v.from_env,
        keep_remote_files: flag("_ansible_keep_remote_files"),
        tmpdir: internal
            .get("_ansible_tmpdir")
            .and_then(Value::as_str)
            .map(PathBuf::from),
        warnings: v.warnings,
        deprecations: Vec::new(),
        diffs: Vec::new(),
    };

    match body(&mut module) {
        Ok(outcome) => {
            result.insert("changed".into(), json!(outcome.changed));
            if let Some(m) = outcome.msg {
                result.insert("msg".into(), json!(m));
            }
            result.extend(outcome.data);
        }
        Err(failure) => {
            result.insert("failed".into(), json!(true));
            result.insert("changed".into(), json!(failure.changed));
            result.insert("msg".into(), json!(&failure.msg));
            result.extend(failure.data);
            if tracebacks && !result.contains_key("exception") {
                result.insert(
                    "exception".into(),
                    json!(format!("{} failed: {}", module.module_name, failure.msg)),
                );
            }
        }
    }
    if !module.diffs.is_empty() {
        let diff = if module.diffs.len() == 1 {
            module.diffs.remove(0)
        } else {
            Value::Array(module.diffs)
        };
        result.insert("diff".into(), diff);
    }
    if !module.warnings.is_empty() {
        result.insert("warnings".into(), json!(module.warnings));
    }
    if !module.deprecations.is_empty() {
        result.insert("deprecations".into(), json!(module.deprecations));
    }
    if let Some(inv) = invocation {
        result.insert("invocation".into(), inv);
    }
    finish(Value::Object(result), &current_secrets())
}

/// Mask secrets, drop keys the controller reserves, and pick the exit code.
fn finish(mut result: Value, secrets: &[String]) -> (Value, i32) {
    if let Value::Object(m) = &mut result {
        m.retain(|k, _| !k.starts_with("_ansible_"));
    }
    mask_result(&mut result, secrets);
    let failed = result
        .get("failed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (result, if failed { 1 } else { 0 })
}

fn emit(result: &Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{result}");
    let _ = out.flush();
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        emit(&panic_result(&payload, &location));
        std::process::exit(1);
    }));
}

/// What the panic hook prints: a failure naming the panic, masked like every other result.
fn panic_result(payload: &str, location: &str) -> Value {
    let result = json!({
        "failed": true,
        "changed": false,
        "msg": format!("internal error in the module (a bug; please report it): {payload}"),
        "exception": format!("panic at {location}: {payload}"),
    });
    finish(result, &current_secrets()).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Opt;

    fn spec() -> ArgSpec {
        ArgSpec::new(vec![
            Opt::str("name").required(),
            Opt::str("token").no_log(),
            Opt::int("count").default(1),
        ])
    }

    #[test]
    fn success_with_invocation_and_masking() {
        let args = r#"{"name": "vm1", "token": "tok-123", "_ansible_check_mode": true, "_ansible_diff": true,
                       "_ansible_future_key": 5}"#;
        let (r, code) = execute(args, "m", &spec(), |m| {
            assert!(m.check_mode && m.diff_mode);
            m.add_diff(json!("a"), json!("b"), "before", "after");
            m.warn("used tok-123 here");
            Ok(Outcome::new(true)
                .msg("hello tok-123")
                .with("token_echo", "tok-123"))
        });
        assert_eq!(code, 0);
        assert_eq!(r["changed"], json!(true));
        assert_eq!(r["msg"], json!("hello ********"));
        assert_eq!(
            r["token_echo"],
            json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
        );
        assert_eq!(r["warnings"][0], json!("used ******** here"));
        assert_eq!(
            r["invocation"]["module_args"]["token"],
            json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
        );
        assert_eq!(r["invocation"]["module_args"]["count"], json!(1));
        assert_eq!(r["diff"]["after"], json!("b"));
    }

    #[test]
    fn invocation_only_when_asked_on_new_cores() {
        let (r, _) = execute(
            r#"{"name":"a","_ansible_inject_invocation":false}"#,
            "m",
            &spec(),
            |_| Ok(Outcome::new(false)),
        );
        assert!(r.get("invocation").is_none());
        assert_eq!(r["changed"], json!(false));
    }

    #[test]
    fn bad_json_and_bad_shape() {
        let (r, code) = execute("not json", "m", &spec(), |_| unreachable!());
        assert_eq!(code, 1);
        assert!(r["msg"].as_str().unwrap().contains("not valid JSON"));
        let (r, _) = execute("[1]", "m", &spec(), |_| unreachable!());
        assert!(r["msg"].as_str().unwrap().contains("JSON object, not list"));
    }

    #[test]
    fn validation_errors_are_masked_and_listed() {
        let (r, code) = execute(
            r#"{"token": "tok-9", "count": "x tok-9"}"#,
            "m",
            &spec(),
            |_| unreachable!(),
        );
        assert_eq!(code, 1);
        let msg = r["msg"].as_str().unwrap();
        assert!(msg.contains("missing required arguments: name"), "{msg}");
        assert!(msg.contains("argument 'count'"), "{msg}");
        assert!(!r.to_string().contains("tok-9"), "{r}");
    }

    /// A server (or a proxy) that echoes the request: the no_log value comes back JSON-escaped,
    /// form-encoded or in a Basic header inside the quoted body, and is hidden there too (#43).
    #[test]
    fn a_quoted_body_echoing_a_secret_in_any_encoding_is_masked() {
        use base64::Engine;
        let secret = "tok\"9/&x y";
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("admin:{secret}"));
        let echo = format!(
            "HTTP 400: {} | password=tok%229%2F%26x+y | Authorization: Basic {basic}",
            serde_json::to_string(&json!({"token": secret})).unwrap()
        );
        let args = json!({"name": "a", "token": secret}).to_string();
        let (r, code) = execute(&args, "m", &spec(), |_| Err(Failure::new(echo.clone())));
        assert_eq!(code, 1);
        let text = r.to_string();
        for leaked in [r#"tok\"9/&x y"#, "tok%229%2F%26x+y", &basic[8..]] {
            assert!(!text.contains(leaked), "{leaked} in {text}");
        }
        assert!(r["msg"].as_str().unwrap().starts_with("HTTP 400: "), "{r}");
    }

    #[test]
    fn failure_keeps_changed_and_data() {
        let (r, code) = execute(
            r#"{"name":"a","_ansible_tracebacks_for":["error"]}"#,
            "m",
            &spec(),
            |_| {
                Err(Failure::new("task failed")
                    .changed(true)
                    .with("task_log", json!(["line"])))
            },
        );
        assert_eq!(code, 1);
        assert_eq!(r["failed"], json!(true));
        assert_eq!(r["changed"], json!(true));
        assert_eq!(r["task_log"], json!(["line"]));
        assert!(r["exception"].is_string());
    }

    #[test]
    fn runtime_secrets_are_masked() {
        let (r, _) = execute(r#"{"name":"a"}"#, "m", &spec(), |m| {
            m.add_secret("PVEAuthCookie=abc");
            Ok(Outcome::new(false).with("cookie", "PVEAuthCookie=abc"))
        });
        assert_eq!(r["cookie"], json!("VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"));
    }

    /// A spec with secrets at every depth: an aliased top-level token, a list of dicts with a no_log
    /// sub-option, a free dict with a no_log key.
    fn secret_spec() -> ArgSpec {
        use crate::spec::Type;
        ArgSpec::new(vec![
            Opt::str("name").required(),
            Opt::str("token").no_log().aliases(&["api_token"]),
            Opt::int("count").default(1),
            Opt::list("users", Type::Dict).options(ArgSpec::new(vec![
                Opt::str("user").required(),
                Opt::str("password").no_log(),
            ])),
            Opt::dict("extra_config").no_log_keys(&["cipassword"]),
        ])
    }

    fn assert_clean(r: &Value, secrets: &[&str]) {
        let text = r.to_string();
        for s in secrets {
            assert!(!text.contains(s), "{s} shown in {text}");
        }
    }

    #[test]
    fn every_secret_is_masked_when_option_checking_fails() {
        // `users` is not a list of dicts (the parent fails to convert, its sub-options are never
        // validated), `count` is not an int, `name` is missing: each a failure before the body.
        let args = r#"{"api_token": "alias-tok-1", "count": "x",
                       "users": [{"user": "u", "password": "nested-pw-1"}, 5],
                       "extra_config": {"cipassword": "ci-pw-1", "tablet": 0}}"#;
        let (r, code) = execute(args, "m", &secret_spec(), |_| unreachable!());
        assert_eq!(code, 1);
        assert_clean(&r, &["alias-tok-1", "nested-pw-1", "ci-pw-1"]);
        let shown = &r["invocation"]["module_args"];
        assert_eq!(shown["api_token"], json!(crate::mask::MASK_WHOLE));
        assert_eq!(
            shown["users"][0]["password"],
            json!(crate::mask::MASK_WHOLE)
        );
        assert_eq!(
            shown["extra_config"]["cipassword"],
            json!(crate::mask::MASK_WHOLE)
        );
        assert_eq!(shown["extra_config"]["tablet"], json!(0));
    }

    #[test]
    fn a_parent_given_as_a_string_still_hides_its_secrets() {
        let args =
            r#"{"name": "a", "users": "not-a-list", "extra_config": "cipassword=ci-pw-str,x=1"}"#;
        let (r, _) = execute(args, "m", &secret_spec(), |m| {
            Err(Failure::new(format!(
                "echo {}",
                Value::Object(m.params.clone())
            )))
        });
        assert_clean(&r, &["ci-pw-str"]);
    }

    #[test]
    fn every_secret_is_masked_when_connecting_fails() {
        let args = r#"{"name": "a", "token": "conn-tok-1",
                       "users": [{"user": "u", "password": "conn-pw-1"}],
                       "extra_config": {"cipassword": "conn-ci-1"}}"#;
        let (r, code) = execute(args, "m", &secret_spec(), |m| {
            let echoed = Value::Object(m.params.clone());
            Err(Failure::new(format!("cannot connect with {echoed}"))
                .with("response", json!({"conn-tok-1": echoed, "n": 77}))
                .with("headers", json!({"authorization": "Bearer conn-tok-1"})))
        });
        assert_eq!(code, 1);
        assert_clean(&r, &["conn-tok-1", "conn-pw-1", "conn-ci-1"]);
        assert_eq!(r["response"]["n"], json!(77));
    }

    #[test]
    fn every_secret_is_masked_on_success() {
        let args =
            r#"{"name": "a", "token": "ok-tok-1", "extra_config": {"cipassword": "ok-ci-1"}}"#;
        let (r, code) = execute(args, "m", &secret_spec(), |m| {
            Ok(Outcome::new(false).with("echo", Value::Object(m.params.clone())))
        });
        assert_eq!(code, 0);
        assert_clean(&r, &["ok-tok-1", "ok-ci-1"]);
    }

    #[test]
    fn a_panic_after_the_input_was_read_is_masked() {
        let _ = execute(
            r#"{"name": "a", "token": "panic-tok-1"}"#,
            "m",
            &secret_spec(),
            |_| Ok(Outcome::new(false)),
        );
        let r = panic_result("index out of range in panic-tok-1", "src/x.rs:1");
        assert_eq!(r["failed"], json!(true));
        assert_clean(&r, &["panic-tok-1"]);
    }

    #[test]
    fn reserved_keys_are_dropped() {
        let (r, _) = execute(r#"{"name":"a"}"#, "m", &spec(), |_| {
            Ok(Outcome::new(false).with("_ansible_no_log", true))
        });
        assert!(r.get("_ansible_no_log").is_none());
    }
}
