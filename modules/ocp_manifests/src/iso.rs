//! The agent ISO: run `openshift-install agent create image` on a fresh copy of the rendered files
//! and report the ISO, its sha256, the cluster ID and the auth file paths; skip while an existing
//! ISO is newer than its inputs and younger than its certificates' 24 h. A build folder that is
//! replaced (or a failed one) is archived, never deleted: it holds the only copy of that build's
//! admin credentials.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::files::{self, FileError};

/// The directory under `output_dir` holding the last successful build.
pub const BUILD_DIR: &str = "agent";
/// The installer's asset state in a build folder (what `agent wait-for` loads).
pub const STATE_FILE: &str = ".openshift_install_state.json";
const WORK_PREFIX: &str = ".agent-build-";

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
    /// Paths, plus the facts a build folder holds: the ISO's sha256 (when the ISO is there) and
    /// the cluster ID the installer generated (from its state file).
    pub fn to_json(&self) -> Value {
        let iso_here = self.iso.is_file();
        json!({"iso_path": if iso_here { json!(self.iso) } else { Value::Null },
               "kubeconfig_path": self.kubeconfig,
               "kubeadmin_password_path": self.kubeadmin_password, "iso_dir": self.dir,
               "install_state_path": self.dir.join(STATE_FILE),
               "iso_sha256": if iso_here { sha256_file(&self.iso).ok() } else { None },
               "cluster_id": cluster_id(&self.dir)})
    }
}

/// Why the installer binary cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    #[error("openshift_install: {} is not an executable file", .0.display())]
    NotExecutable(PathBuf),
    #[error("openshift_install: '{0}' was not found on PATH")]
    NotOnPath(String),
}

/// A path (contains `/`) or a name looked up on PATH.
pub fn resolve_binary(name: &str) -> Result<PathBuf, BinaryError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(BinaryError::NotExecutable(p))
        };
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| executable(p))
        })
        .ok_or_else(|| BinaryError::NotOnPath(name.to_string()))
}

/// The `oc` an installer runs (it extracts the base ISO from the release payload with it,
/// pkg/asset/agent/image/oc.go): `oc-<version>` beside an `openshift-install-<version>` (the
/// installer cache's names), else `oc` on PATH.
pub fn oc_for(installer: &Path) -> Option<PathBuf> {
    let name = installer.file_name()?.to_str()?;
    name.strip_prefix("openshift-install-")
        .and_then(|v| {
            resolve_binary(
                &installer
                    .with_file_name(format!("oc-{v}"))
                    .display()
                    .to_string(),
            )
            .ok()
        })
        .or_else(|| resolve_binary("oc").ok())
}

/// Why an existing build cannot be reused (the reason a new ISO is built).
#[derive(Debug, thiserror::Error)]
pub enum Stale {
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("{} is newer than the ISO", .0.display())]
    NewerInput(PathBuf),
    #[error("the ISO is {hours} h old; its certificates are short-lived")]
    TooOld { hours: u64 },
    #[error("the manifests changed")]
    ManifestsChanged,
}

/// Why an existing build can be reused, or why not.
pub fn reusable(
    a: &Artifacts,
    inputs: &[PathBuf],
    max_age: Duration,
    now: SystemTime,
) -> Result<String, Stale> {
    let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    for p in [&a.iso, &a.kubeconfig, &a.kubeadmin_password] {
        if mtime(p).is_none() {
            return Err(Stale::Missing(p.clone()));
        }
    }
    let iso_time = mtime(&a.iso).unwrap_or(SystemTime::UNIX_EPOCH);
    for input in inputs {
        if mtime(input).is_none_or(|t| t > iso_time) {
            return Err(Stale::NewerInput(input.clone()));
        }
    }
    let age = now.duration_since(iso_time).unwrap_or_default();
    if age >= max_age {
        return Err(Stale::TooOld {
            hours: age.as_secs() / 3600,
        });
    }
    Ok(format!(
        "the ISO is newer than its inputs and {} min old",
        age.as_secs() / 60
    ))
}

/// Hex sha256 of a file, read in chunks (ISOs are ~1 GB).
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The cluster ID the installer generated for this build (`*installconfig.ClusterID`.`UUID` in its
/// state file); it becomes ClusterVersion `spec.clusterID` of the installed cluster.
pub fn cluster_id(build_dir: &Path) -> Option<String> {
    let text = fs::read_to_string(build_dir.join(STATE_FILE)).ok()?;
    let state: Value = serde_json::from_str(&text).ok()?;
    state["*installconfig.ClusterID"]["UUID"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// What went wrong in one ISO build.
#[derive(Debug, thiserror::Error)]
pub enum BuildErrorKind {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run {}: {source}", bin.display())]
    Spawn {
        bin: PathBuf,
        source: std::io::Error,
    },
    #[error("openshift-install agent create image failed ({status}): {last_line}")]
    Installer {
        status: ExitStatus,
        last_line: String,
    },
    #[error("openshift-install succeeded but did not write {}", .0.display())]
    MissingOutput(PathBuf),
}

/// A failed build: the cause, the installer's log tail and the (kept) work folder.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct BuildError {
    #[source]
    pub kind: BuildErrorKind,
    pub log_tail: Vec<String>,
    pub work_dir: PathBuf,
}

/// A successful build: the artifacts, and where the build folder it replaced went.
pub struct Built {
    pub artifacts: Artifacts,
    pub archived: Vec<PathBuf>,
}

fn tail(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// The lock beside a build's work folder (`.agent-build-<pid>.lock`): held by the build while it runs.
fn lock_path(work: &Path) -> PathBuf {
    let mut name = work.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    work.with_file_name(name)
}

/// A running build's lock: taken before its work folder exists, so a folder whose lock is missing or free
/// belongs to no running build. Dropped (unlocked and removed) when the build returns, whatever happened.
struct BuildLock {
    path: PathBuf,
    _file: fs::File,
}

impl BuildLock {
    fn take(work: &Path) -> std::io::Result<BuildLock> {
        let path = lock_path(work);
        let file = fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        file.lock()?;
        Ok(BuildLock { path, _file: file })
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Whether another process holds the lock of the work folder `dir` (a build under way there).
fn in_use(dir: &Path) -> bool {
    let Ok(file) = fs::File::options().write(true).open(lock_path(dir)) else {
        return false; // no lock: a failed build of an earlier run (or of a release before the lock)
    };
    match file.try_lock() {
        Ok(()) => false,
        Err(fs::TryLockError::WouldBlock) => true,
        // The lock cannot be judged: leave the folder where it is.
        Err(fs::TryLockError::Error(_)) => true,
    }
}

/// Work folders of earlier failed builds were kept for inspection; a new build archives them. A folder
/// whose lock another process holds is another run's build under way (`agent create image` of the same
/// cluster from a second run on this machine): it is left alone.
fn archive_failed_builds(output_dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let mut archived = Vec::new();
    for entry in fs::read_dir(output_dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(WORK_PREFIX) || !path.is_dir() || in_use(&path) {
            continue;
        }
        archived.push(files::archive(output_dir, &path, "failed-build")?);
        let _ = fs::remove_file(lock_path(&path));
    }
    Ok(archived)
}

/// The installer runs `oc` by name: a cache's `oc-<version>` is linked as `oc` in `dir`, and the
/// PATH with `dir` first is returned (None: PATH as it is).
fn oc_shim(bin: &Path, dir: &Path) -> Option<std::ffi::OsString> {
    let oc = oc_for(bin).filter(|p| p.file_name() != Some("oc".as_ref()))?;
    let oc = fs::canonicalize(oc).ok()?;
    fs::create_dir_all(dir).ok()?;
    std::os::unix::fs::symlink(oc, dir.join("oc")).ok()?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path)))
        .ok()
}

/// Run the installer in `work`; on failure the error names its last fatal line and keeps the log.
fn create_image(bin: &Path, work: &Path) -> Result<(), (BuildErrorKind, Vec<String>)> {
    // The allow-listed environment (ansible_module::child): the install-config carries what it needs.
    let mut cmd = ansible_module::child::command(bin);
    let oc_dir = work.join(".proxshift-oc");
    if let Some(path) = oc_shim(bin, &oc_dir) {
        cmd.env("PATH", path);
    }
    // `--dir=<work>`: one argument, never taken for a flag of its own (the command has no positionals).
    let mut dir_flag = std::ffi::OsString::from("--dir=");
    dir_flag.push(work);
    let out = cmd
        .args(["agent", "create", "image"])
        .arg(dir_flag)
        .output();
    let _ = fs::remove_dir_all(&oc_dir);
    let out = out.map_err(|source| {
        let bin = bin.to_path_buf();
        (BuildErrorKind::Spawn { bin, source }, vec![])
    })?;
    let log = fs::read_to_string(work.join(".openshift_install.log")).unwrap_or_default();
    if !out.status.success() {
        let mut lines = tail(&log, 25);
        if lines.is_empty() {
            lines = tail(&String::from_utf8_lossy(&out.stderr), 25);
        }
        let last_line = lines
            .iter()
            .rev()
            .find(|l| l.contains("level=fatal") || l.contains("level=error"))
            .or(lines.last())
            .cloned()
            .unwrap_or_default();
        let status = out.status;
        return Err((BuildErrorKind::Installer { status, last_line }, lines));
    }
    let built = Artifacts::in_dir(work);
    for p in [&built.iso, &built.kubeconfig, &built.kubeadmin_password] {
        if !p.is_file() {
            return Err((BuildErrorKind::MissingOutput(p.clone()), tail(&log, 25)));
        }
    }
    Ok(())
}

/// Copy the inputs into a fresh work dir, run the installer there, and on success move the result
/// to `output_dir/agent`; the previous build stays in place until then and is archived, not deleted.
pub fn build(bin: &Path, output_dir: &Path, inputs: &[PathBuf]) -> Result<Built, BuildError> {
    let work = output_dir.join(format!("{WORK_PREFIX}{}", std::process::id()));
    let fail = |kind: BuildErrorKind, log_tail: Vec<String>| BuildError {
        kind,
        log_tail,
        work_dir: work.clone(),
    };
    let mut archived = archive_failed_builds(output_dir).map_err(|e| fail(e.into(), vec![]))?;
    let _lock = BuildLock::take(&work).map_err(|source| {
        let path = lock_path(&work);
        fail(BuildErrorKind::CreateDir { path, source }, vec![])
    })?;
    fs::create_dir_all(&work).map_err(|source| {
        let path = work.clone();
        fail(BuildErrorKind::CreateDir { path, source }, vec![])
    })?;
    for input in inputs {
        // Where the installer looks for it: its place under output_dir (openshift/NAME for an
        // extra manifest), else the top of the folder.
        let rel = input
            .strip_prefix(output_dir)
            .ok()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| input.file_name().unwrap_or_default().into());
        let data = fs::read(input).map_err(|source| {
            let path = input.clone();
            fail(FileError::Read { path, source }.into(), vec![])
        })?;
        let dest = work.join(&rel);
        if let Some(parent) = dest.parent().filter(|p| !p.is_dir()) {
            fs::create_dir_all(parent).map_err(|source| {
                let path = parent.to_path_buf();
                fail(BuildErrorKind::CreateDir { path, source }, vec![])
            })?;
        }
        files::write_atomic(&dest, &data).map_err(|e| fail(e.into(), vec![]))?;
    }
    create_image(bin, &work).map_err(|(kind, lines)| fail(kind, lines))?;
    let dest = output_dir.join(BUILD_DIR);
    if dest.exists() {
        archived.push(
            files::archive(output_dir, &dest, BUILD_DIR).map_err(|e| fail(e.into(), vec![]))?,
        );
    }
    fs::rename(&work, &dest).map_err(|source| {
        let to = dest.clone();
        let from = work.clone();
        fail(FileError::Archive { from, to, source }.into(), vec![])
    })?;
    Ok(Built {
        artifacts: Artifacts::in_dir(&dest),
        archived,
    })
}

#[cfg(test)]
mod build_lock_tests {
    use super::*;

    #[test]
    fn a_build_under_way_is_never_archived_by_another() {
        let out = std::env::temp_dir().join(format!("proxshift-buildlock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out).unwrap();
        let running = out.join(format!("{WORK_PREFIX}111"));
        let failed = out.join(format!("{WORK_PREFIX}222"));
        let legacy = out.join(format!("{WORK_PREFIX}333"));
        // Another run's build: its lock is held (by an open file description of its own).
        let lock = BuildLock::take(&running).unwrap();
        fs::create_dir_all(&running).unwrap();
        // A build that failed: its lock file is there but nobody holds it.
        fs::create_dir_all(&failed).unwrap();
        fs::write(lock_path(&failed), "").unwrap();
        fs::create_dir_all(&legacy).unwrap();
        let archived = archive_failed_builds(&out).unwrap();
        assert_eq!(archived.len(), 2, "{archived:?}");
        assert!(running.is_dir() && lock_path(&running).is_file());
        assert!(!failed.exists() && !lock_path(&failed).exists() && !legacy.exists());
        drop(lock);
        assert!(
            !lock_path(&running).exists(),
            "the lock goes with its build"
        );
        assert_eq!(archive_failed_builds(&out).unwrap().len(), 1);
        fs::remove_dir_all(&out).unwrap();
    }
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
        assert!(matches!(
            reusable(&a, std::slice::from_ref(&input), day, SystemTime::now()),
            Err(Stale::Missing(_))
        ));
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
        assert!(matches!(
            reusable(&a, std::slice::from_ref(&input), day, now + day),
            Err(Stale::TooOld { hours: 24 })
        ));
        set_mtime(&input, now);
        assert!(matches!(
            reusable(&a, &[input], day, SystemTime::now()),
            Err(Stale::NewerInput(_))
        ));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn binary_resolution() {
        assert!(matches!(
            resolve_binary("/nonexistent/openshift-install"),
            Err(BinaryError::NotExecutable(_))
        ));
        assert!(matches!(
            resolve_binary("surely-not-a-command-xyz"),
            Err(BinaryError::NotOnPath(_))
        ));
        assert_eq!(resolve_binary("sh").unwrap().file_name().unwrap(), "sh");
    }

    #[test]
    fn facts_of_a_build_folder() {
        let d = std::env::temp_dir().join(format!("ocp-iso-facts-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        assert_eq!(cluster_id(&d), None);
        fs::write(
            d.join(STATE_FILE),
            r#"{"*installconfig.ClusterID": {"UUID": "6c1f-x", "InfraID": "c-abcde"}}"#,
        )
        .unwrap();
        assert_eq!(cluster_id(&d).as_deref(), Some("6c1f-x"));
        fs::write(d.join("agent.x86_64.iso"), "abc").unwrap();
        let facts = Artifacts::in_dir(&d).to_json();
        assert_eq!(
            facts["iso_sha256"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        fs::remove_dir_all(&d).unwrap();
    }
}
