//! Which part of an enforced rule the kernel decides, compiled into
//! harrier-capture's guard programs (bpf/include/guard.h).
//!
//! Each condition is lowered, per syscall, to a tree of tests the kernel can
//! make at the syscall's exit, with the same meaning user space gives them
//! (a field without a value compares false). A term it cannot make is
//! `Unknown`: reaching it defers the rule to user space. Conjuncts and
//! disjuncts are reordered, cheapest and known first (conditions have no
//! side effects), so most events are decided before any unknown term.
//! Some unknown terms imply a known one (`proc.cmdline startswith "perl x"`
//! needs a process named perl): that test goes first.

use anyhow::Result;
use harrier_capture::guard::{
    Entry, Guard, Ins, Op as GOp, Program, Src, KILL, MAX_INS, MAX_NEEDLES, MAX_RULES, NO_MATCH,
};
use harrier_rules::events::EventType;
use harrier_rules::expr::Check;
use harrier_rules::ruleset::RuleSet;
use harrier_schema::SyscallInfo;
use std::collections::BTreeMap;

mod lower;
mod quick;
#[cfg(test)]
mod tests;

use lower::lower;

/// A condition as the kernel sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum G {
    Const(bool),
    Test(GOp, Vec<Entry>),
    Unknown(String),
    And(Vec<G>),
    Or(Vec<G>),
    Not(Box<G>),
}

/// Processes and users enforcement never acts on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exempt {
    pub comms: Vec<Vec<u8>>,
    pub uids: Vec<u32>,
}

/// What the kernel decides of one enforced rule.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    pub rule: String,
    /// Syscalls whose events the kernel decides, at least in part.
    pub syscalls: Vec<&'static str>,
    /// Terms that defer an event to user space when they are reached.
    pub deferred: Vec<String>,
    /// Why the kernel decides nothing of it (else None).
    pub user_space: Option<String>,
    /// Reaching a deferred term stops the task until user space decides.
    pub held: bool,
}

impl Decision {
    pub fn summary(&self) -> String {
        match (&self.user_space, self.deferred.is_empty()) {
            (Some(why), _) => format!("user space ({why})"),
            (None, true) => format!("kernel ({})", self.syscalls.join(", ")),
            (None, false) => format!(
                "kernel ({}), user space when it reaches {}{}",
                self.syscalls.join(", "),
                self.deferred.join(", "),
                if self.held { " (the task held meanwhile, if the call succeeded)" } else { "" }
            ),
        }
    }
}

pub struct Plan {
    pub guard: Guard,
    /// Per enforced rule (its guard id is the index).
    pub decisions: Vec<Decision>,
}

/// The guard for `enforced` (rule indices; their order gives their ids),
/// over the attached syscalls. Rules the kernel cannot help with get no
/// code; a syscall's program over [`MAX_INS`] keeps the rules that fit.
pub fn compile(
    rules: &RuleSet,
    enforced: &[u32],
    exempt: &Exempt,
    syscalls: &[&'static SyscallInfo],
    rate: u32,
    hold: bool,
) -> Result<Plan> {
    if enforced.len() > MAX_RULES {
        anyhow::bail!("{} rules to enforce, at most {MAX_RULES}", enforced.len());
    }
    let mut sets = Sets::default();
    let mut decisions: Vec<Decision> = enforced
        .iter()
        .map(|&i| Decision { rule: rules.rule(i).name.clone(), ..Default::default() })
        .collect();
    let mut programs = Vec::new();
    for s in syscalls {
        let Some(ty) = EventType::from_name(s.name) else { continue };
        let mut gen = Gen::default();
        let mut kept = Vec::new();
        for (id, &ri) in enforced.iter().enumerate() {
            let r = rules.rule(ri);
            if !r.is_active() || !r.event_types.contains(ty) {
                continue;
            }
            let cond = r.condition().map_or(G::Const(true), |e| lower(e, ty, s));
            let g = simplify(G::And(vec![exemptions(exempt), cond]));
            if g == G::Const(false) {
                continue;
            }
            let mut unknown = Vec::new();
            unknowns(&g, &mut unknown);
            if !can_be(&g, true) {
                add_terms(&mut decisions[id].deferred, unknown);
                continue;
            }
            kept.push((id, g, unknown));
        }
        // The capture handler's test first, then one test every rule's
        // match needs: most events end at one of them.
        let quick = quick::of(kept.iter().map(|(_, g, _)| g));
        let pre = prefilter(kept.iter().map(|(_, g, _)| g));
        if !matches!(pre, G::Const(true)) && !kept.is_empty() {
            let start = gen.label();
            gen.emit(&pre, T::Lbl(start), T::Abs(NO_MATCH), 0, &mut sets);
            gen.place(start);
        }
        for (id, g, unknown) in kept {
            let (mark, needles) = (gen.ins.len(), sets.needles.len());
            let next = gen.label();
            gen.after = T::Lbl(next);
            gen.emit(&g, T::Abs(KILL | id as u16), T::Lbl(next), id as u16, &mut sets);
            gen.place(next);
            if gen.ins.len() > MAX_INS || sets.needles.len() > MAX_NEEDLES {
                gen.truncate(mark, next);
                sets.needles.truncate(needles);
                decisions[id].deferred.push(format!("(too long for {}'s kernel program)", s.name));
                continue;
            }
            decisions[id].syscalls.push(s.name);
            decisions[id].held = hold;
            add_terms(&mut decisions[id].deferred, unknown);
        }
        if !gen.ins.is_empty() {
            programs.push(Program { nr: s.nr, ins: gen.resolve(), quick });
        }
    }
    for d in decisions.iter_mut().filter(|d| d.syscalls.is_empty()) {
        d.user_space = Some(if d.deferred.is_empty() {
            "none of its syscalls is captured".into()
        } else {
            format!("needs {}", d.deferred.join(", "))
        });
        d.deferred.clear();
    }
    let needles = std::mem::take(&mut sets.needles);
    Ok(Plan { guard: Guard { programs, strings: sets.entries(), needles, rate, hold }, decisions })
}

/// A condition every event that can make one of `gs` hold meets, of the
/// kernel's cheapest tests: per rule its most selective necessary test, the
/// rules' string sets of one source merged. Unknown terms count as true, so
/// an event it rejects could not match whatever user space says (no need to
/// defer it either).
fn prefilter<'a>(gs: impl Iterator<Item = &'a G>) -> G {
    let mut any = Vec::new();
    for g in gs {
        match necessary(g) {
            G::Const(true) => return G::Const(true),
            G::Or(xs) => any.extend(xs),
            x => any.push(x),
        }
    }
    // Sets of one source merged: one lookup instead of one per rule.
    let mut merged: Vec<G> = Vec::new();
    for x in any {
        if let G::Test(GOp::StrIn { src, dirs, .. }, es) = &x {
            let same = merged.iter_mut().find_map(|m| match m {
                G::Test(GOp::StrIn { src: s2, dirs: d2, .. }, e2) if s2 == src && d2 == dirs => Some(e2),
                _ => None,
            });
            if let Some(e2) = same {
                e2.extend(es.iter().cloned());
                e2.sort();
                e2.dedup();
                continue;
            }
        }
        merged.push(x);
    }
    simplify(G::Or(merged))
}

/// A test `g` implies (true when none is cheap to say).
fn necessary(g: &G) -> G {
    match g {
        G::Const(b) => G::Const(*b),
        G::Test(GOp::Defer { .. }, _) | G::Unknown(_) | G::Not(_) => G::Const(true),
        G::Test(..) => g.clone(),
        G::Or(xs) => simplify(G::Or(xs.iter().map(necessary).collect())),
        G::And(xs) => xs
            .iter()
            .map(necessary)
            .filter(|x| *x != G::Const(true))
            .min_by(|a, b| likely(a).partial_cmp(&likely(b)).unwrap_or(std::cmp::Ordering::Equal))
            .unwrap_or(G::Const(true)),
    }
}

/// Whether some event makes `g` come out `want` without reaching an
/// unknown term: else the kernel can never decide it.
fn can_be(g: &G, want: bool) -> bool {
    match g {
        G::Const(b) => *b == want,
        G::Test(..) => true,
        G::Unknown(_) => false,
        G::Not(x) => can_be(x, !want),
        G::And(xs) if want => xs.iter().all(|x| can_be(x, true)),
        G::Or(xs) if !want => xs.iter().all(|x| can_be(x, false)),
        G::And(xs) | G::Or(xs) => xs.iter().any(|x| can_be(x, want)),
    }
}

fn add_terms(to: &mut Vec<String>, terms: Vec<String>) {
    for t in terms {
        if !to.contains(&t) {
            to.push(t);
        }
    }
}

fn exemptions(e: &Exempt) -> G {
    let mut v = Vec::new();
    if !e.comms.is_empty() {
        let set = e.comms.iter().map(|c| Entry::Exact(c.clone())).collect();
        v.push(G::Not(Box::new(G::Test(GOp::StrIn { src: Src::Comm, set: 0, dirs: false }, set))));
    }
    if !e.uids.is_empty() {
        let set = e.uids.iter().map(|u| Entry::Exact(u.to_le_bytes().to_vec())).collect();
        v.push(G::Not(Box::new(G::Test(GOp::StrIn { src: Src::Uid, set: 0, dirs: false }, set))));
    }
    G::And(v)
}

fn unknowns(g: &G, out: &mut Vec<String>) {
    match g {
        G::Unknown(t) if !out.contains(t) => out.push(t.clone()),
        G::And(xs) | G::Or(xs) => xs.iter().for_each(|x| unknowns(x, out)),
        G::Not(x) => unknowns(x, out),
        _ => {}
    }
}

/// Constants folded, double negations removed, children ordered cheapest
/// first and unknown last.
pub(crate) fn simplify(g: G) -> G {
    match g {
        G::Not(x) => match simplify(*x) {
            G::Const(b) => G::Const(!b),
            G::Not(y) => *y,
            u @ G::Unknown(_) => u,
            y => G::Not(Box::new(y)),
        },
        G::And(xs) => junction(xs, true),
        G::Or(xs) => junction(xs, false),
        g => g,
    }
}

fn junction(xs: Vec<G>, and: bool) -> G {
    let mut out = Vec::new();
    for x in xs {
        match simplify(x) {
            G::Const(b) if b == and => {}
            G::Const(b) => return G::Const(b),
            G::And(ys) if and => out.extend(ys),
            G::Or(ys) if !and => out.extend(ys),
            y => out.push(y),
        }
    }
    // What ends the junction soonest for the least work goes first: for an
    // `and`, tests likely false (a path in a set); for an `or`, likely true.
    // Unknown terms last, whatever they cost.
    let rank = |x: &G| {
        let p = likely(x);
        let ends = if and { 1.0 - p } else { p };
        (cost(x) >= 10_000, cost(x) as f64 / ends.max(0.01))
    };
    out.sort_by(|a, b| rank(a).partial_cmp(&rank(b)).unwrap_or(std::cmp::Ordering::Equal));
    match out.len() {
        0 => G::Const(and),
        1 => out.pop().unwrap(),
        _ if out.iter().all(|x| matches!(x, G::Unknown(_))) => out.swap_remove(0),
        _ if and => G::And(out),
        _ => G::Or(out),
    }
}

/// A guess of how often `g` holds: a string in a set is rare, a call
/// succeeds mostly, flags are even.
fn likely(g: &G) -> f64 {
    match g {
        G::Const(b) => *b as u8 as f64,
        G::Test(GOp::Success | GOp::HostCgroup, _) => 0.9,
        G::Test(GOp::Flags { .. }, _) => 0.5,
        G::Test(GOp::Num { .. }, _) => 0.1,
        G::Test(GOp::Whole { .. }, _) => 0.99,
        G::Test(GOp::Age { .. }, _) => 0.5,
        G::Test(..) => 0.1,
        G::Unknown(_) => 0.5,
        G::Not(x) => 1.0 - likely(x),
        G::And(xs) => xs.iter().map(likely).product(),
        G::Or(xs) => 1.0 - xs.iter().map(|x| 1.0 - likely(x)).product::<f64>(),
    }
}

fn cost(g: &G) -> u32 {
    match g {
        G::Const(_) => 0,
        G::Test(op, _) => match op {
            GOp::Success | GOp::Flags { .. } | GOp::Num { .. } => 1,
            GOp::HostCgroup => 2,
            GOp::StrIn { src: Src::Comm | Src::Uid, .. } => 3,
            GOp::StrIn { src: Src::Ancestor(n), .. } => 4 + *n as u32,
            GOp::StrIn { .. } => 4,
            GOp::Whole { .. } | GOp::Age { .. } => 2,
            // A scan of up to 128 bytes, after the source's string is loaded.
            GOp::Substr { src: Src::Comm | Src::Ancestor(_), .. } => 5,
            GOp::Substr { .. } => 8,
            GOp::Defer { .. } => 10_000,
        },
        G::Unknown(_) => 10_000,
        G::Not(x) => cost(x),
        G::And(xs) | G::Or(xs) => xs.iter().map(cost).sum(),
    }
}

/// Set ids by content: equal sets are stored once; so are substrings.
#[derive(Default)]
struct Sets {
    ids: BTreeMap<(bool, Vec<Entry>), u32>,
    needles: Vec<Vec<u8>>,
}

impl Sets {
    fn needle(&mut self, n: &[u8]) -> u32 {
        match self.needles.iter().position(|x| x == n) {
            Some(i) => i as u32,
            None => {
                self.needles.push(n.to_vec());
                self.needles.len() as u32 - 1
            }
        }
    }
    fn id(&mut self, dirs: bool, mut entries: Vec<Entry>) -> u32 {
        entries.sort();
        entries.dedup();
        let n = self.ids.len() as u32;
        *self.ids.entry((dirs, entries)).or_insert(n)
    }
    fn entries(self) -> Vec<(u32, Entry)> {
        self.ids.into_iter().flat_map(|((_, es), id)| es.into_iter().map(move |e| (id, e))).collect()
    }
}

#[derive(Debug, Clone, Copy)]
enum T {
    Abs(u16),
    Lbl(usize),
}

#[derive(Default)]
struct Gen {
    ins: Vec<(GOp, T, T)>,
    labels: Vec<usize>,
    /// Where the rule being emitted ends: the next rule's code.
    after: T,
}

impl Default for T {
    fn default() -> T {
        T::Abs(NO_MATCH)
    }
}

impl Gen {
    fn label(&mut self) -> usize {
        self.labels.push(usize::MAX);
        self.labels.len() - 1
    }
    fn place(&mut self, l: usize) {
        self.labels[l] = self.ins.len();
    }
    /// Drops a rule's code (it did not fit): its jumps to `next` go nowhere now.
    fn truncate(&mut self, mark: usize, next: usize) {
        self.ins.truncate(mark);
        self.labels[next] = mark;
    }
    fn emit(&mut self, g: &G, t: T, f: T, rule: u16, sets: &mut Sets) {
        match g {
            G::Const(b) => self.ins.push((GOp::Success, if *b { t } else { f }, if *b { t } else { f })),
            G::Test(op, entries) => {
                let op = match op {
                    GOp::StrIn { src, dirs, .. } => {
                        GOp::StrIn { src: *src, set: sets.id(*dirs, entries.clone()), dirs: *dirs }
                    }
                    GOp::Substr { src, mode, .. } => {
                        // lower.rs gives a substring test its needle as its one entry.
                        let n = match entries.first() {
                            Some(Entry::Exact(n)) => n.as_slice(),
                            _ => &[],
                        };
                        GOp::Substr { src: *src, needle: sets.needle(n), mode: *mode }
                    }
                    op => op.clone(),
                };
                self.ins.push((op, t, f));
            }
            // The rule's verdict is user space's: go on with the next rule.
            G::Unknown(_) => self.ins.push((GOp::Defer { rule }, self.after, self.after)),
            G::Not(x) => self.emit(x, f, t, rule, sets),
            G::And(xs) | G::Or(xs) => {
                let and = matches!(g, G::And(_));
                for (i, x) in xs.iter().enumerate() {
                    if i + 1 == xs.len() {
                        self.emit(x, t, f, rule, sets);
                    } else {
                        let l = self.label();
                        if and {
                            self.emit(x, T::Lbl(l), f, rule, sets);
                        } else {
                            self.emit(x, t, T::Lbl(l), rule, sets);
                        }
                        self.place(l);
                    }
                }
            }
        }
    }
    fn resolve(&self) -> Vec<Ins> {
        let n = self.ins.len();
        let at = |t: T| match t {
            T::Abs(v) => v,
            T::Lbl(l) if self.labels[l] >= n => NO_MATCH,
            T::Lbl(l) => self.labels[l] as u16,
        };
        self.ins.iter().map(|(op, t, f)| Ins { op: op.clone(), t: at(*t), f: at(*f) }).collect()
    }
}

/// `Cond(c, a, b)`: a where c holds, else b.
pub(crate) fn cond(c: G, a: G, b: G) -> G {
    G::Or(vec![G::And(vec![c.clone(), a]), G::And(vec![G::Not(Box::new(c)), b])])
}

/// The string literals of a comparison, if they all are strings.
pub(crate) fn strings(c: &Check) -> Option<Vec<Vec<u8>>> {
    Some(crate::kfilter::lits(&c.rhs)?.into_iter().map(|b| b.to_vec()).collect())
}
