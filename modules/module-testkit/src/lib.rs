//! What every module crate's tests need, in one place: run a module body through the real protocol
//! layer (`ansible_module::execute`, exactly what the binary does minus the process), or run the built
//! binary the way ansible-core does (`NAME ARGS_FILE`); expect success or failure; check that no
//! secret shows in a result; and check a module's sidecar doc (or a plugin's DOCUMENTATION) against
//! its argument spec.
//!
//! A dev-dependency only: nothing here is linked into a module binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use ansible_module::{sidecar, ArgSpec, Failure, Module, Outcome};
use serde_json::{json, Value};

/// A module's body, as its `main.rs` hands it to `ansible_module::run`.
pub type Body = fn(&mut Module) -> Result<Outcome, Failure>;

/// One module under test: its name, argument spec and body, and the secrets no result may contain.
pub struct TestModule {
    name: &'static str,
    spec: ArgSpec,
    body: Body,
    secrets: Vec<String>,
}

impl TestModule {
    pub fn new(name: &'static str, spec: ArgSpec, body: Body) -> Self {
        TestModule {
            name,
            spec,
            body,
            secrets: Vec::new(),
        }
    }

    /// Every later run asserts that `secret` appears nowhere in the result (masking works).
    pub fn hiding(mut self, secret: impl Into<String>) -> Self {
        self.secrets.push(secret.into());
        self
    }

    /// Run with `args` as Ansible would, minus the process boundary: (result, exit code).
    pub fn run(&self, args: &Value) -> (Value, i32) {
        self.run_with(args, self.body)
    }

    /// The same with another body over this module's spec (a body wired to a test double).
    pub fn run_with<F>(&self, args: &Value, body: F) -> (Value, i32)
    where
        F: FnOnce(&mut Module) -> Result<Outcome, Failure>,
    {
        let (r, code) = ansible_module::execute(&args.to_string(), self.name, &self.spec, body);
        assert_eq!(
            code == 0,
            r.get("failed").is_none(),
            "exit code {code}: {r:#}"
        );
        self.assert_hidden(&r);
        (r, code)
    }

    /// Run and expect success; the result.
    pub fn ok(&self, args: &Value) -> Value {
        let (r, _) = self.run(args);
        expect_ok(&r);
        r
    }

    /// Run and expect failure; the result.
    pub fn failed(&self, args: &Value) -> Value {
        let (r, _) = self.run(args);
        expect_failed(&r);
        r
    }

    fn assert_hidden(&self, r: &Value) {
        let text = r.to_string();
        for s in &self.secrets {
            assert!(!text.contains(s.as_str()), "secret leaked: {r}");
        }
    }
}

/// Assert `r` is a success; `r` again, for chaining.
pub fn expect_ok(r: &Value) -> &Value {
    assert!(r.get("failed").is_none(), "unexpected failure: {r:#}");
    r
}

/// Assert `r` is a failure; its `msg`.
pub fn expect_failed(r: &Value) -> String {
    assert_eq!(r["failed"], json!(true), "expected a failure: {r:#}");
    r["msg"].as_str().unwrap_or_default().to_string()
}

/// Run a built module binary as ansible-core does (`BIN ARGS_FILE`) in a clean environment with
/// only `env` set (and `HOME`, a fresh folder): the one JSON result. Asserts that the output is one
/// JSON object and that the exit status agrees with `failed`.
pub fn run_binary(bin: &Path, args: &Value, env: &[(&str, &str)]) -> Value {
    let dir = scratch_dir();
    let file = dir.join("args.json");
    std::fs::write(&file, args.to_string()).expect("write the args file");
    let out = Command::new(bin)
        .arg(&file)
        .env_clear()
        .env("HOME", &dir)
        .envs(env.iter().copied())
        .output()
        .expect("run the module");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON result ({e}): {stdout}"));
    assert_eq!(
        out.status.success(),
        result.get("failed").is_none(),
        "{result}"
    );
    result
}

fn scratch_dir() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "module-testkit-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

/// The shipped collection `proxshift.NAME` in this repository.
fn collection(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../ansible_collections/proxshift")
        .join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The documentation stub `proxshift/COLLECTION/plugins/modules/MODULE.py` documents exactly `spec`.
pub fn assert_sidecar_matches(spec: &ArgSpec, collection_name: &str, module: &str) {
    let path = collection(collection_name).join(format!("plugins/modules/{module}.py"));
    // `proxshift.<collection>.<name>` is plugins/doc_fragments/<name>.py of that collection.
    let fragment = |name: &str| {
        let mut parts = name.splitn(3, '.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("proxshift"), Some(coll), Some(frag)) => std::fs::read_to_string(
                collection(coll).join(format!("plugins/doc_fragments/{frag}.py")),
            )
            .ok(),
            _ => None,
        }
    };
    let problems = sidecar::check_stub_with(spec, &read(&path), module, &fragment);
    assert!(
        problems.is_empty(),
        "sidecar drift:\n{}",
        problems.join("\n")
    );
}

/// The DOCUMENTATION of the controller-side plugin `proxshift/COLLECTION/plugins/FILE` (e.g.
/// `inventory/proxmox.py`) matches its backend's `spec`; see [`sidecar::check_plugin`].
pub fn assert_plugin_docs_match(
    spec: &ArgSpec,
    collection_name: &str,
    file: &str,
    name: &str,
    internal: &[&str],
    ansible_only: &[&str],
) {
    let path = collection(collection_name).join("plugins").join(file);
    let problems = sidecar::check_plugin(spec, &read(&path), name, internal, ansible_only);
    assert!(problems.is_empty(), "drift:\n{}", problems.join("\n"));
}
