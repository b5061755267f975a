//! Diagnostics: every load error or warning names file:line:column.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub msg: String,
}

impl Diagnostic {
    pub fn error(file: &str, line: u32, col: u32, msg: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Error, file: file.to_string(), line, col, msg: msg.into() }
    }
    pub fn warning(file: &str, line: u32, col: u32, msg: impl Into<String>) -> Diagnostic {
        Diagnostic { severity: Severity::Warning, file: file.to_string(), line, col, msg: msg.into() }
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_error() { "" } else { "warning: " };
        write!(f, "{}:{}:{}: {kind}{}", self.file, self.line, self.col, self.msg)
    }
}
