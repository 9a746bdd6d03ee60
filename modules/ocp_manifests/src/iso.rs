//! The agent ISO: run `openshift-install agent create image` on a fresh copy of the rendered files
//! and report the ISO and auth file paths; skip while an existing ISO is newer than its inputs and
//! younger than its certificates' 24 h.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

/// The directory under `output_dir` holding the last successful build.
pub const BUILD_DIR: &str = "agent";

pub struct Artifacts {
    pub dir: PathBuf,
    pub iso: PathBuf,
    pub kubeconfig: PathBuf,
    pub kubeadmin_password: PathBuf,
}

impl Artifacts {
    pub fn in_dir(dir: &Path) -> Artifacts {
        Artifacts {
            dir: dir.to_path_buf(),
            iso: dir.join("agent.x86_64.iso"),
            kubeconfig: dir.join("auth/kubeconfig"),
            kubeadmin_password: dir.join("auth/kubeadmin-password"),
        }
    }
    pub fn to_json(&self) -> Value {
        json!({"iso_path": self.iso, "kubeconfig_path": self.kubeconfig,
               "kubeadmin_password_path": self.kubeadmin_password, "iso_dir": self.dir})
    }
}

/// A path (contains `/`) or a name looked up on PATH.
pub fn resolve_binary(name: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(format!(
                "openshift_install: {name} is not an executable file"
            ))
        };
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| executable(p))
        })
        .ok_or_else(|| format!("openshift_install: '{name}' was not found on PATH"))
}

/// Why an existing build can be reused, or why not (`Err(reason)`).
pub fn reusable(
    a: &Artifacts,
    inputs: &[PathBuf],
    max_age: Duration,
    now: SystemTime,
) -> Result<String, String> {
    let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    for p in [&a.iso, &a.kubeconfig, &a.kubeadmin_password] {
        if mtime(p).is_none() {
            return Err(format!("{} does not exist", p.display()));
        }
    }
    let iso_time = mtime(&a.iso).unwrap_or(SystemTime::UNIX_EPOCH);
    for input in inputs {
        if mtime(input).is_none_or(|t| t > iso_time) {
            return Err(format!("{} is newer than the ISO", input.display()));
        }
    }
    let age = now.duration_since(iso_time).unwrap_or_default();
    if age >= max_age {
        return Err(format!(
            "the ISO is {} h old; its certificates are short-lived",
            age.as_secs() / 3600
        ));
    }
    Ok(format!(
        "the ISO is newer than its inputs and {} min old",
        age.as_secs() / 60
    ))
}

pub struct BuildError {
    pub msg: String,
    pub log_tail: Vec<String>,
    pub work_dir: PathBuf,
}

fn tail(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// Copy the inputs into a fresh work dir, run the installer there, and on success move the result
/// to `output_dir/agent` (the previous build stays in place until then).
pub fn build(bin: &Path, output_dir: &Path, inputs: &[PathBuf]) -> Result<Artifacts, BuildError> {
    let work = output_dir.join(format!(".agent-build-{}", std::process::id()));
    let fail = |msg: String, log_tail: Vec<String>| BuildError {
        msg,
        log_tail,
        work_dir: work.clone(),
    };
    // Work dirs of earlier failed builds were kept for inspection; a new build replaces them.
    for entry in fs::read_dir(output_dir).into_iter().flatten().flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(".agent-build-")
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    fs::create_dir_all(&work)
        .map_err(|e| fail(format!("cannot create {}: {e}", work.display()), vec![]))?;
    for input in inputs {
        let name = input.file_name().unwrap_or_default();
        let data = fs::read(input)
            .map_err(|e| fail(format!("cannot read {}: {e}", input.display()), vec![]))?;
        crate::files::write_atomic(&work.join(name), &data).map_err(|e| fail(e, vec![]))?;
    }
    let out = Command::new(bin)
        .args(["agent", "create", "image", "--dir"])
        .arg(&work)
        .output()
        .map_err(|e| fail(format!("cannot run {}: {e}", bin.display()), vec![]))?;
    let log = fs::read_to_string(work.join(".openshift_install.log")).unwrap_or_default();
    if !out.status.success() {
        let mut lines = tail(&log, 25);
        if lines.is_empty() {
            lines = tail(&String::from_utf8_lossy(&out.stderr), 25);
        }
        let last = lines
            .iter()
            .rev()
            .find(|l| l.contains("level=fatal") || l.contains("level=error"))
            .or(lines.last())
            .cloned()
            .unwrap_or_default();
        return Err(fail(
            format!(
                "openshift-install agent create image failed ({}): {last}",
                out.status
            ),
            lines,
        ));
    }
    let built = Artifacts::in_dir(&work);
    for p in [&built.iso, &built.kubeconfig, &built.kubeadmin_password] {
        if !p.is_file() {
            return Err(fail(
                format!(
                    "openshift-install succeeded but did not write {}",
                    p.display()
                ),
                tail(&log, 25),
            ));
        }
    }
    let dest = output_dir.join(BUILD_DIR);
    let _ = fs::remove_dir_all(&dest);
    fs::rename(&work, &dest).map_err(|e| {
        fail(
            format!("cannot move {} to {}: {e}", work.display(), dest.display()),
            vec![],
        )
    })?;
    Ok(Artifacts::in_dir(&dest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_rules() {
        let d = std::env::temp_dir().join(format!("ocp-iso-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("agent/auth")).unwrap();
        let input = d.join("install-config.yaml");
        fs::write(&input, "x").unwrap();
        let a = Artifacts::in_dir(&d.join("agent"));
        let day = Duration::from_secs(86_400);
        assert!(
            reusable(&a, std::slice::from_ref(&input), day, SystemTime::now())
                .unwrap_err()
                .contains("does not exist")
        );
        // Explicit mtimes, so the test does not depend on the file system's timestamp granularity.
        let set_mtime = |p: &Path, t: SystemTime| {
            fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        let now = SystemTime::now();
        set_mtime(&input, now - Duration::from_secs(60));
        for p in [&a.iso, &a.kubeconfig, &a.kubeadmin_password] {
            fs::write(p, "x").unwrap();
            set_mtime(p, now - Duration::from_secs(30));
        }
        assert!(reusable(&a, std::slice::from_ref(&input), day, SystemTime::now()).is_ok());
        assert!(reusable(
            &a,
            std::slice::from_ref(&input),
            day,
            SystemTime::now() + day
        )
        .unwrap_err()
        .contains("24 h old"));
        set_mtime(&input, now);
        assert!(reusable(&a, &[input], day, SystemTime::now())
            .unwrap_err()
            .contains("newer than the ISO"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn binary_resolution() {
        assert!(resolve_binary("/nonexistent/openshift-install").is_err());
        assert!(resolve_binary("surely-not-a-command-xyz")
            .unwrap_err()
            .contains("not found on PATH"));
        assert_eq!(resolve_binary("sh").unwrap().file_name().unwrap(), "sh");
    }
}
