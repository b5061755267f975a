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
    /// How Falco reports the same problem, where it does (its `-V` results).
    pub falco: Option<Box<AsFalco>>,
}

/// A diagnostic as Falco's loader files it: its code (falco_load_result.cpp), the chain of
/// items it is about (outermost first, e.g. rule 'x' then exception 'ex1'), Falco's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsFalco {
    pub code: &'static str,
    pub items: Vec<(&'static str, String)>,
    pub message: String,
}

impl Diagnostic {
    pub fn error(file: &str, line: u32, col: u32, msg: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_string(),
            line,
            col,
            msg: msg.into(),
            falco: None,
        }
    }
    pub fn warning(file: &str, line: u32, col: u32, msg: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            file: file.to_string(),
            line,
            col,
            msg: msg.into(),
            falco: None,
        }
    }
    /// Says how Falco reports it: `code`, the item (type, name), Falco's message.
    pub fn as_falco(
        mut self,
        code: &'static str,
        item: (&'static str, &str),
        message: impl Into<String>,
    ) -> Self {
        let items = vec![(item.0, item.1.to_string())];
        self.falco = Some(Box::new(AsFalco { code, items, message: message.into() }));
        self
    }
    /// Adds an inner item to the Falco chain (an exception inside its rule).
    pub fn within(mut self, item: (&'static str, &str)) -> Self {
        if let Some(f) = &mut self.falco {
            f.items.push((item.0, item.1.to_string()));
        }
        self
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
