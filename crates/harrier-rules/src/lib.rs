//! Falco's rule language for Harrier: rule files in, compiled rules out, evaluated per event
//! without allocating.
//!
//! The pipeline (see ARCHITECTURE-rules.md): YAML ([`yaml`], positions kept) → items
//! ([`loader`]: lists, macros, rules, appends, overrides, exceptions) → condition ASTs
//! ([`parser`]) → compiled expressions ([`compile`], [`expr`]: macros and lists expanded,
//! fields resolved against the table of [`fields`], operators type-checked) → a
//! [`RuleSet`] that indexes rules by event type and evaluates them over an [`EventSource`].
//!
//! # What the integration implements
//!
//! [`EventSource`] gives the rules engine an event's type and its field values. Values are
//! borrowed ([`Value`]): extraction must not allocate. A field with no value on this event
//! (no fd on a `getpid`, no ancestor at that depth) gives nothing, and every comparison
//! on it is false, as in Falco. A multi-valued field (`proc.aname` without an index) gives
//! each value; a comparison holds if it holds for any.
//!
//! ```
//! use harrier_rules::events::EventType;
//! use harrier_rules::ruleset::{LoadOptions, RuleSet};
//! use harrier_rules::{EventSource, Field, FieldArg, Value};
//!
//! /// The integration's decoded event plus what its state tables know.
//! struct Ev<'a> {
//!     syscall: &'a str,
//!     comm: &'a str,
//!     path: Option<&'a str>,
//!     flags: u32,
//!     ancestors: &'a [&'a str],
//! }
//!
//! impl EventSource for Ev<'_> {
//!     fn event_type(&self) -> EventType {
//!         // In real code: the event's syscall number, EventType(nr as u16).
//!         EventType::from_name(self.syscall).unwrap()
//!     }
//!     fn extract(&self, field: Field, arg: &FieldArg, out: &mut dyn FnMut(Value<'_>) -> bool) {
//!         match field {
//!             Field::EvtType => { out(Value::str(self.syscall)); }
//!             Field::ProcName => { out(Value::str(self.comm)); }
//!             // No path, no value: the comparison is false.
//!             Field::FdName => if let Some(p) = self.path { out(Value::str(p)); },
//!             // evt.arg.flags: a flag set rendered by name for `contains`.
//!             Field::EvtArg if arg.key() == Some("flags") => {
//!                 out(Value::Flags { bits: self.flags as u64, renderer: "open_flags" });
//!             }
//!             // proc.aname[N] is one ancestor; proc.aname is each of them.
//!             Field::ProcAname => match arg.index() {
//!                 Some(n) => if let Some(a) = self.ancestors.get(n as usize - 1) { out(Value::str(a)); },
//!                 None => for a in self.ancestors {
//!                     if out(Value::str(a)) { break } // true: a match, stop early
//!                 },
//!             },
//!             _ => {} // fields this source does not know have no value
//!         }
//!     }
//! }
//!
//! let rules = r#"
//! - list: editors
//!   items: [vim, nano]
//! - rule: Shadow truncated
//!   desc: /etc/shadow opened with O_TRUNC by anything but an editor under sshd
//!   condition: >
//!     evt.type in (open, openat) and fd.name = /etc/shadow
//!     and evt.arg.flags contains O_TRUNC
//!     and not (proc.name in (editors) and proc.aname = sshd)
//!   output: "shadow truncated by %proc.name (flags=%evt.arg.flags parent=%proc.aname[1])"
//!   priority: CRITICAL
//! "#;
//! let rs = RuleSet::load(&[("my_rules.yaml", rules)], &LoadOptions::default())
//!     .map_err(|diags| diags[0].to_string())?; // "my_rules.yaml:LINE:COL: message"
//!
//! // What to attach: the syscalls some rule can match.
//! assert_eq!(rs.event_types().syscall_names(), ["open", "openat"]);
//!
//! let ev = Ev { syscall: "openat", comm: "sh", path: Some("/etc/shadow"), flags: 0o1001, ancestors: &["bash", "sshd"] };
//! let mut alerts = Vec::new();
//! rs.evaluate(&ev, |rule| alerts.push(rule.format_output(&ev)));
//! assert_eq!(alerts[0].0, "shadow truncated by sh (flags=O_WRONLY|O_TRUNC parent=bash)");
//!
//! let vim = Ev { comm: "vim", ..ev };
//! assert_eq!(rs.evaluate(&vim, |_| {}), 0);
//! # Ok::<(), String>(())
//! ```
//!
//! Per-rule counters: every [`ruleset::Rule`] has a stable `index`. To time each rule, loop
//! over [`RuleSet::candidates`] for the event's type and call [`RuleSet::rule_matches`].

pub mod ast;
pub mod compile;
pub mod diag;
pub mod dns;
pub mod docs;
pub mod events;
pub mod expr;
/// The Falco rule engine version whose language this follows (Falco 0.44.1's; rule files
/// check it with required_engine_version).
pub const ENGINE_VERSION: &str = "0.62.0";

pub mod fields;
pub mod loader;
pub mod matchers;
pub mod memo;
pub mod output;
pub mod parser;
pub mod plugins;
pub mod ruleset;
pub mod testing;
pub mod value;
pub mod yaml;

pub use diag::Diagnostic;
pub use fields::{Field, FieldArg, FieldInfo, FieldType, FIELDS};
pub use ruleset::{LoadOptions, Rule, RuleSet};
pub use value::{EventSource, Value};

/// Harrier's default ruleset (rules/harrier_rules.yaml), in Falco's language.
pub const DEFAULT_RULES: &str = include_str!("../rules/harrier_rules.yaml");
/// The name the default ruleset's diagnostics use.
pub const DEFAULT_RULES_NAME: &str = "harrier_rules.yaml";
