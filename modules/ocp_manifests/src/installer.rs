//! Which `openshift-install` a cluster uses, and proof that it is the version the cluster asks for.
//!
//! The one place of the rule (the role and the playbooks only pass the inventory's settings):
//! the cluster's `version` (`"4.19"` or an exact `"4.19.7"`) is looked up in
//! 1. `openshift_installers` (version → path): the exact key first, then the minor (`"4.19"`);
//! 2. `openshift_install_cache`: `openshift-install-<version>`, then `openshift-install-<minor>`;
//! 3. `openshift_install`: a path, or a name found on PATH (the single global installer);
//! 4. the release image ([`crate::release`]): extracted into the cache when nothing above has one (or
//!    only the global installer, of another version) and `oc`, a pull secret and an exact version (or
//!    `ocp_release_image`) are there. The caller decides that; [`select`] only looks.
//!
//! A map entry or an `openshift_install` path that is not an executable is an error; a miss in the
//! cache and on PATH only is "not found" (which the caller may accept: no ISO is built then).
//!
//! Whichever is picked must report the requested version in `openshift-install version` (the same
//! minor for `"4.19"`, that exact version for `"4.19.7"`), else it is refused before anything is
//! written or built.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::iso::{self, BinaryError};
use crate::plan::parse_version;

/// Where the installer came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `openshift_installers[key]`.
    Map(String),
    /// A file of `openshift_install_cache`.
    Cache,
    /// `openshift_install` (path or PATH).
    Global,
    /// Extracted from this release image into the cache by this run.
    Release(String),
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::Map(key) => format!("openshift_installers[{key}]"),
            Source::Cache => "openshift_install_cache".to_string(),
            Source::Global => "openshift_install".to_string(),
            Source::Release(image) => format!("release image {image}"),
        }
    }
}

/// The installer picked for a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub path: PathBuf,
    pub source: Source,
}

/// Where the installers may be, as the inventory gives them.
#[derive(Debug, Default)]
pub struct Sources<'a> {
    pub map: Option<&'a BTreeMap<String, String>>,
    pub cache: Option<&'a Path>,
    pub global: Option<&'a str>,
}

impl Sources<'_> {
    pub fn any(&self) -> bool {
        self.map.is_some() || self.cache.is_some() || self.global.is_some()
    }
}

/// Why a cluster has no usable installer.
#[derive(Debug, thiserror::Error)]
pub enum InstallerError {
    #[error(
        "no openshift-install for version {version}; looked in: {}{}", .looked.join("; "),
        .not_extracted.as_ref().map(|w| format!("; not extracted from a release image: {w}")).unwrap_or_default()
    )]
    NotFound {
        version: String,
        looked: Vec<String>,
        /// Why it cannot be extracted from the release image either (see [`crate::release`]).
        not_extracted: Option<String>,
    },
    #[error("{source_name}: {} is not an executable file", .path.display())]
    NotExecutable { source_name: String, path: PathBuf },
    #[error("cannot run {} version: {source}", .path.display())]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} version failed ({status}): {stderr}", .path.display())]
    VersionFailed {
        path: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    #[error("{} version printed {line:?}, not 'openshift-install <version>'", .path.display())]
    Unreadable { path: PathBuf, line: String },
    #[error(
        "{} is openshift-install {found}, but the cluster's version is {wanted}: \
         give the installer of {wanted} in openshift_installers or openshift_install_cache", .path.display()
    )]
    Mismatch {
        path: PathBuf,
        wanted: String,
        found: String,
    },
    #[error(transparent)]
    Extract(#[from] crate::release::ExtractError),
}

impl InstallerError {
    /// Where the search looked (for NotFound), for the result and the preflight message.
    pub fn looked(&self) -> &[String] {
        match self {
            InstallerError::NotFound { looked, .. } => looked,
            _ => &[],
        }
    }

    /// A miss, with why the release image cannot supply the installer either.
    pub fn not_extracted(self, why: String) -> InstallerError {
        match self {
            InstallerError::NotFound {
                version, looked, ..
            } => InstallerError::NotFound {
                version,
                looked,
                not_extracted: Some(why),
            },
            other => other,
        }
    }
}

/// A cached installer's file name is this and the version: `openshift-install-4.19.7`.
pub const CACHE_PREFIX: &str = "openshift-install-";

/// The keys a version is looked up by, most specific first: `4.19.7` → [`4.19.7`, `4.19`].
pub fn lookup_keys(version: &str) -> Vec<String> {
    let version = version.trim();
    let mut keys = vec![version.to_string()];
    if let Some((major, minor)) = parse_version(version) {
        let minor = format!("{major}.{minor}");
        if minor != version {
            keys.push(minor);
        }
    }
    keys
}

pub(crate) fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Pick the installer for `version` (the rule in the module doc). A map entry that names no
/// executable is an error, not a reason to look elsewhere: the inventory asked for that file.
pub fn select(version: &str, sources: &Sources) -> Result<Choice, InstallerError> {
    let keys = lookup_keys(version);
    let mut looked = Vec::new();
    if let Some(map) = sources.map {
        for key in &keys {
            if let Some(path) = map.get(key) {
                // Like a `path` option: `~` and `$VAR` expanded.
                let path = PathBuf::from(ansible_module::coerce::expand_path(path));
                if !executable(&path) {
                    let source_name = Source::Map(key.clone()).describe();
                    return Err(InstallerError::NotExecutable { source_name, path });
                }
                let source = Source::Map(key.clone());
                return Ok(Choice { path, source });
            }
        }
        looked.push(format!("openshift_installers (keys {})", keys.join(", ")));
    }
    if let Some(dir) = sources.cache {
        for key in &keys {
            let path = dir.join(format!("{CACHE_PREFIX}{key}"));
            if executable(&path) {
                return Ok(Choice {
                    path,
                    source: Source::Cache,
                });
            }
            looked.push(path.display().to_string());
        }
    }
    if let Some(name) = sources.global {
        match iso::resolve_binary(name) {
            Ok(path) => {
                return Ok(Choice {
                    path,
                    source: Source::Global,
                })
            }
            // A path the inventory named, like a map entry: refused, not a reason to skip the ISO.
            Err(BinaryError::NotExecutable(path)) => {
                let source_name = Source::Global.describe();
                return Err(InstallerError::NotExecutable { source_name, path });
            }
            Err(BinaryError::NotOnPath(n)) => looked.push(format!("'{n}' on PATH")),
        }
    }
    Err(InstallerError::NotFound {
        version: version.trim().to_string(),
        looked,
        not_extracted: None,
    })
}

/// The version in `openshift-install version`'s first line: `<argv0> <version>`, as
/// openshift/installer `cmd/openshift-install/version.go` `runVersionCmd` prints it (argv0 is the
/// name or path it was started by, so the version is the line's last word; a leading `v` is dropped).
pub fn parse_version_output(text: &str) -> Option<String> {
    let first = text.lines().next()?.trim();
    let mut words = first.split_whitespace();
    let _argv0 = words.next()?;
    let raw = words.next_back()?;
    let v = raw.strip_prefix('v').unwrap_or(raw);
    parse_version(v).map(|_| v.to_string())
}

/// Whether an installer of version `found` serves a cluster asking for `wanted`: the same minor for
/// `"4.19"`, the same version for `"4.19.7"` (or `"4.19.0-rc.1"`).
pub fn version_matches(wanted: &str, found: &str) -> bool {
    let wanted = wanted.trim();
    let minor_only = wanted.split('.').count() == 2 && !wanted.contains(['-', '+']);
    if minor_only {
        parse_version(wanted).is_some() && parse_version(wanted) == parse_version(found)
    } else {
        wanted == found
    }
}

/// Run `<path> version` and check it against `wanted`; the installer's version on success.
pub fn verify(path: &Path, wanted: &str) -> Result<String, InstallerError> {
    let out = ansible_module::child::command(path)
        .arg("version")
        .output()
        .map_err(|source| InstallerError::Spawn {
            path: path.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(InstallerError::VersionFailed {
            path: path.to_path_buf(),
            status: out.status,
            stderr: stderr.lines().last().unwrap_or_default().trim().to_string(),
        });
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let found = parse_version_output(&stdout).ok_or_else(|| InstallerError::Unreadable {
        path: path.to_path_buf(),
        line: stdout.lines().next().unwrap_or_default().to_string(),
    })?;
    if !version_matches(wanted, &found) {
        return Err(InstallerError::Mismatch {
            path: path.to_path_buf(),
            wanted: wanted.trim().to_string(),
            found,
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn version_output_is_parsed_from_the_first_line() {
        let real =
            "openshift-install 4.19.7\nbuilt from commit 1a2b\nrelease image quay.io/x@sha256:0\n";
        assert_eq!(parse_version_output(real).as_deref(), Some("4.19.7"));
        let by_path = "/opt/bin/openshift-install-4.16 4.16.3\n";
        assert_eq!(parse_version_output(by_path).as_deref(), Some("4.16.3"));
        assert_eq!(
            parse_version_output("openshift-install v4.17.0-rc.1\n").as_deref(),
            Some("4.17.0-rc.1")
        );
        assert_eq!(
            parse_version_output("openshift-install unreleased-master-1\n"),
            None
        );
        assert_eq!(parse_version_output("4.19.7\n"), None);
        assert_eq!(parse_version_output(""), None);
    }

    #[test]
    fn a_minor_matches_its_patches_an_exact_version_only_itself() {
        assert!(version_matches("4.19", "4.19.7"));
        assert!(version_matches("4.19", "4.19.0-rc.2"));
        assert!(!version_matches("4.19", "4.18.9"));
        assert!(!version_matches("4.1", "4.19.7"));
        assert!(version_matches("4.19.7", "4.19.7"));
        assert!(!version_matches("4.19.7", "4.19.8"));
        assert!(!version_matches("4.19.7", "4.19.7-rc.1"));
        assert!(!version_matches("four", "4.19.7"));
    }

    #[test]
    fn lookup_keys_exact_then_minor() {
        assert_eq!(lookup_keys("4.19.7"), ["4.19.7", "4.19"]);
        assert_eq!(lookup_keys("4.19"), ["4.19"]);
        assert_eq!(lookup_keys(" 4.17.0-rc.1"), ["4.17.0-rc.1", "4.17"]);
    }

    fn exe(p: &Path, version: &str) {
        use std::os::unix::fs::PermissionsExt;
        fs::write(p, format!("#!/bin/sh\necho \"$0 {version}\"\n")).unwrap();
        fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ocp-installer-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn selection_order_map_cache_global() {
        let d = temp("select");
        let (exact, minor, cached, global) = (
            d.join("exact"),
            d.join("minor"),
            d.join("openshift-install-4.16"),
            d.join("global"),
        );
        for (p, v) in [
            (&exact, "4.19.7"),
            (&minor, "4.19.2"),
            (&cached, "4.16.3"),
            (&global, "4.18.1"),
        ] {
            exe(p, v);
        }
        let map: BTreeMap<String, String> = [
            ("4.19.7".to_string(), exact.display().to_string()),
            ("4.19".to_string(), minor.display().to_string()),
        ]
        .into();
        let g = global.display().to_string();
        let s = Sources {
            map: Some(&map),
            cache: Some(&d),
            global: Some(&g),
        };
        let pick = |v: &str| select(v, &s).unwrap();
        assert_eq!(
            pick("4.19.7"),
            Choice {
                path: exact.clone(),
                source: Source::Map("4.19.7".into())
            }
        );
        assert_eq!(
            pick("4.19.5"),
            Choice {
                path: minor.clone(),
                source: Source::Map("4.19".into())
            }
        );
        assert_eq!(
            pick("4.19"),
            Choice {
                path: minor,
                source: Source::Map("4.19".into())
            }
        );
        assert_eq!(
            pick("4.16.3"),
            Choice {
                path: cached,
                source: Source::Cache
            }
        );
        assert_eq!(
            pick("4.18"),
            Choice {
                path: global.clone(),
                source: Source::Global
            }
        );

        // Nothing anywhere: the error lists every place looked in.
        let none = Sources {
            map: Some(&map),
            cache: Some(&d),
            global: Some("surely-not-an-installer-xyz"),
        };
        let err = select("4.17.2", &none).unwrap_err();
        let looked = err.looked().to_vec();
        assert_eq!(looked.len(), 4, "{looked:?}");
        assert!(looked[0].contains("4.17.2, 4.17"));
        assert!(looked[1].ends_with("openshift-install-4.17.2"));
        assert!(looked[2].ends_with("openshift-install-4.17"));
        assert!(looked[3].contains("surely-not-an-installer-xyz"));
        assert!(err
            .to_string()
            .contains("no openshift-install for version 4.17.2"));

        // A map entry that is not an executable is refused, not skipped.
        let bad: BTreeMap<String, String> =
            [("4.15".to_string(), d.join("missing").display().to_string())].into();
        let s = Sources {
            map: Some(&bad),
            cache: Some(&d),
            global: Some(&g),
        };
        assert!(matches!(
            select("4.15", &s),
            Err(InstallerError::NotExecutable { .. })
        ));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn verify_runs_version_and_refuses_a_mismatch() {
        let d = temp("verify");
        let bin = d.join("openshift-install");
        exe(&bin, "4.16.3");
        assert_eq!(verify(&bin, "4.16").unwrap(), "4.16.3");
        assert_eq!(verify(&bin, "4.16.3").unwrap(), "4.16.3");
        match verify(&bin, "4.19") {
            Err(e @ InstallerError::Mismatch { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("4.16.3")
                        && msg.contains("4.19")
                        && msg.contains(&bin.display().to_string()),
                    "{msg}"
                );
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
        let broken = d.join("broken");
        fs::write(&broken, "#!/bin/sh\necho nope >&2\nexit 3\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&broken, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(
            verify(&broken, "4.16"),
            Err(InstallerError::VersionFailed { .. })
        ));
        exe(&broken, "unreleased");
        assert!(matches!(
            verify(&broken, "4.16"),
            Err(InstallerError::Unreadable { .. })
        ));
        fs::remove_dir_all(&d).unwrap();
    }
}
