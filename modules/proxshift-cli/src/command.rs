//! A command line to run (`ansible-playbook …`) and its shell-quoted form for `--dry-run`.

use serde::Serialize;

/// A program with its arguments, exactly as it will be executed (no shell involved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command {
    /// Environment set for the run, shown as `K=V` before the program.
    pub env: Vec<(String, String)>,
    pub program: String,
    pub args: Vec<String>,
}

impl Command {
    pub fn new(program: impl Into<String>) -> Self {
        Command {
            env: Vec::new(),
            program: program.into(),
            args: Vec::new(),
        }
    }

    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<I, S>(mut self, items: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(items.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// `program` followed by `args`.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.program.clone())
            .chain(self.args.iter().cloned())
            .collect()
    }

    /// The command as a POSIX shell would need it typed: pasting it runs exactly this argv.
    pub fn shell(&self) -> String {
        self.env
            .iter()
            .map(|(k, v)| format!("{k}={}", shell_quote(v)))
            .chain(self.argv().iter().map(|a| shell_quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Quote one word for a POSIX shell; words made only of safe characters stay bare.
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        // Inside single quotes nothing is special but the quote itself: close, escape it, reopen.
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("cluster_name=lab-sno"), "cluster_name=lab-sno");
        assert_eq!(shell_quote("inventory/"), "inventory/");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_quote("x;rm -rf /"), "'x;rm -rf /'");
        assert_eq!(shell_quote("{\"a\":1}"), "'{\"a\":1}'");
        assert_eq!(shell_quote("*"), "'*'");
        assert_eq!(shell_quote("~/inv"), "'~/inv'");
    }

    #[test]
    fn shell_form_round_trips_through_sh() {
        // The printed form must give back the same environment and argv when a real shell parses it.
        let words = [
            "plain",
            "with space",
            "it's",
            "$HOME",
            "",
            "a\"b",
            "tab\there",
            "new\nline",
        ];
        let cmd = Command::new("sh")
            .env("PS_X", "x y'z")
            .args(["-c", r#"printf '%s\n' "$PS_X" "$@""#, "sh"])
            .args(words);
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd.shell())
            .output()
            .expect("sh runs");
        let text = String::from_utf8(out.stdout).unwrap();
        let expected: String = std::iter::once("x y'z")
            .chain(words)
            .map(|a| format!("{a}\n"))
            .collect();
        assert_eq!(text, expected);
    }
}
