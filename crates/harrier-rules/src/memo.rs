//! Common checks, evaluated once per event. Falco's rules share macros
//! (`open_read`, `sensitive_files`, `container`...), so one event meets the
//! same comparison in several rules. At load, every comparison used more than
//! once gets a slot; while evaluating, the first rule to need it stores its
//! result there and the others read it. Evaluation has no side effects, so a
//! stored result is the result.

use crate::expr::{CRhs, Check, Expr};
use std::cell::Cell;
use std::collections::HashMap;

/// A check without a slot.
pub const NO_SLOT: u32 = u32::MAX;

/// Per-event results of the shared checks. Owned by whoever evaluates (the
/// rule set itself is shared between threads); call [`Memo::next_event`]
/// before each event. Allocates only when made.
#[derive(Debug, Default)]
pub struct Memo {
    /// `event << 1 | result`, valid when its event is the current one.
    slots: Box<[Cell<u64>]>,
    /// Starts at 1, so a fresh slot (0) is never valid.
    event: u64,
}

impl Memo {
    pub fn new(slots: usize) -> Memo {
        Memo { slots: (0..slots).map(|_| Cell::new(0)).collect(), event: 1 }
    }

    /// Forgets the previous event's results.
    pub fn next_event(&mut self) {
        self.event += 1;
    }

    /// The stored result of `slot` for this event, or `eval`'s, stored.
    #[inline]
    pub fn get_or(&self, slot: u32, eval: impl FnOnce() -> bool) -> bool {
        let Some(cell) = self.slots.get(slot as usize) else { return eval() };
        let v = cell.get();
        if v >> 1 == self.event {
            return v & 1 == 1;
        }
        let hit = eval();
        cell.set(self.event << 1 | hit as u64);
        hit
    }
}

/// Gives a slot to each check that occurs more than once in `exprs` (same field, argument,
/// transformers, operator and right side). Returns the number of slots.
pub fn assign_slots<'a>(exprs: impl Iterator<Item = &'a mut Expr>) -> usize {
    let mut exprs: Vec<&mut Expr> = exprs.collect();
    let mut counts: HashMap<String, u32> = HashMap::new();
    for e in exprs.iter_mut() {
        visit(e, &mut |c| *counts.entry(key(c)).or_default() += 1);
    }
    let mut slots: HashMap<String, u32> = HashMap::new();
    for e in exprs.iter_mut() {
        visit(e, &mut |c| {
            let k = key(c);
            if counts.get(&k).copied().unwrap_or(0) > 1 {
                let n = slots.len() as u32;
                c.slot = *slots.entry(k).or_insert(n);
            } else {
                c.slot = NO_SLOT;
            }
        });
    }
    slots.len()
}

fn visit(e: &mut Expr, f: &mut dyn FnMut(&mut Check)) {
    match e {
        Expr::Const(_) | Expr::EvtType { .. } => {}
        Expr::And(v) | Expr::Or(v) => v.iter_mut().for_each(|x| visit(x, f)),
        Expr::Not(x) => visit(x, f),
        Expr::Check(c) => f(c),
    }
}

/// What makes two checks the same: their full description (a set's members sorted, since
/// their order in the set's table may differ).
fn key(c: &Check) -> String {
    let rhs = match &c.rhs {
        CRhs::Set { strs, lits } => {
            let mut s: Vec<&[u8]> = strs.iter().map(|b| &b[..]).collect();
            s.sort_unstable();
            format!("Set({s:?}, {lits:?})")
        }
        other => format!("{other:?}"),
    };
    format!("{:?} {:?} {rhs}", c.sel, c.op)
}
