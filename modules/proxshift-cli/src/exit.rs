//! Exit codes of `proxshift` and the error type that carries one.

use std::fmt;

/// Everything worked (for a playbook: `ansible-playbook` exited 0).
pub const OK: i32 = 0;
/// The playbook ran and failed (any non-zero `ansible-playbook` exit; the JSON output keeps its code).
pub const PLAYBOOK_FAILED: i32 = 1;
/// Bad command line: unknown option, missing cluster, unknown phase, destructive run not confirmed.
/// (clap uses 2 for its own parse errors too.)
pub const USAGE: i32 = 2;
/// The inventory cannot be read, or the cluster is not in it, or the project has no such playbook.
pub const INVENTORY: i32 = 3;
/// `ansible-playbook` / `ansible-inventory` is not installed (not on PATH, not in the project's .venv).
pub const TOOL_NOT_FOUND: i32 = 4;
/// The run was interrupted (Ctrl-C); 128 + SIGINT, as shells report it.
pub const INTERRUPTED: i32 = 130;

/// Every documented exit code with its meaning (printed by `--help` and the README).
pub const TABLE: &[(i32, &str)] = &[
    (OK, "success"),
    (PLAYBOOK_FAILED, "the playbook ran and failed"),
    (
        USAGE,
        "usage error (bad option, unknown phase, destructive run not confirmed)",
    ),
    (
        INVENTORY,
        "inventory unreadable, cluster not in the inventory, or playbook missing",
    ),
    (
        TOOL_NOT_FOUND,
        "ansible-playbook / ansible-inventory not found",
    ),
    (INTERRUPTED, "interrupted (Ctrl-C)"),
];

/// An error that ends the command with a specific exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

impl CliError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
        }
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }
    pub fn inventory(message: impl Into<String>) -> Self {
        Self::new(INVENTORY, message)
    }
    pub fn tool(message: impl Into<String>) -> Self {
        Self::new(TOOL_NOT_FOUND, message)
    }
    /// The stable name used in JSON output (`"error": {"kind": ...}`).
    pub fn kind(&self) -> &'static str {
        match self.code {
            USAGE => "usage",
            INVENTORY => "inventory",
            TOOL_NOT_FOUND => "tool_not_found",
            INTERRUPTED => "interrupted",
            PLAYBOOK_FAILED => "playbook_failed",
            _ => "error",
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// The `--help` epilogue listing the exit codes.
pub fn help_text() -> String {
    let mut s = String::from("Exit codes:\n");
    for (code, what) in TABLE {
        s.push_str(&format!("  {code:<4} {what}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_documented() {
        let mut codes: Vec<i32> = TABLE.iter().map(|(c, _)| *c).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), TABLE.len());
        let help = help_text();
        for (code, what) in TABLE {
            assert!(help.contains(&format!("{code}")) && help.contains(what));
        }
        assert_eq!(CliError::tool("x").kind(), "tool_not_found");
        assert_eq!(CliError::inventory("x").code, 3);
    }
}
