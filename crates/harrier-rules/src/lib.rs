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
pub mod value;
pub mod yaml;
pub mod testing;
