//! The OpenShift version: readable, and one this module renders (4.14 or later).

use super::context::{Ctx, Findings, Staged};

/// (major, minor) of `4.16`, `4.16.3`, `4.17.0-rc.1`.
pub fn parse_version(v: &str) -> Option<(u32, u32)> {
    let mut it = v.trim().split(['.', '-', '+']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// The minor version; 14 when the version is unreadable so later rules still run.
pub(super) fn check(cx: &Ctx) -> Staged<u32> {
    let mut f = Findings::default();
    let o = cx.o;
    let version = parse_version(&o.version);
    match version {
        None => f.err(
            "version",
            "version-format",
            format!(
                "'{}' is not an OpenShift version like 4.16 or 4.16.3",
                o.version
            ),
        ),
        Some((4, m)) if m >= 14 => {}
        Some(_) => f.err(
            "version",
            "version-supported",
            format!(
                "OpenShift {} is not supported; this module renders 4.14 or later",
                o.version
            ),
        ),
    }
    f.with(version.map(|v| v.1).unwrap_or(14))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::plan::fixtures::*;

    #[test]
    fn rule_version() {
        fails(
            with(compact(), "version", json!("four")),
            "version",
            "version-format",
        );
        fails(
            with(compact(), "version", json!("4.12")),
            "version",
            "version-supported",
        );
    }
}
