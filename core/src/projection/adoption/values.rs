//! Strict reading of one stored row of the JavaScript writer's tables, as the adoption's
//! read statements return it (`js_writer::read_rows`): the `rowid`, then for each column its
//! storage class and its text. The tables are not `STRICT`, so a column may hold any class;
//! each accessor accepts exactly the class the writer stores there and refuses anything else,
//! naming the table, the row and the column.

use super::js_writer::ColumnInfo;
use super::refusal::{AdoptionRefused, ValueProblem};

/// One row read by `js_writer::read_rows`.
pub(super) struct StoredRow<'a> {
    table: &'static str,
    columns: &'static [ColumnInfo],
    rowid: i64,
    cells: &'a [Option<String>],
}

impl<'a> StoredRow<'a> {
    /// The row `raw` of `table`; a row of another width is an executor's mistake, refused.
    pub(super) fn new(
        table: &'static str,
        columns: &'static [ColumnInfo],
        raw: &'a [Option<String>],
    ) -> Result<Self, AdoptionRefused> {
        let rowid = match raw {
            [Some(rowid), cells @ ..] if cells.len() == 2 * columns.len() => rowid.parse().ok(),
            _ => None,
        };
        let rowid = rowid.ok_or_else(|| AdoptionRefused::Shape {
            table,
            reason: format!(
                "a row read as {} values, expected the rowid and {} pairs",
                raw.len(),
                columns.len()
            ),
        })?;
        Ok(StoredRow {
            table,
            columns,
            rowid,
            cells: &raw[1..],
        })
    }

    /// A refusal naming this row and column `index`.
    pub(super) fn refuse(&self, index: usize, problem: ValueProblem) -> AdoptionRefused {
        AdoptionRefused::Value {
            table: self.table,
            rowid: self.rowid,
            column: self.columns[index].0,
            problem,
        }
    }

    /// Column `index`: its storage class and its text (`None` for NULL).
    fn cell(&self, index: usize) -> (&str, Option<&'a str>) {
        let kind = self.cells[2 * index].as_deref().unwrap_or("null");
        (kind, self.cells[2 * index + 1].as_deref())
    }

    fn expect(
        &self,
        index: usize,
        expected: &'static str,
    ) -> Result<Option<&'a str>, AdoptionRefused> {
        match self.cell(index) {
            ("null", _) => Ok(None),
            (kind, text) if kind == expected => Ok(text),
            (found, _) => Err(self.refuse(
                index,
                ValueProblem::WrongType {
                    expected,
                    found: found.to_owned(),
                },
            )),
        }
    }

    fn required<T>(
        &self,
        index: usize,
        value: Option<T>,
        expected: &'static str,
    ) -> Result<T, AdoptionRefused> {
        value.ok_or_else(|| {
            self.refuse(
                index,
                ValueProblem::WrongType {
                    expected,
                    found: "null".to_owned(),
                },
            )
        })
    }

    /// Column `index` as TEXT or NULL.
    pub(super) fn optional_text(&self, index: usize) -> Result<Option<&'a str>, AdoptionRefused> {
        self.expect(index, "text")
    }

    /// Column `index` as TEXT.
    pub(super) fn text(&self, index: usize) -> Result<&'a str, AdoptionRefused> {
        let value = self.optional_text(index)?;
        self.required(index, value, "text")
    }

    /// Column `index` as a non-negative INTEGER.
    pub(super) fn integer(&self, index: usize) -> Result<i64, AdoptionRefused> {
        let text = self.expect(index, "integer")?;
        let text = self.required(index, text, "integer")?;
        let value: i64 = text.parse().map_err(|_| {
            self.refuse(
                index,
                ValueProblem::WrongType {
                    expected: "integer",
                    found: format!("text `{text}`"),
                },
            )
        })?;
        if value < 0 {
            return Err(self.refuse(index, ValueProblem::OutOfRange(value)));
        }
        Ok(value)
    }

    /// Column `index` must be NULL.
    pub(super) fn null(&self, index: usize) -> Result<(), AdoptionRefused> {
        match self.cell(index) {
            ("null", _) => Ok(()),
            _ => Err(self.refuse(index, ValueProblem::NotNull)),
        }
    }
}
