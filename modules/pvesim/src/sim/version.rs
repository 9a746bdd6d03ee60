//! The Proxmox VE release the simulator plays (seed `cluster.version`, `--pve-version`).
//!
//! Operations that behave differently on PVE 8 and PVE 9 match on `Sim::version`'s
//! `generation()` in their own `ops` module, e.g.
//! `match sim.version.generation() { Generation::Pve8 => …, Generation::Pve9 => … }`.

use std::fmt;
use std::str::FromStr;

/// The major releases pvesim knows how to play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Generation {
    /// PVE 8.x (Debian 12, qemu-server 8).
    Pve8,
    /// PVE 9.x (Debian 13, qemu-server 9).
    Pve9,
}

/// A `pve-manager` version such as `9.2.11`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PveVersion {
    pub major: u16,
    pub minor: u16,
    /// `None` when given as `MAJOR.MINOR` only.
    pub patch: Option<u16>,
}

impl PveVersion {
    /// The release pvesim plays unless told otherwise (the current 9.x).
    pub const CURRENT: PveVersion = PveVersion {
        major: 9,
        minor: 2,
        patch: Some(11),
    };

    pub const fn new(major: u16, minor: u16, patch: u16) -> PveVersion {
        PveVersion {
            major,
            minor,
            patch: Some(patch),
        }
    }

    /// Whether this release is `major.minor.patch` or later (`MAJOR.MINOR` counts as `.0`).
    /// For differences inside a major release, e.g. a fix that shipped in a point release.
    pub fn at_least(&self, major: u16, minor: u16, patch: u16) -> bool {
        (self.major, self.minor, self.patch.unwrap_or(0)) >= (major, minor, patch)
    }

    pub fn generation(&self) -> Generation {
        if self.major == 8 {
            Generation::Pve8
        } else {
            Generation::Pve9
        }
    }

    /// `MAJOR.MINOR`, as `/version` reports it in `release`.
    pub fn release(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

impl Default for PveVersion {
    fn default() -> Self {
        PveVersion::CURRENT
    }
}

impl fmt::Display for PveVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if let Some(p) = self.patch {
            write!(f, ".{p}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum VersionError {
    #[error("invalid PVE version '{0}': expected MAJOR.MINOR[.PATCH], e.g. 9.2.11")]
    Syntax(String),
    #[error("PVE version '{0}' is not simulated: pvesim plays PVE 8.x and 9.x")]
    Unsupported(String),
}

impl FromStr for PveVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || VersionError::Syntax(s.to_string());
        let mut parts = s.trim().split('.');
        let mut num = |required: bool| -> Result<Option<u16>, VersionError> {
            match parts.next() {
                Some(p) => p.parse().map(Some).map_err(|_| syntax()),
                None if required => Err(syntax()),
                None => Ok(None),
            }
        };
        let major = num(true)?.ok_or_else(syntax)?;
        let minor = num(true)?.ok_or_else(syntax)?;
        let patch = num(false)?;
        if parts.next().is_some() {
            return Err(syntax());
        }
        if !(8..=9).contains(&major) {
            return Err(VersionError::Unsupported(s.to_string()));
        }
        Ok(PveVersion {
            major,
            minor,
            patch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Generation, PveVersion, VersionError};

    #[test]
    fn parses_and_prints_pve_versions() {
        let v: PveVersion = "8.4.1".parse().unwrap();
        assert_eq!(
            (v.generation(), v.release()),
            (Generation::Pve8, "8.4".into())
        );
        assert_eq!(v.to_string(), "8.4.1");
        let v: PveVersion = "9.0".parse().unwrap();
        assert_eq!(
            (v.generation(), v.to_string()),
            (Generation::Pve9, "9.0".into())
        );
        assert_eq!(PveVersion::default().to_string(), "9.2.11");
        assert!(matches!(
            "9".parse::<PveVersion>(),
            Err(VersionError::Syntax(_))
        ));
        assert!(matches!(
            "9.x".parse::<PveVersion>(),
            Err(VersionError::Syntax(_))
        ));
        assert!(matches!(
            "9.1.2.3".parse::<PveVersion>(),
            Err(VersionError::Syntax(_))
        ));
        let v: PveVersion = "8.2".parse().unwrap();
        assert!(v.at_least(8, 2, 0) && !v.at_least(8, 2, 8));
        assert!(PveVersion::new(8, 2, 8).at_least(8, 2, 8));
        assert!(PveVersion::CURRENT.at_least(8, 2, 8));
        assert!(matches!(
            "7.4".parse::<PveVersion>(),
            Err(VersionError::Unsupported(_))
        ));
    }
}
