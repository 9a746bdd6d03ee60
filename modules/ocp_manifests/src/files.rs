//! Idempotent file output: compare, back up a file about to change, write atomically with mode 0600,
//! archive a folder instead of deleting it, list what changed between two YAML documents, and mask
//! secrets in what a diff shows.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const MODE: u32 = 0o600;

/// The folder below `output_dir` where replaced build folders are moved (never deleted: they hold
/// the credentials of the cluster they built).
pub const ARCHIVE_DIR: &str = "archive";

/// A file operation that failed, with the path and the I/O cause.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot chmod {}: {source}", path.display())]
    Chmod {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot archive {} as {}: {source}", from.display(), to.display())]
    Archive {
        from: PathBuf,
        to: PathBuf,
        source: std::io::Error,
    },
}

/// What writing `content` to a path would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub path: PathBuf,
    /// The current content, `None` when the file does not exist.
    pub before: Option<String>,
    pub content_changes: bool,
    pub mode_changes: bool,
}

impl Pending {
    pub fn changed(&self) -> bool {
        self.content_changes || self.mode_changes
    }
}

pub fn inspect(path: &Path, content: &str) -> Result<Pending, FileError> {
    let read_error = |source| FileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let before = match fs::read(path) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(read_error(e)),
    };
    let mode_changes = match &before {
        Some(_) => fs::metadata(path).map_err(read_error)?.permissions().mode() & 0o7777 != MODE,
        None => false,
    };
    let content_changes = before.as_deref() != Some(content);
    Ok(Pending {
        path: path.to_path_buf(),
        before,
        content_changes,
        mode_changes,
    })
}

/// `YYYY-MM-DD@HH:MM:SS` in UTC, the timestamp style of Ansible's backup files.
pub fn timestamp(t: SystemTime) -> String {
    // RFC 3339 without the zone marker, `T` as `@`: sorts by time and reads well in a file name.
    let t = t.max(UNIX_EPOCH);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .trim_end_matches('Z')
        .replacen('T', "@", 1)
}

/// Copy `path` to `path.<pid>.<timestamp>~` (mode 0600: it holds the same secrets).
pub fn backup(path: &Path) -> Result<PathBuf, FileError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let dest = path.with_file_name(format!(
        "{name}.{}.{}~",
        std::process::id(),
        timestamp(SystemTime::now())
    ));
    let data = fs::read(path).map_err(|source| FileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(&dest, &data)?;
    Ok(dest)
}

/// Write through a temporary file in the same directory, fsync, then rename over the target, so a
/// reader never sees half a file. The file is created 0600 and never widened.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), FileError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(MODE)
            .open(&tmp)?;
        f.write_all(data)?;
        f.set_permissions(fs::Permissions::from_mode(MODE))?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if let Err(source) = result {
        let _ = fs::remove_file(&tmp);
        return Err(FileError::Write {
            path: path.to_path_buf(),
            source,
        });
    }
    Ok(())
}

/// Move `path` (a file or folder) to `output_dir/archive/<label>-<timestamp>[-n]` and return the
/// new place. A rename, so the contents (credentials included) stay exactly as they were.
pub fn archive(output_dir: &Path, path: &Path, label: &str) -> Result<PathBuf, FileError> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = output_dir.join(ARCHIVE_DIR);
    let fail = |to: &Path, source| FileError::Archive {
        from: path.to_path_buf(),
        to: to.to_path_buf(),
        source,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| fail(&dir, e))?;
    let stamp = timestamp(SystemTime::now());
    let mut dest = dir.join(format!("{label}-{stamp}"));
    // Two archives in the same second get a counter rather than overwriting each other.
    let mut n = 1;
    while dest.exists() {
        dest = dir.join(format!("{label}-{stamp}-{n}"));
        n += 1;
    }
    fs::rename(path, &dest).map_err(|e| fail(&dest, e))?;
    Ok(dest)
}

/// The YAML paths (`networking.machineNetwork[0].cidr`) whose values differ between two documents,
/// at most `limit` of them. Paths only, never values: the documents hold secrets. A document that
/// does not parse counts as one change at its root.
pub fn changed_paths(before: &str, after: &str, limit: usize) -> Vec<String> {
    let parse = |t: &str| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(t);
    let mut out = Vec::new();
    match (parse(before), parse(after)) {
        (Ok(b), Ok(a)) => walk_changes(&b, &a, String::new(), &mut out, limit),
        _ if before != after => out.push("(whole file)".to_string()),
        _ => {}
    }
    out
}

fn walk_changes(
    b: &serde_yaml_ng::Value,
    a: &serde_yaml_ng::Value,
    at: String,
    out: &mut Vec<String>,
    limit: usize,
) {
    use serde_yaml_ng::Value;
    if out.len() >= limit || b == a {
        return;
    }
    let child = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    match (b, a) {
        (Value::Mapping(bm), Value::Mapping(am)) => {
            let mut keys: Vec<&Value> = bm.keys().chain(am.keys()).collect();
            keys.dedup();
            let mut seen = Vec::new();
            for k in keys {
                if seen.contains(&k) {
                    continue;
                }
                seen.push(k);
                let name = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml_ng::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                match (bm.get(k), am.get(k)) {
                    (Some(bv), Some(av)) => walk_changes(bv, av, child(&name), out, limit),
                    _ => out.push(child(&name)),
                }
                if out.len() >= limit {
                    return;
                }
            }
        }
        (Value::Sequence(bs), Value::Sequence(as_)) if bs.len() == as_.len() => {
            for (i, (bv, av)) in bs.iter().zip(as_).enumerate() {
                walk_changes(bv, av, format!("{at}[{i}]"), out, limit);
            }
        }
        _ => out.push(if at.is_empty() { "(root)".into() } else { at }),
    }
}

/// Apply a pending change: back up the old content (when asked and it changes), then write.
pub fn apply(p: &Pending, content: &str, backup_old: bool) -> Result<Option<PathBuf>, FileError> {
    let mut saved = None;
    if p.content_changes {
        if backup_old && p.before.is_some() {
            saved = Some(backup(&p.path)?);
        }
        write_atomic(&p.path, content.as_bytes())?;
    } else if p.mode_changes {
        fs::set_permissions(&p.path, fs::Permissions::from_mode(MODE)).map_err(|source| {
            FileError::Chmod {
                path: p.path.clone(),
                source,
            }
        })?;
    }
    Ok(saved)
}

/// Hide secrets in text meant for a diff: the value of every `pullSecret:`/`sshKey:` line (old
/// files may hold an older secret), then any known secret string anywhere.
pub fn mask_for_diff(text: &str, secrets: &[String]) -> String {
    let mut out: String = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            match ["pullSecret:", "sshKey:"]
                .iter()
                .find(|k| t.starts_with(*k))
            {
                Some(k) => format!("{}{k} '********'\n", &l[..l.len() - t.len()]),
                None => format!("{l}\n"),
            }
        })
        .collect();
    if !text.ends_with('\n') {
        out.pop();
    }
    let mut sorted: Vec<&String> = secrets.iter().filter(|s| s.len() >= 4).collect();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for s in sorted {
        out = out.replace(s.as_str(), "********");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ocp-files-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01@00:00:00");
        assert_eq!(
            timestamp(UNIX_EPOCH + std::time::Duration::from_secs(1_709_210_096)),
            "2024-02-29@12:34:56"
        );
    }

    #[test]
    fn write_backup_and_idempotence() {
        let d = tmpdir("w");
        let f = d.join("install-config.yaml");
        let p = inspect(&f, "a: 1\n").unwrap();
        assert!(p.content_changes && p.before.is_none());
        assert_eq!(apply(&p, "a: 1\n", true).unwrap(), None);
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!inspect(&f, "a: 1\n").unwrap().changed());
        let p = inspect(&f, "a: 2\n").unwrap();
        let saved = apply(&p, "a: 2\n", true).unwrap().unwrap();
        assert_eq!(fs::read_to_string(&saved).unwrap(), "a: 1\n");
        assert_eq!(
            fs::metadata(&saved).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(saved.file_name().unwrap().to_string_lossy().ends_with('~'));
        assert_eq!(fs::read_to_string(&f).unwrap(), "a: 2\n");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        let p = inspect(&f, "a: 2\n").unwrap();
        assert!(p.mode_changes && !p.content_changes);
        apply(&p, "a: 2\n", true).unwrap();
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // No temporary files left behind.
        assert_eq!(fs::read_dir(&d).unwrap().count(), 2);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn archive_renames_aside_and_never_overwrites() {
        let d = tmpdir("a");
        for round in 0..2 {
            fs::create_dir_all(d.join("agent/auth")).unwrap();
            fs::write(d.join("agent/auth/kubeconfig"), format!("k{round}")).unwrap();
            let to = archive(&d, &d.join("agent"), "agent").unwrap();
            assert!(to.starts_with(d.join(ARCHIVE_DIR)));
            assert_eq!(
                fs::read_to_string(to.join("auth/kubeconfig")).unwrap(),
                format!("k{round}")
            );
        }
        assert!(!d.join("agent").exists());
        assert_eq!(fs::read_dir(d.join(ARCHIVE_DIR)).unwrap().count(), 2);
        let missing = archive(&d, &d.join("nothing"), "x").unwrap_err();
        assert!(matches!(missing, FileError::Archive { .. }));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn changed_paths_name_keys_not_values() {
        let before = "a: 1\nnet:\n  cidr: 10.0.0.0/24\n  list: [x, y]\npullSecret: s3cret\n";
        let after = "a: 1\nnet:\n  cidr: 10.0.1.0/24\n  list: [x, z]\npullSecret: other\nnew: 2\n";
        assert_eq!(
            changed_paths(before, after, 10),
            ["net.cidr", "net.list[1]", "pullSecret", "new"]
        );
        assert_eq!(changed_paths(before, after, 2).len(), 2);
        assert!(changed_paths(before, before, 10).is_empty());
        assert_eq!(changed_paths("a: [", "b: 1", 10), ["(whole file)"]);
    }

    #[test]
    fn diff_masking() {
        let t = "a: 1\npullSecret: \"{\\\"auths\\\":{}}\"\n  sshKey: ssh-ed25519 AAAA\nx: tok3n\n";
        let m = mask_for_diff(t, &["tok3n".into()]);
        assert_eq!(
            m,
            "a: 1\npullSecret: '********'\n  sshKey: '********'\nx: ********\n"
        );
    }
}
