//! Aligned columns for the list commands: each column as wide as its widest cell among the rows
//! printed so far (so rows streamed later, as `audit tail --follow` prints them, only ever
//! widen it); the last column, free text, is never padded.

/// The widths of a listing's columns, widened by each batch of rows it prints.
#[derive(Default)]
pub struct Columns {
    widths: Vec<usize>,
}

impl Columns {
    /// Prints `rows` (cells of each line), every column but the last padded to its width.
    pub fn print(&mut self, rows: &[Vec<String>]) {
        for line in self.lay_out(rows) {
            say!("{line}");
        }
    }

    fn lay_out(&mut self, rows: &[Vec<String>]) -> Vec<String> {
        // Cells made terminal-safe first, so that what is measured is what is shown.
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| crate::terminal_safe(c).into_owned())
                    .collect()
            })
            .collect();
        for row in &rows {
            let padded = row.len().saturating_sub(1);
            if self.widths.len() < padded {
                self.widths.resize(padded, 0);
            }
            for (width, cell) in self.widths.iter_mut().zip(&row[..padded]) {
                *width = (*width).max(cell.chars().count());
            }
        }
        rows.iter()
            .map(|row| {
                let mut line = String::new();
                for (i, cell) in row.iter().enumerate() {
                    if i > 0 {
                        line.push_str("  ");
                    }
                    line.push_str(cell);
                    if i + 1 < row.len() {
                        let pad = self.widths[i].saturating_sub(cell.chars().count());
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                }
                line.trim_end().to_string()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(row: &[&str]) -> Vec<String> {
        row.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_and_only_widen() {
        let mut c = Columns::default();
        let first = c.lay_out(&[
            cells(&["1", "reader", "read_file", "ok"]),
            cells(&["12", "a-much-longer-agent", "glob", "refused: a reason"]),
        ]);
        assert_eq!(
            first,
            [
                "1   reader               read_file  ok",
                "12  a-much-longer-agent  glob       refused: a reason",
            ]
        );
        // A later batch keeps the widths, and widens a column a longer cell needs.
        let later = c.lay_out(&[cells(&["123", "x", "search_files_regex", "ok"])]);
        assert_eq!(later, ["123  x                    search_files_regex  ok"]);
        // A cell with a control character is measured as shown (escaped).
        let safe = Columns::default().lay_out(&[cells(&["a\u{1b}b", "c"]), cells(&["d", "e"])]);
        assert_eq!(safe, ["a\\u001bb  c", "d         e"]);
    }
}
