//! Parsing `ansible-playbook`'s default (human) output, line by line: play and task headers, host
//! results and the PLAY RECAP. Pure; colour codes are stripped first.

use serde::Serialize;

/// Remove ANSI escape sequences (ansible colours its output when forced to).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // CSI: parameters and intermediates up to a final byte in @..~.
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The outcome of one task on one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Skipped,
    Ok,
    Changed,
    /// Failed, but the task has `ignore_errors`.
    Ignored,
    Failed,
    Unreachable,
}

/// One meaningful line of output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Play(String),
    /// `TASK [role : name]` (or `RUNNING HANDLER [...]`); `role` is the role's (collection) name.
    Task {
        role: Option<String>,
        name: String,
        handler: bool,
    },
    Result {
        status: Status,
        host: String,
        item: Option<String>,
        /// The `msg` of a failure when the result is one JSON line, else the raw text after `=>`.
        message: Option<String>,
    },
    /// A host result whose JSON is printed over the following lines (`=> {` … `}`), as ansible-core
    /// prints a result holding multi-line or non-ASCII text; see [`ResultBody`].
    ResultOpen {
        status: Status,
        host: String,
        item: Option<String>,
    },
    /// `...ignoring`: the failure just reported is ignored.
    Ignoring,
    /// The running task's tags, printed by proxshift's own callback (see [`TAGS_MARKER`]).
    TaskTags(Vec<String>),
    RecapStart,
    Recap(HostRecap),
    Other,
}

/// One host's line of the PLAY RECAP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostRecap {
    pub host: String,
    pub ok: u32,
    pub changed: u32,
    pub unreachable: u32,
    pub failed: u32,
    pub skipped: u32,
    pub rescued: u32,
    pub ignored: u32,
}

impl HostRecap {
    pub fn problems(&self) -> u32 {
        self.failed + self.unreachable
    }
}

/// `NAME *****` header text between `[` and the last `]`.
fn header(line: &str, prefix: &str) -> Option<String> {
    let rest = line.strip_prefix(prefix)?;
    let rest = rest.trim_end_matches(['*', ' ']);
    let inner = rest.strip_prefix('[')?.strip_suffix(']')?;
    Some(inner.to_string())
}

fn is_role_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.' || c == '-'
        })
}

/// Prefix of the lines the `proxshift_phases` callback prints; they are read, not shown.
pub const TAGS_MARKER: &str = "##proxshift-tags ";

/// Parse one output line (colour already stripped or not).
pub fn parse_line(raw: &str) -> Event {
    let line = strip_ansi(raw);
    let line = line.trim_end();
    if let Some(tags) = line.strip_prefix(TAGS_MARKER) {
        return serde_json::from_str(tags)
            .map(Event::TaskTags)
            .unwrap_or(Event::Other);
    }
    if line.starts_with("PLAY RECAP") {
        return Event::RecapStart;
    }
    if let Some(name) = header(line, "PLAY ") {
        return Event::Play(name);
    }
    for (prefix, handler) in [("TASK ", false), ("RUNNING HANDLER ", true)] {
        if let Some(inner) = header(line, prefix) {
            let (role, name) = match inner.split_once(" : ") {
                // Role names are lower case (`proxshift.proxmox.cluster_vms`); task names are prose.
                Some((r, n)) if is_role_name(r) => (Some(r.to_string()), n.to_string()),
                _ => (None, inner.clone()),
            };
            return Event::Task {
                role,
                name,
                handler,
            };
        }
    }
    if line.trim() == "...ignoring" {
        return Event::Ignoring;
    }
    if let Some(r) = parse_recap(line) {
        return Event::Recap(r);
    }
    parse_result(line).unwrap_or(Event::Other)
}

/// `ok: [host]`, `changed: [host] => (item=x)`, `fatal: [host]: FAILED! => {...}`,
/// `failed: [host] (item=x) => {...}`, `fatal: [host]: UNREACHABLE! => {...}`, `skipping: [host]`.
fn parse_result(line: &str) -> Option<Event> {
    let (word, rest) = line.split_once(": [")?;
    let status = match word {
        "ok" => Status::Ok,
        "changed" => Status::Changed,
        "skipping" => Status::Skipped,
        "fatal" | "failed" => Status::Failed,
        _ => return None,
    };
    let (host, after) = rest.split_once(']')?;
    let status = if after.starts_with(": UNREACHABLE!") {
        Status::Unreachable
    } else {
        status
    };
    let item = after
        .find("(item=")
        .map(|i| &after[i + 6..])
        .and_then(|s| s.rfind(')').map(|j| s[..j].to_string()));
    let payload = after.split_once("=> ").map(|(_, p)| p.trim());
    if payload == Some("{") {
        return Some(Event::ResultOpen {
            status,
            host: host.to_string(),
            item,
        });
    }
    let message = match (status, payload) {
        (Status::Failed | Status::Unreachable, Some(p)) => Some(failure_message(p)),
        _ => None,
    };
    Some(Event::Result {
        status,
        host: host.to_string(),
        item,
        message,
    })
}

/// The JSON lines of a result opened by [`Event::ResultOpen`], up to the `}` that closes it at the
/// start of a line (the body's own lines are indented).
#[derive(Debug, Default)]
pub struct ResultBody {
    text: String,
}

impl ResultBody {
    pub fn new() -> Self {
        ResultBody {
            text: String::from("{"),
        }
    }

    /// Add the next output line; `true` once the result is complete.
    pub fn push(&mut self, raw: &str) -> bool {
        let line = strip_ansi(raw);
        let line = line.trim_end();
        self.text.push('\n');
        self.text.push_str(line);
        line == "}"
    }

    /// The failure's message, read from the whole result.
    pub fn message(&self) -> String {
        failure_message(&self.text)
    }
}

/// What a failed result says, read from its JSON: ansible's `msg` (a list of messages becomes a
/// `- ` line each, the form [`listed_problems`] reads); when the payload is no JSON object with a
/// `msg`, the text itself (shortened).
fn failure_message(payload: &str) -> String {
    use serde_json::Value;
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(payload) {
        match m.get("msg") {
            Some(Value::String(s)) => return s.clone(),
            Some(Value::Array(items)) => {
                let lines: Vec<String> = items
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .map(|item| format!("- {item}"))
                    .collect();
                return lines.join("\n");
            }
            Some(other) => return other.to_string(),
            None => {}
        }
    }
    let mut s: String = payload.chars().take(300).collect();
    if payload.chars().count() > 300 {
        s.push('…');
    }
    s
}

/// The problems a failure message lists, one per `- ` line after an optional header line
/// (`Preflight found 2 problem(s):\n- DNS: …\n- DNS: …`: preflight reports every problem at once);
/// empty when the message is no such list.
pub fn listed_problems(message: &str) -> Vec<String> {
    let mut lines = message.trim().lines();
    let mut items: Vec<String> = Vec::new();
    if let Some(first) = lines.next() {
        if let Some(item) = first.strip_prefix("- ") {
            items.push(item.trim().to_string());
        }
    }
    for line in lines {
        match line.strip_prefix("- ") {
            Some(item) => items.push(item.trim().to_string()),
            // A problem's own text may wrap onto indented lines.
            None if line.starts_with(' ') && !items.is_empty() => {
                let last = items.last_mut().expect("not empty");
                last.push(' ');
                last.push_str(line.trim());
            }
            None => return Vec::new(),
        }
    }
    items
}

/// `host : ok=4 changed=1 unreachable=0 failed=1 skipped=1 rescued=0 ignored=1`.
pub fn parse_recap(line: &str) -> Option<HostRecap> {
    let (host, counts) = line.split_once(" : ")?;
    let host = host.trim();
    if host.is_empty() || host.contains(' ') {
        return None;
    }
    let mut r = HostRecap {
        host: host.to_string(),
        ..Default::default()
    };
    let mut seen = 0;
    for field in counts.split_whitespace() {
        let (k, v) = field.split_once('=')?;
        let v: u32 = v.parse().ok()?;
        match k {
            "ok" => r.ok = v,
            "changed" => r.changed = v,
            "unreachable" => r.unreachable = v,
            "failed" => r.failed = v,
            "skipped" => r.skipped = v,
            "rescued" => r.rescued = v,
            "ignored" => r.ignored = v,
            _ => continue,
        }
        seen += 1;
    }
    // ok/changed/unreachable/failed are always printed; demand them so stray "a : b=1" text is no recap.
    (seen >= 4).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers() {
        assert_eq!(
            parse_line("PLAY [Provision an OpenShift cluster on Proxmox VE] *****"),
            Event::Play("Provision an OpenShift cluster on Proxmox VE".into())
        );
        assert_eq!(
            parse_line("TASK [proxshift.proxmox.cluster_vms : Create the VMs] ****************"),
            Event::Task {
                role: Some("proxshift.proxmox.cluster_vms".into()),
                name: "Create the VMs".into(),
                handler: false
            }
        );
        assert_eq!(
            parse_line("TASK [Build the cluster model] ***"),
            Event::Task {
                role: None,
                name: "Build the cluster model".into(),
                handler: false
            }
        );
        // A plain task whose name contains " : " is not a role task.
        assert_eq!(
            parse_line("TASK [Preflight : VMIDs are free] ***"),
            Event::Task {
                role: None,
                name: "Preflight : VMIDs are free".into(),
                handler: false
            }
        );
        assert!(matches!(
            parse_line("RUNNING HANDLER [demo.coll.r : Restart] ***"),
            Event::Task { handler: true, .. }
        ));
        assert_eq!(parse_line("PLAY RECAP *********"), Event::RecapStart);
        assert_eq!(
            parse_line("##proxshift-tags [\"secrets\", \"preflight\"]"),
            Event::TaskTags(vec!["secrets".into(), "preflight".into()])
        );
        assert_eq!(parse_line("##proxshift-tags nonsense"), Event::Other);
    }

    #[test]
    fn results_with_items_failures_and_colour() {
        assert_eq!(
            parse_line("ok: [localhost]"),
            Event::Result {
                status: Status::Ok,
                host: "localhost".into(),
                item: None,
                message: None
            }
        );
        assert_eq!(
            parse_line("\u{1b}[0;33mchanged: [localhost] => (item=lab-sno-0)\u{1b}[0m"),
            Event::Result {
                status: Status::Changed,
                host: "localhost".into(),
                item: Some("lab-sno-0".into()),
                message: None
            }
        );
        assert_eq!(
            parse_line(
                r#"fatal: [localhost]: FAILED! => {"changed": false, "msg": "node pve9 is offline"}"#
            ),
            Event::Result {
                status: Status::Failed,
                host: "localhost".into(),
                item: None,
                message: Some("node pve9 is offline".into())
            }
        );
        assert_eq!(
            parse_line(
                r#"failed: [localhost] (item=b) => {"ansible_loop_var": "item", "changed": false, "item": "b", "msg": "no"}"#
            ),
            Event::Result {
                status: Status::Failed,
                host: "localhost".into(),
                item: Some("b".into()),
                message: Some("no".into())
            }
        );
        assert!(matches!(
            parse_line(r#"fatal: [pve1]: UNREACHABLE! => {"changed": false, "msg": "ssh: connect", "unreachable": true}"#),
            Event::Result { status: Status::Unreachable, message: Some(m), .. } if m == "ssh: connect"
        ));
        assert!(matches!(
            parse_line("skipping: [localhost]"),
            Event::Result {
                status: Status::Skipped,
                ..
            }
        ));
        assert_eq!(parse_line("...ignoring"), Event::Ignoring);
        assert_eq!(parse_line("    \"msg\": \"ok: [x]\""), Event::Other);
        assert_eq!(
            parse_line("[ERROR]: Task failed: Action failed: x"),
            Event::Other
        );
    }

    #[test]
    fn results_over_several_lines() {
        // ansible-core 2.19 prints a result with multi-line or non-ASCII text indented, over lines.
        assert_eq!(
            parse_line("fatal: [localhost]: FAILED! => {"),
            Event::ResultOpen {
                status: Status::Failed,
                host: "localhost".into(),
                item: None
            }
        );
        assert!(matches!(
            parse_line("failed: [localhost] (item=x) => {"),
            Event::ResultOpen { item: Some(i), .. } if i == "x"
        ));
        let mut body = ResultBody::new();
        for line in [
            "    \"assertion\": \"x | length == 0\",",
            "    \"changed\": false,",
            "    \"msg\": \"Preflight found 2 problem(s):\\n- DNS: a — add it.\\n- DNS: b — add it.\"",
        ] {
            assert!(!body.push(line));
        }
        assert!(body.push("\u{1b}[0;31m}\u{1b}[0m"));
        assert_eq!(
            body.message(),
            "Preflight found 2 problem(s):\n- DNS: a — add it.\n- DNS: b — add it."
        );
        assert_eq!(
            listed_problems(&body.message()),
            ["DNS: a — add it.", "DNS: b — add it."]
        );
    }

    #[test]
    fn messages_and_their_lists() {
        // A list `msg` is one problem per item.
        assert_eq!(
            failure_message(r#"{"msg": ["one", "two"]}"#),
            "- one\n- two"
        );
        assert_eq!(listed_problems("- one\n- two"), ["one", "two"]);
        assert_eq!(failure_message(r#"{"msg": {"a": 1}}"#), r#"{"a":1}"#);
        assert_eq!(failure_message("not json"), "not json");
        // Not a list: nothing listed (the message is the one problem).
        assert!(listed_problems("node pve9 is offline").is_empty());
        assert!(listed_problems("Found:\n- a\nand then prose").is_empty());
        assert_eq!(
            listed_problems("Found 1:\n- a long\n  problem"),
            ["a long problem"]
        );
    }

    #[test]
    fn recap_lines() {
        let r = parse_recap(
            "localhost                  : ok=4    changed=1    unreachable=0    failed=1    skipped=1    rescued=0    ignored=1   ",
        )
        .unwrap();
        assert_eq!(
            r,
            HostRecap {
                host: "localhost".into(),
                ok: 4,
                changed: 1,
                unreachable: 0,
                failed: 1,
                skipped: 1,
                rescued: 0,
                ignored: 1
            }
        );
        assert_eq!(r.problems(), 1);
        // Old cores print fewer fields; still a recap.
        assert!(parse_recap("h : ok=1 changed=0 unreachable=0 failed=0").is_some());
        assert!(parse_recap("note : ok=1").is_none());
        assert!(parse_recap("two words : ok=1 changed=0 unreachable=0 failed=0").is_none());
        assert!(
            matches!(parse_line("\u{1b}[0;32mlocalhost\u{1b}[0m : \u{1b}[0;32mok=2\u{1b}[0m changed=0 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0"), Event::Recap(r) if r.ok == 2)
        );
    }

    #[test]
    fn ansi_stripping() {
        assert_eq!(strip_ansi("\u{1b}[1;31mred\u{1b}[0m plain"), "red plain");
        assert_eq!(strip_ansi("no codes"), "no codes");
    }
}
