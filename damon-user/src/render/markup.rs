//! The syntax of a document's tables and notes, one implementation a format: aligned
//! [`Plain`] text and [`Markdown`]. A renderer writes a table once through [`Markup`]; each
//! format supplies only how a header, a row and a note look.
use std::fmt::Write as _;

/// How a column's cells sit in aligned text (Markdown: its divider, `---` or `--:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table column: its alignment and, in aligned text, its width and the spaces before it.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub align: Align,
    pub width: usize,
    /// Spaces between this column and the one before (aligned text).
    pub gap: usize,
}

impl Column {
    pub const fn left(width: usize) -> Column {
        Column {
            align: Align::Left,
            width,
            gap: 1,
        }
    }

    pub const fn right(width: usize) -> Column {
        Column {
            align: Align::Right,
            width,
            gap: 1,
        }
    }

    /// The same column `gap` spaces after the one before.
    pub const fn after_gap(self, gap: usize) -> Column {
        Column { gap, ..self }
    }
}

/// A document format's syntax for tables, code and notes.
pub trait Markup {
    /// A table's heading line(s), ending with a newline.
    fn table_header<S: AsRef<str>>(&self, titles: &[S], columns: &[Column]) -> String;
    /// One row of a table, ending with a newline.
    fn table_row(&self, cells: &[String], columns: &[Column]) -> String;
    /// A name as code.
    fn code(&self, text: &str) -> String;
    /// A remark under a table, ending with a newline.
    fn note(&self, text: &str) -> String;

    /// Rows of a table into `out`.
    fn rows<R: AsRef<[String]>>(
        &self,
        out: &mut String,
        rows: impl IntoIterator<Item = R>,
        columns: &[Column],
    ) {
        for r in rows {
            out.push_str(&self.table_row(r.as_ref(), columns));
        }
    }
}

/// Aligned text for a terminal or a mail: cells padded to their columns' widths.
pub struct Plain;

/// Markdown: pipe tables, code in backticks, notes in italics.
pub struct Markdown;

impl Plain {
    fn line<S: AsRef<str>>(cells: &[S], columns: &[Column]) -> String {
        let mut line = String::new();
        for (i, (cell, c)) in cells.iter().zip(columns).enumerate() {
            let (cell, w) = (cell.as_ref(), c.width);
            if i > 0 {
                line.push_str(&" ".repeat(c.gap));
            }
            let _ = match c.align {
                Align::Left => write!(line, "{cell:<w$}"),
                Align::Right => write!(line, "{cell:>w$}"),
            };
        }
        line.truncate(line.trim_end().len());
        line.push('\n');
        line
    }
}

impl Markup for Plain {
    fn table_header<S: AsRef<str>>(&self, titles: &[S], columns: &[Column]) -> String {
        Plain::line(titles, columns)
    }

    fn table_row(&self, cells: &[String], columns: &[Column]) -> String {
        Plain::line(cells, columns)
    }

    fn code(&self, text: &str) -> String {
        text.to_owned()
    }

    fn note(&self, text: &str) -> String {
        format!("({text})\n")
    }
}

impl Markdown {
    fn line<S: AsRef<str>>(cells: &[S]) -> String {
        let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
        format!("| {} |\n", cells.join(" | "))
    }
}

impl Markup for Markdown {
    fn table_header<S: AsRef<str>>(&self, titles: &[S], columns: &[Column]) -> String {
        let divider: String = columns
            .iter()
            .map(|c| match c.align {
                Align::Left => "---|",
                Align::Right => "--:|",
            })
            .collect();
        format!("{}|{divider}\n", Markdown::line(titles))
    }

    fn table_row(&self, cells: &[String], _columns: &[Column]) -> String {
        Markdown::line(cells)
    }

    fn code(&self, text: &str) -> String {
        format!("`{text}`")
    }

    fn note(&self, text: &str) -> String {
        format!("\n_{text}_\n")
    }
}
