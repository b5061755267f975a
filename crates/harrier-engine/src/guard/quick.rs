//! The quick test the capture handler makes before it hands an event to
//! the guard program (`hr_g_quick` in guard.h): a necessary condition of
//! every kept rule's condition, unknown terms counted as true, in the
//! handler's terms: success, open flags, the path's first 8 bytes. An event
//! it rejects could neither match nor defer, so the guard program, its
//! copies and its tail call are saved for the few that pass.

use super::G;
use harrier_capture::guard::{Atom, Entry, Op as GOp, Quick, Src, MAX_ATOMS};

/// The quick test of a syscall's kept rules (their conditions `gs`).
pub(crate) fn of<'a>(gs: impl Iterator<Item = &'a G>) -> Quick {
    let q = gs.map(quick).reduce(union).unwrap_or_default();
    fit(q)
}

/// No atoms past MAX_ATOMS: heads cut shorter until they fit (a shorter
/// head lets more through, never fewer), else no atom test.
fn fit(q: Quick) -> Quick {
    let Some(atoms) = q.atoms else { return q };
    for n in (1..=8).rev() {
        let mut cut: Vec<Atom> = atoms.iter().map(|a| a.cut(n)).collect();
        cut.sort();
        cut.dedup();
        if cut.len() <= MAX_ATOMS {
            return Quick { ok: q.ok, atoms: (!cut.is_empty()).then_some(cut) };
        }
    }
    Quick { ok: q.ok, atoms: None }
}

/// Either one's events: success only if both need it, atoms of both.
fn union(a: Quick, b: Quick) -> Quick {
    let atoms = match (a.atoms, b.atoms) {
        (Some(mut x), Some(y)) => {
            x.extend(y);
            Some(x)
        }
        _ => None,
    };
    Quick { ok: a.ok && b.ok, atoms }
}

/// How often an atom list may hold: heads are rare, flags even.
fn likely(atoms: &Option<Vec<Atom>>) -> f64 {
    let Some(a) = atoms else { return 1.0 };
    1.0 - a.iter().map(|x| if matches!(x, Atom::Head { .. }) { 0.98 } else { 0.5 }).product::<f64>()
}

fn quick(g: &G) -> Quick {
    let any = Quick { ok: false, atoms: None };
    match g {
        G::Const(true) | G::Unknown(_) | G::Not(_) => any,
        // Never: what an `or` adds nothing to, and an `and` takes.
        G::Const(false) => Quick { ok: true, atoms: Some(vec![]) },
        G::Test(GOp::Success, _) => Quick { ok: true, atoms: None },
        G::Test(GOp::Flags { mask, value }, _) => {
            Quick { ok: false, atoms: Some(vec![Atom::Flags { mask: *mask, value: *value }]) }
        }
        // The handler has the path only of a call that succeeded.
        G::Test(GOp::StrIn { src: Src::Path, .. }, entries) => {
            let heads: Option<Vec<Atom>> = entries
                .iter()
                .map(|e| match e {
                    Entry::Exact(b) => Atom::head(b, true),
                    Entry::Prefix(b) | Entry::Dir(b) => Atom::head(b, false),
                })
                .collect();
            Quick { ok: true, atoms: heads }
        }
        G::Test(..) => any,
        G::Or(xs) => xs.iter().map(quick).reduce(union).unwrap_or(any),
        G::And(xs) => {
            let qs: Vec<Quick> = xs.iter().map(quick).collect();
            let ok = qs.iter().any(|q| q.ok);
            let atoms = qs
                .into_iter()
                .map(|q| q.atoms)
                .min_by(|a, b| likely(a).partial_cmp(&likely(b)).unwrap_or(std::cmp::Ordering::Equal))
                .flatten();
            Quick { ok, atoms }
        }
    }
}
