//! The installer taken from the cluster's release image, when neither `openshift_installers` nor
//! `openshift_install_cache` has one of its version: `oc adm release extract
//! --command=openshift-install` into the cache, placed there as `openshift-install-<version>`, where the
//! next run finds it like any cached installer.
//!
//! The release image is `quay.io/openshift-release-dev/ocp-release:<x.y.z>-<arch>` for an exact
//! version, or the inventory's `ocp_release_image` (a mirror, a digest). A minor alone (`"4.19"`) names
//! no release, so nothing is extracted for it unless the image is given.
//!
//! Once per version: every cluster is its own `ansible-playbook` run (several may run at once, e.g. AWX
//! jobs sharing the cache), so a playbook's `run_once` or `serial` cannot order them; an exclusive
//! `flock` on `<cache>/.openshift-install-<version>.lock` does. The run that gets the lock second finds
//! the installer the first one placed and extracts nothing. The lock is released when the process ends,
//! however it ends, so a killed run never leaves the version locked.
//!
//! The registry credentials are the pull secret, written for `oc` alone: a file of mode 0600 in the
//! module's private temporary folder, removed as soon as `oc` returns (also when it fails).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::installer::{self, InstallerError};
use crate::plan::parse_version;

/// Where OpenShift's release images are published.
pub const RELEASE_REPOSITORY: &str = "quay.io/openshift-release-dev/ocp-release";

/// Why the installer cannot be extracted from a release image (said in the preflight's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error(
        "ocp_version {0} is a minor and a release image is one exact release: \
         give an exact ocp_version (e.g. {0}.0) or ocp_release_image"
    )]
    MinorOnly(String),
    #[error("'{0}' is not a release version like 4.19.7")]
    NotAVersion(String),
    #[error("no release images are published for architecture {0}")]
    Architecture(String),
    #[error("oc_binary: {0}")]
    NoOc(String),
    #[error("no openshift_install_cache to put it in")]
    NoCache,
    #[error("no pull secret to authenticate to the registry with")]
    NoPullSecret,
    /// The cache cannot take the extracted installer (a read-only folder of an execution
    /// environment): found before anything is extracted, so the preflight names it.
    #[error(
        "openshift_install_cache {path} is not writable ({reason}): give a writable folder (in an execution \
         environment, PROXSHIFT_INSTALLER_CACHE on a writable volume) or put the installer of the cluster's \
         version there"
    )]
    CacheNotWritable { path: String, reason: String },
}

/// Why an extraction failed.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run {}: {source}", .oc.display())]
    Spawn { oc: PathBuf, source: std::io::Error },
    #[error(
        "oc adm release extract --command=openshift-install {image} failed ({status}): {stderr}"
    )]
    Failed {
        image: String,
        status: ExitStatus,
        stderr: String,
    },
    #[error("oc adm release extract --command=openshift-install {image} left no executable openshift-install")]
    NoBinary { image: String },
}

/// Everything an extraction needs, all there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extraction {
    /// The cluster's version as the inventory gives it (the cache file's suffix).
    pub version: String,
    pub image: String,
    pub oc: PathBuf,
    pub cache: PathBuf,
}

impl Extraction {
    /// Where the installer goes: where [`installer::select`] looks for it first.
    pub fn dest(&self) -> PathBuf {
        self.cache
            .join(format!("{}{}", installer::CACHE_PREFIX, self.version))
    }
    fn lock_path(&self) -> PathBuf {
        self.cache
            .join(format!(".{}{}.lock", installer::CACHE_PREFIX, self.version))
    }
}

/// The release tag's architecture suffix for an install-config architecture (`amd64` → `x86_64`).
pub fn tag_arch(arch: &str) -> Option<&'static str> {
    match arch {
        "amd64" | "x86_64" => Some("x86_64"),
        "arm64" | "aarch64" => Some("aarch64"),
        "ppc64le" => Some("ppc64le"),
        "s390x" => Some("s390x"),
        _ => None,
    }
}

/// The release image of an exact `version` for `arch`: `<repository>:<version>-<arch>`.
pub fn release_image(version: &str, arch: &str) -> Result<String, Unavailable> {
    let v = version.trim();
    if parse_version(v).is_none()
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
    {
        return Err(Unavailable::NotAVersion(v.to_string()));
    }
    // 4.19 or 4.19-rc names no release; 4.19.7 and 4.19.0-rc.1 do.
    let release_part = v.split('-').next().unwrap_or(v);
    if release_part.split('.').count() < 3 {
        let minor = parse_version(v).map(|(a, b)| format!("{a}.{b}"));
        return Err(Unavailable::MinorOnly(
            minor.unwrap_or_else(|| v.to_string()),
        ));
    }
    let suffix = tag_arch(arch).ok_or_else(|| Unavailable::Architecture(arch.to_string()))?;
    Ok(format!("{RELEASE_REPOSITORY}:{v}-{suffix}"))
}

/// What the inventory gives for an extraction.
#[derive(Debug, Default)]
pub struct Inputs<'a> {
    pub version: &'a str,
    /// The cluster's architecture as install-config names it.
    pub arch: &'a str,
    /// `ocp_release_image`: used as given instead of the version's image.
    pub image: Option<&'a str>,
    /// `oc_binary`: a path, or a name found on PATH.
    pub oc: &'a str,
    pub cache: Option<&'a Path>,
    pub pull_secret: &'a str,
}

/// Whether the installer can be extracted, and from what; the first reason it cannot, else.
pub fn plan(i: &Inputs) -> Result<Extraction, Unavailable> {
    let image = match i.image.map(str::trim).filter(|s| !s.is_empty()) {
        Some(image) => image.to_string(),
        None => release_image(i.version, i.arch)?,
    };
    let cache = i.cache.ok_or(Unavailable::NoCache)?.to_path_buf();
    let oc = find_oc(i.oc, &cache, i.version)?;
    writable(&cache)?;
    if i.pull_secret.trim().is_empty() {
        return Err(Unavailable::NoPullSecret);
    }
    Ok(Extraction {
        version: i.version.trim().to_string(),
        image,
        oc,
        cache,
    })
}

/// Whether the extraction can write into `cache`: the folder, or the nearest existing folder it
/// would be created in, takes a new file (created and removed again; the permission bits alone do
/// not tell, a read-only mount or another owner does).
fn writable(cache: &Path) -> Result<(), Unavailable> {
    let refused = |reason: String| Unavailable::CacheNotWritable {
        path: cache.display().to_string(),
        reason,
    };
    let Some(existing) = cache.ancestors().find(|p| p.exists()) else {
        return Err(refused("no part of the path exists".into()));
    };
    if !existing.is_dir() {
        return Err(refused(format!("{} is not a folder", existing.display())));
    }
    let probe = existing.join(format!(".proxshift-write-check-{}", std::process::id()));
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            refused(format!(
                "cannot create a file in {}: {e}",
                existing.display()
            ))
        })?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// `oc_binary` (a path, or a name on PATH); for the default `oc` not on PATH, the cache's (see
/// [`cached_oc`]).
fn find_oc(name: &str, cache: &Path, version: &str) -> Result<PathBuf, Unavailable> {
    use crate::iso::{resolve_binary, BinaryError};
    match resolve_binary(name) {
        Ok(path) => Ok(path),
        Err(BinaryError::NotExecutable(p)) => Err(Unavailable::NoOc(format!(
            "{} is not an executable file",
            p.display()
        ))),
        Err(BinaryError::NotOnPath(n)) if n == "oc" => cached_oc(cache, version).ok_or_else(|| {
            Unavailable::NoOc(format!(
                "'oc' was not found on PATH nor as oc-<version> in {}",
                cache.display()
            ))
        }),
        Err(BinaryError::NotOnPath(n)) => {
            Err(Unavailable::NoOc(format!("'{n}' was not found on PATH")))
        }
    }
}

/// An `oc-<version>` of the cache, as `awx/ee/install-openshift-clients.sh` puts it there (the execution
/// environment has no other): the cluster's version's, its minor's, else the newest (any `oc` extracts
/// any release).
fn cached_oc(cache: &Path, version: &str) -> Option<PathBuf> {
    for key in installer::lookup_keys(version) {
        let p = cache.join(format!("oc-{key}"));
        if installer::executable(&p) {
            return Some(p);
        }
    }
    let newest = fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let v = parse_version(name.strip_prefix("oc-")?)?;
            installer::executable(&e.path()).then_some((v, e.path()))
        })
        .max();
    newest.map(|(_, p)| p)
}

/// The installer an extraction gave (or found placed by a concurrent run), its version checked.
#[derive(Debug)]
pub struct Extracted {
    pub path: PathBuf,
    pub version: String,
    /// False when another run had placed it while this one waited for the lock.
    pub fresh: bool,
}

/// The pull secret as `oc`'s registry config: mode 0600 from its creation, removed when dropped.
struct RegistryConfig(PathBuf);

impl RegistryConfig {
    fn write(dir: &Path, pull_secret: &str) -> Result<RegistryConfig, ExtractError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(format!(
            "ocp-manifests-registry-{}.json",
            std::process::id()
        ));
        let io = |source| ExtractError::Io {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(dir).map_err(io)?;
        // A leftover of a killed run of the same pid would make create_new fail.
        let _ = fs::remove_file(&path);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        let guard = RegistryConfig(path.clone());
        f.write_all(pull_secret.as_bytes()).map_err(io)?;
        Ok(guard)
    }
}

impl Drop for RegistryConfig {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Extract the installer of `x` into its cache (once: see the module doc) and check its version.
/// `tmp` is a private folder for the registry config.
pub fn extract(x: &Extraction, pull_secret: &str, tmp: &Path) -> Result<Extracted, InstallerError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InstallerError::from(ExtractError::Io { path, source })
    };
    fs::create_dir_all(&x.cache).map_err(io(&x.cache))?;
    let lock_path = x.lock_path();
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    // Waits while another run extracts this version; released when `lock` is dropped.
    lock.lock().map_err(io(&lock_path))?;
    let dest = x.dest();
    if installer::executable(&dest) {
        let version = installer::verify(&dest, &x.version)?;
        return Ok(Extracted {
            path: dest,
            version,
            fresh: false,
        });
    }
    let work = x
        .cache
        .join(format!(".extract-{}-{}", x.version, std::process::id()));
    let _ = fs::remove_dir_all(&work);
    {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&work)
            .map_err(io(&work))?;
    }
    let placed = run_oc(x, &work, pull_secret, tmp)
        .map_err(InstallerError::from)
        .and_then(|bin| {
            // Checked where it was extracted: a binary of another release never reaches the cache.
            let version = installer::verify(&bin, &x.version)?;
            fs::rename(&bin, &dest).map_err(io(&dest))?;
            Ok(version)
        });
    let _ = fs::remove_dir_all(&work);
    drop(lock);
    Ok(Extracted {
        path: dest,
        version: placed?,
        fresh: true,
    })
}

/// `oc adm release extract --command=openshift-install --to=<work> --registry-config=<f> -- <image>`:
/// after `--` (cobra/pflag end the flags there) an image reference can never be read as a flag.
fn run_oc(
    x: &Extraction,
    work: &Path,
    pull_secret: &str,
    tmp: &Path,
) -> Result<PathBuf, ExtractError> {
    let auth = RegistryConfig::write(tmp, pull_secret)?;
    // The environment is the allow-list's: the registry login goes only as the 0600 file.
    let out = ansible_module::child::command(&x.oc)
        .args(["adm", "release", "extract", "--command=openshift-install"])
        .arg(format!("--to={}", work.display()))
        .arg(format!("--registry-config={}", auth.0.display()))
        .arg("--")
        .arg(&x.image)
        .output();
    drop(auth);
    let out = out.map_err(|source| ExtractError::Spawn {
        oc: x.oc.clone(),
        source,
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(ExtractError::Failed {
            image: x.image.clone(),
            status: out.status,
            stderr: last.unwrap_or_default().trim().to_string(),
        });
    }
    let bin = work.join("openshift-install");
    if !installer::executable(&bin) {
        return Err(ExtractError::NoBinary {
            image: x.image.clone(),
        });
    }
    Ok(bin)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_release_image_of_an_exact_version_per_architecture() {
        let q = RELEASE_REPOSITORY;
        assert_eq!(
            release_image("4.19.7", "amd64").unwrap(),
            format!("{q}:4.19.7-x86_64")
        );
        assert_eq!(
            release_image(" 4.18.3", "arm64").unwrap(),
            format!("{q}:4.18.3-aarch64")
        );
        assert_eq!(
            release_image("4.20.0-rc.1", "amd64").unwrap(),
            format!("{q}:4.20.0-rc.1-x86_64")
        );
        assert_eq!(
            release_image("4.19", "amd64"),
            Err(Unavailable::MinorOnly("4.19".into()))
        );
        assert_eq!(
            release_image("4.19-rc", "amd64"),
            Err(Unavailable::MinorOnly("4.19".into()))
        );
        assert!(matches!(
            release_image("4.19.7 ; rm", "amd64"),
            Err(Unavailable::NotAVersion(_))
        ));
        assert_eq!(
            release_image("4.19.7", "mips"),
            Err(Unavailable::Architecture("mips".into()))
        );
        let msg = Unavailable::MinorOnly("4.19".into()).to_string();
        assert!(
            msg.contains("exact ocp_version") && msg.contains("ocp_release_image"),
            "{msg}"
        );
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ocp-release-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn script(p: &Path, body: &str) {
        fs::write(p, format!("#!/bin/sh\n{body}")).unwrap();
        fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn what_stops_an_extraction_is_named() {
        let d = temp("plan");
        let oc = d.join("oc");
        script(&oc, "exit 0\n");
        let oc_s = oc.display().to_string();
        let base = Inputs {
            version: "4.19.7",
            arch: "amd64",
            image: None,
            oc: &oc_s,
            cache: Some(&d),
            pull_secret: "{\"auths\":{}}",
        };
        let x = plan(&base).unwrap();
        assert_eq!(x.image, format!("{RELEASE_REPOSITORY}:4.19.7-x86_64"));
        assert_eq!(x.dest(), d.join("openshift-install-4.19.7"));
        // A given image is used as given, also for a minor.
        let mirror = "mirror.lab:5000/ocp/release@sha256:abc";
        let x = plan(&Inputs {
            version: "4.19",
            image: Some(mirror),
            ..base
        })
        .unwrap();
        assert_eq!(
            (x.image.as_str(), x.dest()),
            (mirror, d.join("openshift-install-4.19"))
        );
        let no = |i: Inputs| plan(&i).unwrap_err();
        assert!(matches!(
            no(Inputs {
                version: "4.19",
                ..base
            }),
            Unavailable::MinorOnly(_)
        ));
        assert_eq!(
            no(Inputs {
                cache: None,
                ..base
            }),
            Unavailable::NoCache
        );
        assert!(matches!(
            no(Inputs {
                oc: "surely-no-oc-here-xyz",
                ..base
            }),
            Unavailable::NoOc(m) if m.contains("surely-no-oc-here-xyz")
        ));
        assert_eq!(
            no(Inputs {
                pull_secret: " ",
                ..base
            }),
            Unavailable::NoPullSecret
        );
        // A cache that cannot take the installer is named before anything is extracted; one that
        // does not exist yet is fine when its parent takes files.
        let file = d.join("a-file");
        fs::write(&file, "").unwrap();
        let under_file = file.join("cache");
        assert!(matches!(
            no(Inputs {
                cache: Some(&under_file),
                ..base
            }),
            Unavailable::CacheNotWritable { reason, .. } if reason.contains("is not a folder")
        ));
        plan(&Inputs {
            cache: Some(&d.join("not-yet")),
            ..base
        })
        .unwrap();
        assert!(fs::read_dir(&d).unwrap().flatten().all(|e| !e
            .file_name()
            .to_string_lossy()
            .starts_with(".proxshift-write-check")));
        // The default oc not on PATH: the cache's oc-<version> (as the execution environment has it),
        // else its minor's, else the newest; another name is looked for on PATH only.
        let cached = |v: &str| {
            let p = d.join(format!("oc-{v}"));
            script(&p, "exit 0\n");
            p
        };
        assert_eq!(cached_oc(&d, "4.17.1"), None);
        let (old, newest) = (cached("4.16.3"), cached("4.18.2"));
        assert_eq!(cached_oc(&d, "4.17.1"), Some(newest));
        let minor = cached("4.16");
        assert_eq!(cached_oc(&d, "4.16.9"), Some(minor));
        assert_eq!(cached_oc(&d, "4.16.3"), Some(old));
        assert!(matches!(
            find_oc("oc-custom-xyz", &d, "4.16.3"),
            Err(Unavailable::NoOc(m)) if m == "'oc-custom-xyz' was not found on PATH"
        ));
        fs::remove_dir_all(&d).unwrap();
    }

    /// A stand-in for `oc adm release extract`: records its arguments and the registry config's mode,
    /// then writes an installer reporting `version` into --to.
    pub(crate) fn fake_oc(dir: &Path, version: &str) -> PathBuf {
        let oc = dir.join("oc");
        script(
            &oc,
            &format!(
                r#"log="{log}"
to=""; cfg=""
for a in "$@"; do case "$a" in --to=*) to="${{a#--to=}}";; --registry-config=*) cfg="${{a#--registry-config=}}";; esac; done
echo "$* mode=$(stat -c %a "$cfg") secret=$(cat "$cfg")" >> "$log"
sleep 0.2
printf '#!/bin/sh\necho "$0 {version}"\n' > "$to/openshift-install"
chmod 755 "$to/openshift-install"
"#,
                log = dir.join("calls").display()
            ),
        );
        oc
    }

    #[test]
    fn concurrent_runs_extract_a_version_once_and_leave_no_credentials() {
        let d = temp("once");
        let oc = fake_oc(&d, "4.19.7");
        let cache = d.join("cache");
        let x = Extraction {
            version: "4.19.7".into(),
            image: format!("{RELEASE_REPOSITORY}:4.19.7-x86_64"),
            oc,
            cache: cache.clone(),
        };
        let tmp = d.join("tmp");
        // Each thread opens the lock file itself, as separate processes do.
        let results: Vec<Extracted> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| s.spawn(|| extract(&x, "{\"auths\":{}}", &tmp).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let calls = fs::read_to_string(d.join("calls")).unwrap();
        assert_eq!(calls.lines().count(), 1, "{calls}");
        let call = calls.lines().next().unwrap();
        assert!(
            call.starts_with("adm release extract --command=openshift-install --to=")
                && call.contains(&format!("--registry-config={}", tmp.display()))
                && call.contains(&format!(
                    " -- {RELEASE_REPOSITORY}:4.19.7-x86_64 mode=600 secret={{\"auths\":{{}}}}"
                )),
            "{call}"
        );
        assert_eq!(results.iter().filter(|r| r.fresh).count(), 1);
        for r in &results {
            assert_eq!(
                (&r.path, r.version.as_str()),
                (&cache.join("openshift-install-4.19.7"), "4.19.7")
            );
        }
        // Only the installer (and the lock) are left: no work folder, no registry config.
        let mut left: Vec<String> = fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".openshift-install-4.19.7.lock", "openshift-install-4.19.7"]
        );
        assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_or_wrong_extraction_places_nothing() {
        let d = temp("fail");
        let cache = d.join("cache");
        let tmp = d.join("tmp");
        let failing = d.join("oc-fails");
        script(
            &failing,
            "echo 'error: unable to read image quay.io/x: unauthorized: access to the requested resource is not authorized' >&2\nexit 1\n",
        );
        let mut x = Extraction {
            version: "4.19.7".into(),
            image: "quay.io/x".into(),
            oc: failing,
            cache: cache.clone(),
        };
        let e = extract(&x, "{}", &tmp).unwrap_err();
        assert!(
            matches!(&e, InstallerError::Extract(ExtractError::Failed { stderr, .. }) if stderr.contains("unauthorized")),
            "{e}"
        );
        // An image of another release than the inventory's version: refused, not cached.
        x.oc = fake_oc(&d, "4.19.8");
        let e = extract(&x, "{}", &tmp).unwrap_err();
        assert!(matches!(e, InstallerError::Mismatch { .. }), "{e}");
        assert!(!x.dest().exists());
        let left = fs::read_dir(&cache)
            .unwrap()
            .filter(|e| {
                !e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".lock")
            })
            .count();
        assert_eq!(left, 0, "a work folder or a binary was left in the cache");
        assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
        fs::remove_dir_all(&d).unwrap();
    }
}
