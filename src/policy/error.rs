//! The error of a policy that cannot be used: the file (or preset, or variable) at
//! fault, the line and column when known, and the file's other errors. Its own module,
//! so that everything that reads a policy (loading, host paths, the environment
//! overrides) depends on it and not on one another.

use std::fmt;

/// A policy that cannot be used, located as precisely as the problem allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyError {
    /// The file (or `preset NAME`) at fault.
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    /// The file's other errors, in order, when there are more (one a line when shown).
    pub more: Vec<PolicyError>,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}", self.message)?;
        for more in &self.more {
            write!(f, "\n{more}")?;
        }
        Ok(())
    }
}

/// An error at `file` (and `line`, when known), with no column.
pub fn error(file: &str, line: Option<usize>, message: String) -> PolicyError {
    PolicyError {
        file: file.to_string(),
        line,
        column: None,
        message,
        more: Vec::new(),
    }
}

impl PolicyError {
    /// Every error of `errors` (their own `more` included) as one: the first in file
    /// order, line and column, with the rest in `more`, in that order. `Ok` when there
    /// are none.
    pub fn gather(errors: Vec<PolicyError>) -> Result<(), PolicyError> {
        let mut flat = Vec::new();
        for mut error in errors {
            let more = std::mem::take(&mut error.more);
            flat.push(error);
            flat.extend(more);
        }
        let mut files: Vec<String> = Vec::new();
        for error in &flat {
            if !files.contains(&error.file) {
                files.push(error.file.clone());
            }
        }
        flat.sort_by_key(|error| {
            (
                files.iter().position(|file| *file == error.file),
                error.line.unwrap_or(usize::MAX),
                error.column.unwrap_or(0),
            )
        });
        flat.dedup();
        let mut flat = flat.into_iter();
        match flat.next() {
            None => Ok(()),
            Some(mut first) => {
                first.more = flat.collect();
                Err(first)
            }
        }
    }
}
