//! Idempotent file output: compare, back up a file about to change, write atomically with mode 0600,
//! and mask secrets in what a diff shows.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const MODE: u32 = 0o600;

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

pub fn inspect(path: &Path, content: &str) -> Result<Pending, String> {
    let before = match fs::read(path) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mode_changes = match &before {
        Some(_) => {
            fs::metadata(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .permissions()
                .mode()
                & 0o7777
                != MODE
        }
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
pub fn backup(path: &Path) -> Result<PathBuf, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let dest = path.with_file_name(format!(
        "{name}.{}.{}~",
        std::process::id(),
        timestamp(SystemTime::now())
    ));
    let data =
        fs::read(path).map_err(|e| format!("cannot read {} for backup: {e}", path.display()))?;
    write_atomic(&dest, &data)?;
    Ok(dest)
}

/// Write through a temporary file in the same directory, fsync, then rename over the target, so a
/// reader never sees half a file. The file is created 0600 and never widened.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), String> {
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
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    Ok(())
}

/// Apply a pending change: back up the old content (when asked and it changes), then write.
pub fn apply(p: &Pending, content: &str, backup_old: bool) -> Result<Option<PathBuf>, String> {
    let mut saved = None;
    if p.content_changes {
        if backup_old && p.before.is_some() {
            saved = Some(backup(&p.path)?);
        }
        write_atomic(&p.path, content.as_bytes())?;
    } else if p.mode_changes {
        fs::set_permissions(&p.path, fs::Permissions::from_mode(MODE))
            .map_err(|e| format!("cannot chmod {}: {e}", p.path.display()))?;
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
    fn diff_masking() {
        let t = "a: 1\npullSecret: \"{\\\"auths\\\":{}}\"\n  sshKey: ssh-ed25519 AAAA\nx: tok3n\n";
        let m = mask_for_diff(t, &["tok3n".into()]);
        assert_eq!(
            m,
            "a: 1\npullSecret: '********'\n  sshKey: '********'\nx: ********\n"
        );
    }
}
