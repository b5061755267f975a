//! A table-backed [`EventSource`] for tests (this crate's and the integration's).

use crate::events::EventType;
use crate::fields::{Field, FieldArg};
use crate::value::{EventSource, Value};
use std::net::IpAddr;

/// An owned field value.
#[derive(Debug, Clone, PartialEq)]
pub enum Owned {
    Str(String),
    U64(u64),
    S64(i64),
    Bool(bool),
    Ip(IpAddr),
    Flags(u64, &'static str),
}

impl Owned {
    fn value(&self) -> Value<'_> {
        match self {
            Owned::Str(s) => Value::Str(s.as_bytes()),
            Owned::U64(n) => Value::U64(*n),
            Owned::S64(n) => Value::S64(*n),
            Owned::Bool(b) => Value::Bool(*b),
            Owned::Ip(ip) => Value::Ip(*ip),
            Owned::Flags(b, r) => Value::Flags { bits: *b, renderer: r },
        }
    }
}

impl From<&str> for Owned {
    fn from(s: &str) -> Self {
        Owned::Str(s.to_string())
    }
}
impl From<u64> for Owned {
    fn from(n: u64) -> Self {
        Owned::U64(n)
    }
}
impl From<i64> for Owned {
    fn from(n: i64) -> Self {
        Owned::S64(n)
    }
}
impl From<bool> for Owned {
    fn from(b: bool) -> Self {
        Owned::Bool(b)
    }
}

/// An event: its type and the values of the fields it has. A field absent from the table
/// has no value. Values are indexed by field, so a lookup costs about what a real
/// source's would (no allocation).
#[derive(Debug, Clone)]
pub struct FakeEvent {
    pub ty: EventType,
    /// Per field (by `Field as usize`): (argument, values).
    slots: Vec<Vec<(FieldArg, Vec<Owned>)>>,
}

impl FakeEvent {
    /// An event of the named type; `evt.type` is set too.
    pub fn new(ty: &str) -> FakeEvent {
        let t = EventType::from_name(ty).unwrap_or_else(|| panic!("unknown event type {ty}"));
        let mut ev = FakeEvent { ty: t, slots: vec![Vec::new(); crate::FIELDS.len()] };
        ev.slots[Field::EvtType as usize].push((FieldArg::None, vec![Owned::from(ty)]));
        ev
    }
    /// Sets a field by its name as written in a rule (`proc.aname[2]`, `evt.arg.flags`).
    pub fn set(mut self, name: &str, v: impl Into<Owned>) -> Self {
        self.set_many(name, vec![v.into()]);
        self
    }
    /// Sets a multi-valued field (`proc.aname` without index: each ancestor).
    pub fn set_all(mut self, name: &str, vs: Vec<Owned>) -> Self {
        self.set_many(name, vs);
        self
    }
    fn set_many(&mut self, name: &str, vs: Vec<Owned>) {
        let (base, arg) = match name.find('[') {
            Some(i) => (&name[..i], Some(name[i + 1..].trim_end_matches(']'))),
            None => (name, None),
        };
        let (f, a) = crate::fields::resolve(base, arg).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let slot = &mut self.slots[f as usize];
        slot.retain(|(aa, _)| *aa != a);
        slot.push((a, vs));
    }
}

impl EventSource for FakeEvent {
    fn event_type(&self) -> EventType {
        self.ty
    }
    fn extract(&self, field: Field, arg: &FieldArg, out: &mut dyn FnMut(Value<'_>) -> bool) {
        for (a, vs) in &self.slots[field as usize] {
            if a == arg {
                for v in vs {
                    if out(v.value()) {
                        return;
                    }
                }
                return;
            }
        }
    }
}
