//! Falco's rule language for Harrier.
pub mod events;
pub mod fields;
pub use fields::{Field, FieldArg, FieldInfo, FieldType, FIELDS};
pub mod ast;
pub mod compile;
pub mod diag;
pub mod expr;
pub mod loader;
pub mod matchers;
pub mod output;
pub mod parser;
pub mod ruleset;
pub mod testing;
pub mod value;
pub mod yaml;

/// Harrier's default ruleset (rules/harrier_rules.yaml), in Falco's language.
pub const DEFAULT_RULES: &str = include_str!("../rules/harrier_rules.yaml");
/// The name the default ruleset's diagnostics use.
pub const DEFAULT_RULES_NAME: &str = "harrier_rules.yaml";
pub mod docs;
