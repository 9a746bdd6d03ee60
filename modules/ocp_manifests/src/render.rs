//! Rendering with minijinja. The built-in templates are compiled into the binary; `template_dir`
//! may replace either of them (and add helper templates they include).
//!
//! Values reach YAML only through filters that emit well-formed YAML: `yaml` (a JSON scalar or flow
//! collection — JSON is YAML, so quotes, newlines and `: ` in secrets are safe), `yaml_block(n)` (a
//! block mapping/list indented by n spaces, via a YAML emitter) and `yaml_text(n)` (a literal block
//! for multi-line text such as PEM, falling back to `yaml` when a literal block cannot hold it).

use std::path::{Path, PathBuf};

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value as JValue};
use serde_json::Value;

use crate::model::Plan;

pub const INSTALL_CONFIG: &str = "install-config.yaml";
pub const AGENT_CONFIG: &str = "agent-config.yaml";
const BUILTIN: [(&str, &str); 2] = [
    (
        "install-config.yaml.j2",
        include_str!("../templates/install-config.yaml.j2"),
    ),
    (
        "agent-config.yaml.j2",
        include_str!("../templates/agent-config.yaml.j2"),
    ),
];

/// Why the manifests could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("built-in template {name}: {source}")]
    Builtin {
        name: &'static str,
        #[source]
        source: Error,
    },
    #[error("template_dir {}: {source}", .dir.display())]
    TemplateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("template {}: {source}", .path.display())]
    ReadTemplate {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `{:#}`: minijinja's alternate form shows where in the template the syntax error is.
    #[error("template {}: {source:#}", .path.display())]
    ParseTemplate {
        path: PathBuf,
        #[source]
        source: Error,
    },
    #[error("rendering {name}: {}", with_causes(.source))]
    Render {
        name: String,
        #[source]
        source: Error,
    },
}

/// The error and every cause under it, `: `-separated (minijinja puts the real reason, such as
/// a filter's own error, in the causes).
fn with_causes(e: &Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    msg
}

fn to_json(v: &JValue) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("value cannot be written as YAML: {e}"),
        )
    })
}

/// The `yaml` filter: a JSON-compatible YAML scalar (or flow collection).
pub fn yaml_filter(v: JValue) -> Result<String, Error> {
    if v.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            "yaml filter applied to an undefined value",
        ));
    }
    serde_json::to_string(&to_json(&v)?)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))
}

/// The `yaml_block(indent)` filter: a newline, then the value as block YAML indented by `indent`.
pub fn yaml_block_filter(v: JValue, indent: usize) -> Result<String, Error> {
    let json = to_json(&v)?;
    if !(json.is_object() || json.is_array())
        || json.as_object().is_some_and(|m| m.is_empty())
        || json.as_array().is_some_and(|a| a.is_empty())
    {
        // Scalars and empty collections stay on the key's line.
        return Ok(format!(
            " {}",
            serde_json::to_string(&json).unwrap_or_default()
        ));
    }
    let text = serde_yaml_ng::to_string(&json)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let pad = " ".repeat(indent);
    Ok(text
        .trim_end()
        .lines()
        .map(|l| format!("\n{pad}{l}"))
        .collect())
}

/// The `yaml_text(indent)` filter: ` |-` plus the text indented, when a literal block holds it
/// exactly; otherwise ` "json string"`.
pub fn yaml_text_filter(v: JValue, indent: usize) -> Result<String, Error> {
    let s = v
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::new(ErrorKind::InvalidOperation, "yaml_text needs a string"))?;
    let printable = s
        .chars()
        .all(|c| c == '\n' || (!c.is_control() && c != '\u{feff}'));
    let literal_ok = printable
        && !s.is_empty()
        && !s.starts_with([' ', '\n'])
        && !s
            .lines()
            .any(|l| l.ends_with([' ', '\t']) || l.starts_with('\t'))
        && !s.ends_with("\n\n");
    if !literal_ok {
        return Ok(format!(" {}", yaml_filter(JValue::from(s))?));
    }
    let chomp = if s.ends_with('\n') { "|" } else { "|-" };
    let pad = " ".repeat(indent);
    let body: String = s
        .trim_end_matches('\n')
        .lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("\n{pad}{l}")
            }
        })
        .collect();
    Ok(format!(" {chomp}{body}"))
}

pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build();
    env.set_syntax(syntax.expect("default delimiters are valid"));
    // A typo in a user template must fail, not render an empty value.
    env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
    env.add_filter("yaml", yaml_filter);
    env.add_filter("yaml_block", yaml_block_filter);
    env.add_filter("yaml_text", yaml_text_filter);
    env
}

/// Render both files. With `template_dir`, every `*.j2` there is loaded and overrides the built-in
/// template of the same name.
pub fn render(plan: &Plan, template_dir: Option<&Path>) -> Result<(String, String), RenderError> {
    let mut env = environment();
    for (name, text) in BUILTIN {
        env.add_template(name, text)
            .map_err(|source| RenderError::Builtin { name, source })?;
    }
    if let Some(dir) = template_dir {
        let entries = std::fs::read_dir(dir).map_err(|source| RenderError::TemplateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "j2"))
            .collect();
        files.sort();
        for path in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let text =
                std::fs::read_to_string(&path).map_err(|source| RenderError::ReadTemplate {
                    path: path.clone(),
                    source,
                })?;
            env.add_template_owned(name.clone(), text)
                .map_err(|source| RenderError::ParseTemplate { path, source })?;
        }
    }
    let ctx = JValue::from(Serde(plan));
    let one = |name: &str| -> Result<String, RenderError> {
        env.get_template(name)
            .and_then(|t| t.render(&ctx))
            .map_err(|source| RenderError::Render {
                name: name.to_string(),
                source,
            })
    };
    Ok((one("install-config.yaml.j2")?, one("agent-config.yaml.j2")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    #[test]
    fn yaml_filter_survives_hostile_strings() {
        for s in [
            "it's \"quoted\"",
            "a: b\n- c",
            "#comment",
            "yes",
            "null",
            "~",
            "0x1F",
            "{\"auths\":{}}",
            "tab\there",
            "\u{7}bell",
            "ünï",
        ] {
            let out = yaml_filter(JValue::from(s)).unwrap();
            assert_eq!(parse(&format!("k: {out}"))["k"], Value::from(s), "{out}");
        }
        assert_eq!(yaml_filter(JValue::from(5)).unwrap(), "5");
    }

    #[test]
    fn yaml_block_and_text_round_trip() {
        let v = serde_json::json!({"a": ["yes", "on", "1.0", {"b": "c: d"}], "e": true});
        let out = yaml_block_filter(JValue::from(Serde(&v)), 2).unwrap();
        assert_eq!(parse(&format!("root:{out}\n"))["root"], v);
        for s in [
            "line1\nline2\n",
            "no newline",
            "  leading",
            "trailing \nx",
            "a\n\n\nb\n",
            "x\n\n",
        ] {
            let out = yaml_text_filter(JValue::from(s), 2).unwrap();
            assert_eq!(parse(&format!("t:{out}\n"))["t"], Value::from(s), "{out:?}");
        }
        assert!(yaml_text_filter(JValue::from("a\nb\n"), 2)
            .unwrap()
            .starts_with(" |\n  a"));
    }

    #[test]
    fn a_broken_user_template_keeps_its_cause_and_location() {
        let dir = std::env::temp_dir().join(format!("ocp-render-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("agent-config.yaml.j2"), "x: {{ unclosed\n").unwrap();
        let plan = crate::plan::plan(&crate::plan::fixtures::options(
            &crate::plan::fixtures::compact(),
        ))
        .plan
        .unwrap();
        let err = render(&plan, Some(&dir)).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        let RenderError::ParseTemplate { path, source } = &err else {
            panic!("{err:?}");
        };
        assert!(path.ends_with("agent-config.yaml.j2"));
        assert_eq!(source.kind(), ErrorKind::SyntaxError);
        // The message is minijinja's alternate form (with the template location), as before.
        assert_eq!(
            err.to_string(),
            format!("template {}: {source:#}", path.display())
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}
