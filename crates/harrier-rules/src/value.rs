//! Values fields produce, and the trait the integration implements to produce them.

use crate::events::EventType;
use crate::fields::{Field, FieldArg};
use std::net::IpAddr;

/// One value of a field for the current event. Borrowed: extraction never allocates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Strings are bytes, as in Falco: paths and command lines need not be UTF-8.
    Str(&'a [u8]),
    U64(u64),
    S64(i64),
    Bool(bool),
    Ip(IpAddr),
    /// A flag set or enum, rendered by harrier-schema's named renderer (`open_flags`,
    /// `ptrace_request`, `socket_family`, ...) for string operators and outputs.
    Flags {
        bits: u64,
        renderer: &'static str,
    },
}

impl<'a> Value<'a> {
    pub fn str(s: &'a str) -> Value<'a> {
        Value::Str(s.as_bytes())
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Str(s.as_bytes())
    }
}

/// What the rules engine needs from an event: implemented by the integration over its
/// decoded event and state tables (see the crate documentation for a worked example).
pub trait EventSource {
    /// The event's type: a syscall number, or a pseudo event ([`crate::events::PSEUDO_EVENTS`]).
    fn event_type(&self) -> EventType;

    /// Gives each value of `field` (with `arg`) for this event to `out`:
    /// - once for a single-valued field;
    /// - once per value for a multi-valued one (`proc.aname` without an index: each
    ///   ancestor, nearest first; `fd.types`: each fd's type);
    /// - never when the field has no value here (a comparison on it is then false).
    ///
    /// Stop as soon as `out` returns true (a match was found). Must not allocate per call.
    fn extract(&self, field: Field, arg: &FieldArg, out: &mut dyn FnMut(Value<'_>) -> bool);
}
