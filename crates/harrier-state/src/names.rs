//! Descriptor names, shared so that naming a descriptor does not allocate
//! per event. Paths and fixed names are interned: the same path opened again
//! is one more reference. Socket names ("client:port->server:port") differ by
//! their ephemeral port, so interning them would only grow the set: instead a
//! closed socket's name and tuple are kept and rewritten for the next one.

use crate::fd::{Fd, FdType, Tuple};
use std::collections::HashSet;
use std::sync::Arc;

/// The set's least size before it forgets names no descriptor holds.
const MIN_INTERNED: usize = 4096;
/// Spare socket names kept per length, and spare tuples.
const SPARES: usize = 16;
/// Longest socket name kept (two bracketed IPv6 ends fit).
const SPARE_LEN: usize = 128;

#[derive(Default)]
pub struct Names {
    /// Seeded per process: any program chooses the paths it opens.
    interned: HashSet<Arc<str>, foldhash::fast::RandomState>,
    /// The set's size at which it next forgets what no one holds.
    sweep_at: usize,
    /// Unshared names of closed sockets, by length.
    spare_names: Vec<Vec<Arc<str>>>,
    #[allow(clippy::vec_box)] // the boxes are what is reused
    spare_tuples: Vec<Box<Tuple>>,
    /// A new socket's name, without a lookup.
    empty: Option<Arc<str>>,
}

impl Names {
    /// `b` (lossy UTF-8, as /proc shows a bad name) as a shared name.
    pub fn get(&mut self, b: &[u8]) -> Arc<str> {
        let s = String::from_utf8_lossy(b);
        if let Some(a) = self.interned.get(&*s) {
            return a.clone();
        }
        if self.interned.len() >= self.sweep_at.max(MIN_INTERNED) {
            self.interned.retain(|a| Arc::strong_count(a) > 1);
            self.sweep_at = 2 * self.interned.len();
        }
        let a: Arc<str> = Arc::from(&*s);
        self.interned.insert(a.clone());
        a
    }

    /// "": a socket's name until it is bound or connected.
    pub fn empty(&mut self) -> Arc<str> {
        if self.empty.is_none() {
            self.empty = Some(self.get(b""));
        }
        self.empty.clone().unwrap_or_default()
    }

    /// Renames a socket to `text`: its own string rewritten if no one else
    /// holds it and the length is the same, else a spare of that length (the
    /// old one, unshared, becomes a spare), else a new one. False if it had
    /// that name already.
    pub fn rename_socket(&mut self, name: &mut Arc<str>, text: &str) -> bool {
        if **name == *text {
            return false;
        }
        if name.len() == text.len() && rewrite(name, text) {
            return true;
        }
        let mut new = match self.spare_names.get_mut(text.len()).and_then(Vec::pop) {
            Some(mut a) => {
                if !rewrite(&mut a, text) {
                    a = Arc::from(text);
                }
                a
            }
            None => Arc::from(text),
        };
        std::mem::swap(name, &mut new);
        self.keep_name(new);
        true
    }

    /// A new socket's tuple, in a spare box if one is kept.
    pub fn tuple(&mut self, t: Tuple) -> Box<Tuple> {
        match self.spare_tuples.pop() {
            Some(mut b) => {
                *b = t;
                b
            }
            None => Box::new(t),
        }
    }

    /// A closed descriptor: a socket's name and tuple are kept for the next.
    pub fn closed(&mut self, f: Fd) {
        if !matches!(f.typ, FdType::Ipv4 | FdType::Ipv6) {
            return;
        }
        if let Some(t) = f.tuple {
            if self.spare_tuples.len() < SPARES {
                self.spare_tuples.push(t);
            }
        }
        self.keep_name(f.name);
    }

    fn keep_name(&mut self, a: Arc<str>) {
        // An interned name is shared with the set: never rewritten.
        if a.is_empty() || a.len() > SPARE_LEN || Arc::strong_count(&a) != 1 {
            return;
        }
        if self.spare_names.len() <= a.len() {
            self.spare_names.resize_with(SPARE_LEN + 1, Vec::new);
        }
        let v = &mut self.spare_names[a.len()];
        if v.len() < SPARES {
            v.push(a);
        }
    }
}

/// `text` written over `a` (of the same length) if no one else holds it.
fn rewrite(a: &mut Arc<str>, text: &str) -> bool {
    match Arc::get_mut(a) {
        // SAFETY: every byte is overwritten with valid UTF-8 of the same length.
        Some(s) if s.len() == text.len() => unsafe { s.as_bytes_mut() }.copy_from_slice(text.as_bytes()),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_one_string_however_often_it_is_named() {
        let mut n = Names::default();
        let a = n.get(b"/etc/hosts");
        assert!(Arc::ptr_eq(&a, &n.get(b"/etc/hosts")));
        assert_eq!(&*n.get(b"bad\xff"), "bad\u{fffd}");
    }

    #[test]
    fn names_no_one_holds_are_forgotten_and_held_ones_kept() {
        let mut n = Names::default();
        let held = n.get(b"/held");
        for i in 0..3 * MIN_INTERNED {
            n.get(format!("/tmp/{i}").as_bytes());
        }
        assert!(n.interned.len() <= MIN_INTERNED + 1, "{}", n.interned.len());
        assert!(Arc::ptr_eq(&held, &n.get(b"/held")));
    }

    #[test]
    fn a_sockets_own_or_closed_name_is_rewritten_never_a_shared_one() {
        let mut n = Names::default();
        let first = rename(&mut n, "1.2.3.4:5->6.7.8.9:10");
        let ptr = Arc::as_ptr(&first);
        let mut f = Fd::new(FdType::Ipv4, first, false);
        f.tuple = Some(n.tuple(Tuple::default()));
        assert!(n.rename_socket(&mut f.name, "1.2.3.4:5->6.7.8.9:11"));
        assert_eq!((&*f.name, Arc::as_ptr(&f.name)), ("1.2.3.4:5->6.7.8.9:11", ptr));
        assert!(!n.rename_socket(&mut f.name, "1.2.3.4:5->6.7.8.9:11"), "the same name: no change");
        n.closed(f);
        let second = rename(&mut n, "1.2.3.4:6->6.7.8.9:10");
        assert_eq!((&*second, Arc::as_ptr(&second)), ("1.2.3.4:6->6.7.8.9:10", ptr));
        let dup = second.clone();
        n.closed(Fd::new(FdType::Ipv4, second, false));
        let third = rename(&mut n, "1.2.3.4:7->6.7.8.9:10");
        assert_eq!(&*dup, "1.2.3.4:6->6.7.8.9:10");
        assert!(!Arc::ptr_eq(&third, &dup));
        let mut shared = n.get(b"/interned:path:of:21b");
        n.rename_socket(&mut shared, "1.2.3.4:8->6.7.8.9:10");
        assert_eq!(&*n.get(b"/interned:path:of:21b"), "/interned:path:of:21b");
    }

    /// A new socket's name ("", interned) renamed to `text`.
    fn rename(n: &mut Names, text: &str) -> Arc<str> {
        let mut name = n.empty();
        n.rename_socket(&mut name, text);
        name
    }
}
