//! The module's options as typed settings, with every check the argument spec cannot express (pure).

use std::time::Duration;

use pve_types::propstring::valid_tag;
use serde::Deserialize;
use vm_lifecycle::target::Selector;

/// The longest snapshot name PVE takes (`snapname`'s `maxLength` in qemu-server's `snapshot`).
pub const SNAPNAME_MAX: usize = 40;

/// What the task asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Present,
    Absent,
    Rollback,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Present => "present",
            State::Absent => "absent",
            State::Rollback => "rollback",
        }
    }
}

/// The options as the task gave them (connection options are read by the client separately).
#[derive(Debug, Clone, Deserialize)]
pub struct Options {
    pub vmid: Option<i64>,
    pub hostname: Option<String>,
    pub tags: Option<Vec<String>>,
    pub owner_tag: String,
    pub state: State,
    pub snapname: String,
    pub description: Option<String>,
    pub vmstate: bool,
    pub retention: i64,
    pub retention_prefix: Option<String>,
    pub force: bool,
    pub timeout: i64,
}

/// One option value the argument spec cannot check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error("snapname '{got}' is not a valid Proxmox snapshot name: {why}")]
    Snapname { got: String, why: &'static str },
    #[error("vmid must be between 100 and 999999999, got {0}")]
    Vmid(i64),
    #[error("hostname must not be empty")]
    EmptyHostname,
    #[error("tags must name at least one tag")]
    NoTags,
    #[error("tags: '{0}' is not a valid Proxmox tag")]
    Tag(String),
    #[error("owner_tag '{0}' is not a valid Proxmox tag")]
    OwnerTag(String),
    #[error("retention must be 0 (keep every snapshot) or more, got {0}")]
    Retention(i64),
    #[error("retention applies to state=present only (state is {0})")]
    RetentionNeedsPresent(&'static str),
    #[error("snapname '{snapname}' does not start with retention_prefix '{prefix}'")]
    Prefix { snapname: String, prefix: String },
    #[error("timeout must be 1 or more seconds, got {0}")]
    Timeout(i64),
}

/// Every option problem of a task, reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidOptions(pub Vec<OptionError>);

/// The checked settings the plan and the run work from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub state: State,
    pub snapname: String,
    pub description: Option<String>,
    pub vmstate: bool,
    /// Keep this many of the project's snapshots named with `prefix` (0: keep all).
    pub retention: usize,
    pub prefix: String,
    pub force: bool,
    pub owner_tag: String,
    pub timeout: Duration,
}

/// Why a name is not a snapshot name PVE takes, if it is not. The grammar is `pve-configid`
/// (PVE::JSONSchema `pve_verify_configid`: a letter, then one or more letters, digits, `_` or `-`)
/// with `maxLength` 40, less the names qemu-server's `snapshot` reserves (`current`, and `pending`
/// in any case).
pub fn snapname_problem(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphabetic()) {
        return Some("it must start with a letter");
    }
    if name.len() < 2 {
        return Some("it must be at least 2 characters long");
    }
    if name.len() > SNAPNAME_MAX {
        return Some("it must be at most 40 characters long");
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Some("only letters, digits, '_' and '-' are allowed");
    }
    if name == "current" || name.eq_ignore_ascii_case("pending") {
        return Some("the name is reserved by Proxmox");
    }
    None
}

/// The default `retention_prefix`: the name without its trailing digits, `_` and `-` (the run's
/// date or counter), so `restore-20261207-1000` and `restore-20261208-0900` are one series.
pub fn default_prefix(snapname: &str) -> &str {
    snapname.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_' || c == '-')
}

impl Options {
    /// Check what the spec cannot express; every problem at once.
    pub fn settle(&self) -> Result<(Selector, Settings), InvalidOptions> {
        let mut errors = Vec::new();
        let selector = self.selector(&mut errors);
        if let Some(why) = snapname_problem(&self.snapname) {
            errors.push(OptionError::Snapname {
                got: self.snapname.clone(),
                why,
            });
        }
        if !valid_tag(self.owner_tag.trim()) {
            errors.push(OptionError::OwnerTag(self.owner_tag.clone()));
        }
        if self.retention < 0 {
            errors.push(OptionError::Retention(self.retention));
        } else if self.retention > 0 && self.state != State::Present {
            errors.push(OptionError::RetentionNeedsPresent(self.state.as_str()));
        }
        let prefix = match self.retention_prefix.as_deref().map(str::trim) {
            Some(p) if !p.is_empty() => p.to_string(),
            _ => default_prefix(&self.snapname).to_string(),
        };
        if !self.snapname.starts_with(&prefix) {
            errors.push(OptionError::Prefix {
                snapname: self.snapname.clone(),
                prefix: prefix.clone(),
            });
        }
        if self.timeout < 1 {
            errors.push(OptionError::Timeout(self.timeout));
        }
        if !errors.is_empty() {
            return Err(InvalidOptions(errors));
        }
        Ok((
            selector,
            Settings {
                state: self.state,
                snapname: self.snapname.clone(),
                description: self.description.clone().filter(|d| !d.trim().is_empty()),
                vmstate: self.vmstate,
                retention: usize::try_from(self.retention).unwrap_or(0),
                prefix,
                force: self.force,
                owner_tag: self.owner_tag.trim().to_ascii_lowercase(),
                timeout: Duration::from_secs(self.timeout.unsigned_abs()),
            },
        ))
    }

    fn selector(&self, errors: &mut Vec<OptionError>) -> Selector {
        if let Some(tags) = &self.tags {
            if tags.is_empty() {
                errors.push(OptionError::NoTags);
            }
            for t in tags.iter().filter(|t| !valid_tag(t.trim())) {
                errors.push(OptionError::Tag(t.clone()));
            }
            return Selector::Tags(tags.iter().map(|t| t.trim().to_ascii_lowercase()).collect());
        }
        let vmid = self.vmid.and_then(|v| match u32::try_from(v) {
            Ok(id) if (100..=999_999_999).contains(&id) => Some(id),
            _ => {
                errors.push(OptionError::Vmid(v));
                None
            }
        });
        let name = self.hostname.as_deref().map(str::trim).map(str::to_string);
        if name.as_deref() == Some("") {
            errors.push(OptionError::EmptyHostname);
        }
        Selector::One { vmid, name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(snapname: &str) -> Options {
        Options {
            vmid: Some(101),
            hostname: None,
            tags: None,
            owner_tag: "proxshift".into(),
            state: State::Present,
            snapname: snapname.into(),
            description: None,
            vmstate: false,
            retention: 0,
            retention_prefix: None,
            force: false,
            timeout: 300,
        }
    }

    #[test]
    fn snapnames_follow_pve_configid() {
        for ok in [
            "ab",
            "restore-2026_12_07",
            "Before-Upgrade",
            &"a".repeat(40),
        ] {
            assert_eq!(snapname_problem(ok), None, "{ok}");
        }
        let cases = [
            ("", "it must start with a letter"),
            ("1st", "it must start with a letter"),
            ("_x", "it must start with a letter"),
            ("a", "it must be at least 2 characters long"),
            ("has space", "only letters, digits, '_' and '-' are allowed"),
            ("dot.ted", "only letters, digits, '_' and '-' are allowed"),
            ("current", "the name is reserved by Proxmox"),
            ("Pending", "the name is reserved by Proxmox"),
        ];
        for (bad, why) in cases {
            assert_eq!(snapname_problem(bad), Some(why), "{bad}");
        }
        assert_eq!(
            snapname_problem(&"a".repeat(41)),
            Some("it must be at most 40 characters long")
        );
    }

    #[test]
    fn a_bad_snapname_is_named_with_the_option() {
        let err = options("before upgrade").settle().unwrap_err();
        assert_eq!(
            err.to_string(),
            "snapname 'before upgrade' is not a valid Proxmox snapshot name: only letters, digits, '_' and '-' are allowed"
        );
    }

    #[test]
    fn the_default_prefix_drops_the_trailing_date() {
        assert_eq!(default_prefix("restore-20261207-1000"), "restore");
        assert_eq!(default_prefix("nightly_3"), "nightly");
        assert_eq!(default_prefix("plain"), "plain");
        let (_, s) = options("restore-20261207").settle().unwrap();
        assert_eq!(s.prefix, "restore");
    }

    #[test]
    fn every_problem_is_reported_together() {
        let mut o = options("x");
        o.vmid = Some(5);
        o.retention = 2;
        o.state = State::Rollback;
        o.timeout = 0;
        o.owner_tag = "bad tag".into();
        let msg = o.settle().unwrap_err().to_string();
        for part in [
            "vmid must be between 100 and 999999999, got 5",
            "snapname 'x'",
            "owner_tag 'bad tag'",
            "retention applies to state=present only (state is rollback)",
            "timeout must be 1 or more seconds, got 0",
        ] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
    }

    #[test]
    fn tags_are_checked_and_lowercased() {
        let mut o = options("restore-1");
        o.vmid = None;
        o.tags = Some(vec!["Proxshift-C1".into()]);
        let (sel, _) = o.settle().unwrap();
        assert_eq!(sel, Selector::Tags(vec!["proxshift-c1".into()]));
        o.tags = Some(vec![]);
        assert!(matches!(
            o.settle().unwrap_err().0.as_slice(),
            [OptionError::NoTags]
        ));
    }

    #[test]
    fn a_prefix_the_name_does_not_start_with_is_refused() {
        let mut o = options("restore-1");
        o.retention = 3;
        o.retention_prefix = Some("nightly".into());
        assert_eq!(
            o.settle().unwrap_err().0,
            vec![OptionError::Prefix {
                snapname: "restore-1".into(),
                prefix: "nightly".into()
            }]
        );
    }
}
