//! Colour decisions and ANSI painting. Colour only on a terminal, never with NO_COLOR set (non-empty)
//! or TERM=dumb, unless `--color always`.

use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Bold,
    Dim,
    Red,
    Green,
    Yellow,
    Cyan,
}

/// Whether to colour a stream: the choice, whether the stream is a terminal, and the environment.
pub fn use_colour(
    choice: ColorChoice,
    is_terminal: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            is_terminal
                && env("NO_COLOR").is_none_or(|v| v.is_empty())
                && env("TERM").as_deref() != Some("dumb")
        }
    }
}

pub fn paint(text: &str, style: Style, colour: bool) -> String {
    if !colour || text.is_empty() {
        return text.to_string();
    }
    let code = match style {
        Style::Bold => "1",
        Style::Dim => "2",
        Style::Red => "31",
        Style::Green => "32",
        Style::Yellow => "33",
        Style::Cyan => "36",
    };
    format!("\u{1b}[{code}m{text}\u{1b}[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn colour_rules() {
        let none = env(&[]);
        assert!(use_colour(ColorChoice::Auto, true, &none));
        assert!(!use_colour(ColorChoice::Auto, false, &none));
        assert!(!use_colour(
            ColorChoice::Auto,
            true,
            &env(&[("NO_COLOR", "1")])
        ));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(use_colour(
            ColorChoice::Auto,
            true,
            &env(&[("NO_COLOR", "")])
        ));
        assert!(!use_colour(
            ColorChoice::Auto,
            true,
            &env(&[("TERM", "dumb")])
        ));
        assert!(use_colour(
            ColorChoice::Always,
            false,
            &env(&[("NO_COLOR", "1")])
        ));
        assert!(!use_colour(ColorChoice::Never, true, &none));
        assert_eq!(paint("x", Style::Red, false), "x");
        assert_eq!(paint("x", Style::Red, true), "\u{1b}[31mx\u{1b}[0m");
    }
}
