//! Plain-text tables with aligned columns; colour only when asked for.

use crate::style::{paint, Style};

/// One cell: its text and an optional colour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub style: Option<Style>,
}

impl Cell {
    pub fn styled(text: impl Into<String>, style: Style) -> Self {
        Cell {
            text: text.into(),
            style: Some(style),
        }
    }
}

impl<T: Into<String>> From<T> for Cell {
    fn from(text: T) -> Self {
        Cell {
            text: text.into(),
            style: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
    /// Columns whose text is right-aligned (counts).
    right: Vec<usize>,
}

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    pub fn right_align(mut self, columns: &[usize]) -> Self {
        self.right = columns.to_vec();
        self
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Columns separated by two spaces, header first, no trailing blanks.
    pub fn render(&self, colour: bool) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, c) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.text.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self
            .headers
            .iter()
            .map(|h| Cell::styled(h.clone(), Style::Bold))
            .collect();
        for row in std::iter::once(&header).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let empty = Cell::from("");
                let cell = row.get(i).unwrap_or(&empty);
                let pad = width - cell.text.chars().count();
                let last = i + 1 == n;
                let text = match cell.style {
                    Some(s) => paint(&cell.text, s, colour),
                    None => cell.text.clone(),
                };
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right.contains(&i) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(&text);
                } else {
                    line.push_str(&text);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_without_colour() {
        let mut t = Table::new(["NAME", "N", "NOTE"]).right_align(&[1]);
        t.row(vec!["lab-sno".into(), "1".into(), "".into()]);
        t.row(vec![
            "prod-ha".into(),
            "12".into(),
            Cell::styled("x", Style::Red),
        ]);
        assert_eq!(
            t.render(false),
            "NAME      N  NOTE\nlab-sno   1\nprod-ha  12  x\n"
        );
    }

    #[test]
    fn colour_does_not_break_alignment() {
        let mut t = Table::new(["A", "B"]);
        t.row(vec![Cell::styled("running", Style::Green), "x".into()]);
        t.row(vec!["stopped".into(), "y".into()]);
        let out = t.render(true);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "\u{1b}[32mrunning\u{1b}[0m  x");
        assert_eq!(lines[2], "stopped  y");
        assert!(lines[0].starts_with("\u{1b}[1mA\u{1b}[0m"));
    }
}
