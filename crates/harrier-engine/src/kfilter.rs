//! What `harrier run` asks the kernel not to send.
//!
//! Two sources. Rules: for a syscall that yields a file (the open family),
//! each rule that consumes it is reduced to the event-local conditions it
//! implies (the call succeeded, write flags, the path under a prefix or
//! in a list); an event none of them (nor the state tables) can use stays in
//! the kernel. The reduction over-approximates: a condition it cannot
//! express becomes "anything", so a rule never loses an event it could
//! match. socket() is reduced the same way (its domain) when its fd is of
//! no use later (sockets.rs). And the user's `kernel_drop` conditions: process names, per
//! syscall (e.g. `proc.name = redis-server and evt.type in (read, write)`).

use anyhow::{anyhow, bail, Result};
use harrier_capture::kfilter::{self, Clause, KernelFilter, PathMatch, SyscallFilter, MAX_CLAUSES, MAX_PATH};
use harrier_rules::ast::{Ast, Op, Rhs};
use harrier_rules::events::EventType;
use harrier_rules::expr::{CRhs, Check, Expr};
use harrier_rules::fields::Field;
use harrier_rules::ruleset::RuleSet;
use harrier_schema::{syscall_by_name, SyscallInfo};
use std::collections::BTreeMap;

/// What one rule (or the state) can use of one syscall's events.
#[derive(Debug, Clone, PartialEq)]
enum Use {
    Never,
    When(Clause),
}

const O_WRONLY: u32 = 1;
const O_RDWR: u32 = 2;

/// Open flag bits a `evt.arg.flags contains NAME` test can require.
pub(crate) fn open_flag_bit(name: &[u8]) -> Option<u32> {
    Some(match name {
        b"O_WRONLY" => O_WRONLY,
        b"O_RDWR" => O_RDWR,
        b"O_CREAT" => 0o100,
        b"O_EXCL" => 0o200,
        b"O_TRUNC" => 0o1000,
        b"O_APPEND" => 0o2000,
        _ => return None,
    })
}

fn and(a: Clause, b: Clause) -> Clause {
    // Both hold: keep the tighter of each part (either is a valid bound).
    let paths = match (a.paths, b.paths) {
        (Some(x), Some(y)) => Some(if x.len() <= y.len() { x } else { y }),
        (x, y) => x.or(y),
    };
    let flags_any = if a.flags_any != 0 { a.flags_any } else { b.flags_any };
    Clause {
        need_success: a.need_success || b.need_success,
        flags_any,
        paths,
        raw_dotdot: a.raw_dotdot || b.raw_dotdot,
        arg_eq: a.arg_eq.or(b.arg_eq),
        l4: if a.l4 != 0 { a.l4 } else { b.l4 },
        peer_named: a.peer_named || b.peer_named,
    }
}

fn or(a: Clause, b: Clause) -> Clause {
    let paths = match (a.paths, b.paths) {
        (Some(mut x), Some(y)) => {
            x.extend(y);
            x.sort();
            x.dedup();
            Some(x)
        }
        _ => None,
    };
    let flags_any = if a.flags_any != 0 && b.flags_any != 0 { a.flags_any | b.flags_any } else { 0 };
    Clause {
        need_success: a.need_success && b.need_success,
        flags_any,
        paths,
        raw_dotdot: a.raw_dotdot && b.raw_dotdot,
        arg_eq: a.arg_eq.filter(|_| a.arg_eq == b.arg_eq),
        l4: if a.l4 == b.l4 { a.l4 } else { 0 },
        peer_named: a.peer_named && b.peer_named,
    }
}

pub(crate) fn lits(rhs: &CRhs) -> Option<Vec<&[u8]>> {
    match rhs {
        CRhs::One(l) => Some(vec![&l.bytes[..]]),
        CRhs::Many(ls) => Some(ls.iter().map(|l| &l.bytes[..]).collect()),
        CRhs::Set { strs, lits } if lits.iter().all(|l| strs.contains(&l.bytes)) => {
            Some(strs.iter().map(|s| &s[..]).collect())
        }
        _ => None,
    }
}

/// Paths (of a file's fd.name) a check on an open event implies.
fn path_matches(c: &Check) -> Option<Vec<PathMatch>> {
    let dir = |d: &[u8]| {
        let mut p = d.to_vec();
        if !p.ends_with(b"/") {
            p.push(b'/');
        }
        PathMatch::Prefix(p)
    };
    let v: Vec<PathMatch> = match (c.sel.field, c.op) {
        (Field::FdName, Op::StartsWith) => {
            lits(&c.rhs)?.into_iter().map(|b| PathMatch::Prefix(b.into())).collect()
        }
        (Field::FdName, Op::Eq | Op::In) => {
            lits(&c.rhs)?.into_iter().map(|b| PathMatch::Exact(b.into())).collect()
        }
        (Field::FdName | Field::FdDirectory, Op::PMatch) => match &c.rhs {
            CRhs::Prefixes(ps) => ps.iter().map(|p| PathMatch::Prefix(p.to_vec())).collect(),
            _ => return None,
        },
        (Field::FdDirectory, Op::StartsWith) => {
            lits(&c.rhs)?.into_iter().map(|b| PathMatch::Prefix(b.into())).collect()
        }
        (Field::FdDirectory, Op::Eq | Op::In) => lits(&c.rhs)?.into_iter().map(dir).collect(),
        _ => return None,
    };
    // Longer than the kernel's key: its first bytes as a prefix still bound it.
    Some(
        v.into_iter()
            .map(|m| match m {
                PathMatch::Prefix(b) | PathMatch::Exact(b) if b.len() > MAX_PATH => {
                    PathMatch::Prefix(b[..MAX_PATH].to_vec())
                }
                m => m,
            })
            .collect(),
    )
}

/// What a check implies about an open event (transformed fields imply nothing).
fn check_use(c: &Check) -> Clause {
    let mut cl = Clause::default();
    if !c.sel.tfs.is_empty() {
        return cl;
    }
    let name = c.sel.field.name();
    // On an open, fd.* fields have a value only when the call succeeded, and
    // a comparison on a field without a value is false.
    if name.starts_with("fd.") {
        cl.need_success = true;
        cl.paths = path_matches(c);
    }
    match (c.sel.field, c.op) {
        (Field::EvtIsOpenWrite, Op::Eq) if matches!(&c.rhs, CRhs::One(l) if l.boolean == Some(true)) => {
            cl.flags_any = O_WRONLY | O_RDWR;
        }
        (Field::EvtArg, Op::Contains) if c.sel.arg.key() == Some("flags") => {
            if let CRhs::One(l) = &c.rhs {
                cl.flags_any = open_flag_bit(&l.bytes).unwrap_or(0);
            }
        }
        // A raw path that contains, starts with or is a literal with ".." has "..".
        (Field::FdNameraw, Op::Contains | Op::StartsWith | Op::Eq) => {
            cl.raw_dotdot = matches!(&c.rhs, CRhs::One(l) if l.bytes.windows(2).any(|w| w == b".."));
        }
        (Field::FdL4proto, Op::Eq | Op::In) => cl.l4 = sockets::l4_number(c),
        (Field::FdSip, Op::Eq | Op::In) => cl.peer_named = matches!(c.rhs, CRhs::Names(_)),
        (Field::EvtArg, _) if sockets::domain_eq(c).is_some() => {
            cl.arg_eq = sockets::domain_eq(c).map(|v| ("domain", v));
        }
        (Field::EvtRes, Op::Eq) if matches!(&c.rhs, CRhs::One(l) if &l.bytes[..] == b"SUCCESS") => {
            cl.need_success = true;
        }
        (Field::EvtRawres, Op::Ge) => {
            cl.need_success = matches!(&c.rhs, CRhs::One(l) if l.num.is_some_and(|n| n >= 0));
        }
        _ => {}
    }
    cl
}

fn expr_use(e: &Expr, ty: EventType) -> Use {
    match e {
        Expr::Const(false) => Use::Never,
        Expr::Const(true) => Use::When(Clause::default()),
        Expr::EvtType { set, negate } => {
            if set.contains(ty) != *negate {
                Use::When(Clause::default())
            } else {
                Use::Never
            }
        }
        Expr::Not(inner) => match &**inner {
            Expr::EvtType { set, negate } => {
                expr_use(&Expr::EvtType { set: set.clone(), negate: !negate }, ty)
            }
            _ => Use::When(Clause::default()),
        },
        Expr::And(xs) => xs
            .iter()
            .try_fold(Clause::default(), |acc, x| match expr_use(x, ty) {
                Use::Never => None,
                Use::When(c) => Some(and(acc, c)),
            })
            .map_or(Use::Never, Use::When),
        Expr::Or(xs) => xs
            .iter()
            .filter_map(|x| match expr_use(x, ty) {
                Use::Never => None,
                Use::When(c) => Some(c),
            })
            .reduce(or)
            .map_or(Use::Never, Use::When),
        Expr::Check(c) => Use::When(check_use(c)),
    }
}

/// At most MAX_CLAUSES clauses meaning at least what `cs` means: first the
/// exact merge (same success and flags tests: union the paths), then, if
/// still too many, one clause bounding them all.
fn merge(cs: Vec<Clause>) -> Vec<Clause> {
    type Tests<'a> = (bool, u32, bool, Option<(&'a str, u32)>, u8, bool);
    let mut by_test: BTreeMap<Tests, Clause> = BTreeMap::new();
    for c in cs {
        let key = (c.need_success, c.flags_any, c.raw_dotdot, c.arg_eq, c.l4, c.peer_named);
        let merged = match by_test.remove(&key) {
            Some(prev) => or(prev, c),
            None => c,
        };
        by_test.insert(key, merged);
    }
    let all: Vec<Clause> = by_test.into_values().collect();
    // A clause another one already covers adds nothing.
    let out: Vec<Clause> = all
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            !all.iter().enumerate().any(|(j, w)| j != *i && implies(c, w) && (!implies(w, c) || j < *i))
        })
        .map(|(_, c)| c.clone())
        .collect();
    if out.len() <= MAX_CLAUSES {
        out
    } else {
        vec![out.into_iter().reduce(or).unwrap()]
    }
}

/// Whether some rule reads a file's fd (fd.* fields) on an event that does
/// not itself resolve the file (a dup, a read): the state's fd table must
/// then know the opened files such a rule can match.
pub fn fd_table_needs_files(rules: &RuleSet) -> bool {
    state_file_clause(rules).is_some()
}

/// Which successful opens the fd table needs: those whose path some rule
/// reading file fds on other events can match (`evt.type = ftruncate and
/// fd.name startswith /var/log/` needs opens below /var/log/ only). None:
/// no rule reads file fds. A rule whose condition requires a non-file fd
/// type (`fd.type in (ipv4, ipv6)`) needs no files.
fn state_file_clause(rules: &RuleSet) -> Option<Clause> {
    let mut need: Option<Clause> = None;
    for r in rules.rules().iter().filter(|r| r.is_active()) {
        let output_reads_fds = r.output_fields().any(|f| f.starts_with("fd."));
        for t in r.event_types.iter() {
            let Some(s) = syscall_by_name(t.name()).filter(|s| !kfilter::has_resolved_path(s.nr)) else {
                continue;
            };
            // An opened file reaches the event through the table only by its
            // `fd` parameter or as what a dup returns (source.rs's lookup_fd):
            // socket and accept name the socket they make, the opens the file
            // the kernel resolved, and execveat's dirfd names nothing (nor in Falco).
            let takes_a_file = matches!(s.name, "dup" | "dup2" | "dup3")
                || s.params.unwrap_or_default().iter().any(|p| p.name == "fd");
            if !takes_a_file {
                continue;
            }
            let (cond_reads, paths) = match r.condition() {
                None => (false, None),
                Some(e) if !may_be_file(e) => continue,
                Some(e) => match expr_use(e, t) {
                    Use::Never => continue,
                    Use::When(c) => (mentions_fd(e, t), c.paths),
                },
            };
            let reads_fd = cond_reads || output_reads_fds;
            if !reads_fd {
                continue;
            }
            // The output is rendered only when the condition held, so the
            // condition's bound on the path holds for it too.
            let wanted = Clause { need_success: true, paths, ..Clause::default() };
            need = Some(match need {
                Some(n) => or(n, wanted),
                None => wanted,
            });
        }
    }
    need
}

/// Whether the condition reads an fd.* field on events of type `ty`
/// (branches that cannot hold for `ty` do not count).
fn mentions_fd(e: &Expr, ty: EventType) -> bool {
    match e {
        Expr::Const(_) | Expr::EvtType { .. } => false,
        Expr::Check(c) => c.sel.field.name().starts_with("fd."),
        Expr::Not(x) => mentions_fd(x, ty),
        Expr::And(xs) => {
            !xs.iter().any(|x| matches!(x, Expr::EvtType { .. }) && expr_use(x, ty) == Use::Never)
                && xs.iter().any(|x| mentions_fd(x, ty))
        }
        Expr::Or(xs) => xs.iter().any(|x| mentions_fd(x, ty)),
    }
}

/// False when a top-level conjunct pins fd.type/fd.typechar to non-files.
fn may_be_file(e: &Expr) -> bool {
    fd_type_may_be(e, |b| matches!(b, b"file" | b"f" | b"directory" | b"d"))
}

/// False when a top-level conjunct pins fd.type/fd.typechar (`=`, `in`) to
/// values none of which `kind` accepts.
pub(crate) fn fd_type_may_be(e: &Expr, kind: impl Fn(&[u8]) -> bool) -> bool {
    let conjuncts: &[Expr] = match e {
        Expr::And(xs) => xs,
        e => std::slice::from_ref(e),
    };
    !conjuncts.iter().any(|x| match x {
        Expr::Check(c)
            if matches!(c.sel.field, Field::FdType | Field::FdTypechar) && c.sel.tfs.is_empty() =>
        {
            matches!(c.op, Op::Eq | Op::In) && lits(&c.rhs).is_some_and(|v| !v.iter().any(|b| kind(b)))
        }
        _ => false,
    })
}

/// The filter for `syscalls` (what is attached), from the rules and the
/// state's needs, plus the user's drops.
pub fn derive(rules: &RuleSet, syscalls: &[&'static SyscallInfo], drops: &[KernelDrop]) -> KernelFilter {
    derive_with(Some(rules), syscalls, drops)
}

/// As [`derive`]; without rules, the user's drops only.
pub fn derive_with(
    rules: Option<&RuleSet>,
    syscalls: &[&'static SyscallInfo],
    drops: &[KernelDrop],
) -> KernelFilter {
    let files_for_state = rules.and_then(state_file_clause);
    // A socket() kept back leaves its fd untold: only when no rule reads it later.
    let sockets_kept = rules.is_some_and(|r| !sockets::socket_fds_needed(r));
    let mut out = KernelFilter::default();
    for s in syscalls {
        let mut f = SyscallFilter { nr: s.nr, ..SyscallFilter::default() };
        // connect's clauses keep back only connects on untold sockets (kfilter.h).
        let judged = kfilter::has_resolved_path(s.nr) || (sockets::JUDGED.contains(&s.name) && sockets_kept);
        if let Some(rules) = rules.filter(|_| judged) {
            f.clauses = rule_clauses(rules, s, files_for_state.clone());
        }
        let state_needs = harrier_state::STATE_SYSCALLS.contains(&s.name);
        for d in
            drops.iter().filter(|d| d.syscalls.as_ref().is_none_or(|v| v.contains(&s.nr)) && !state_needs)
        {
            f.drop_comms.extend(d.comms.iter().cloned());
        }
        f.untold = s.name == "close" && rules.is_some_and(|r| !read_by_a_rule(r, s));
        if !f.clauses.is_empty() || !f.drop_comms.is_empty() || f.untold {
            out.syscalls.push(f);
        }
    }
    out
}

/// Whether an active rule sees events of `s` (one without evt.type sees all).
fn read_by_a_rule(rules: &RuleSet, s: &SyscallInfo) -> bool {
    let Some(ty) = EventType::from_name(s.name) else { return true };
    rules.rules().iter().any(|r| r.is_active() && r.event_types.contains(ty))
}

fn rule_clauses(rules: &RuleSet, s: &SyscallInfo, files_for_state: Option<Clause>) -> Vec<Clause> {
    let Some(ty) = EventType::from_name(s.name) else { return Vec::new() };
    let mut cs = Vec::new();
    // The state's need of the opened files (socket() is judged by rules alone: `derive_with`).
    let opens = kfilter::has_resolved_path(s.nr);
    if let Some(c) = files_for_state.filter(|_| opens && harrier_state::STATE_SYSCALLS.contains(&s.name)) {
        cs.push(c);
    }
    for r in rules.rules().iter().filter(|r| r.is_active() && r.event_types.contains(ty)) {
        match r.condition().map_or(Use::When(Clause::default()), |e| expr_use(e, ty)) {
            Use::Never => {}
            Use::When(c) if c == Clause::default() => return Vec::new(), // takes every event
            Use::When(c) => cs.push(c),
        }
    }
    if cs.is_empty() {
        // Attached, yet nothing uses it: keep it as it is rather than guess.
        return Vec::new();
    }
    if kfilter::flags_offset(s.nr).is_none() {
        // creat has no flags argument (it always writes): nothing to test.
        cs.iter_mut().for_each(|c| c.flags_any = 0);
    }
    for c in cs.iter_mut().filter(|c| c.arg_eq.is_some_and(|(p, _)| kfilter::param_offset(s.nr, p).is_none()))
    {
        c.arg_eq = None;
    }
    sockets::fit_socket_tests(s.name, &mut cs);
    merge(cs)
}

/// Whether every event `strong` keeps, `weak` keeps too.
fn implies(strong: &Clause, weak: &Clause) -> bool {
    let success = !weak.need_success || strong.need_success;
    let flags = weak.flags_any == 0 || (strong.flags_any != 0 && strong.flags_any & !weak.flags_any == 0);
    let paths = match (&strong.paths, &weak.paths) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => a.iter().all(|m| b.contains(m)),
    };
    let raw = !weak.raw_dotdot || strong.raw_dotdot;
    let arg = weak.arg_eq.is_none() || strong.arg_eq == weak.arg_eq;
    let sock = (weak.l4 == 0 || strong.l4 == weak.l4) && (!weak.peer_named || strong.peer_named);
    success && flags && paths && raw && arg && sock
}

/// One line for `harrier run`'s start: what the kernel keeps back.
pub fn summary(f: &KernelFilter) -> String {
    let mut parts = Vec::new();
    for s in &f.syscalls {
        let name = harrier_schema::syscall_by_nr(s.nr).map_or("?", |i| i.name);
        if !s.clauses.is_empty() {
            let when: Vec<String> = s.clauses.iter().map(describe_clause).collect();
            parts.push(format!("{name} sent if {}", when.join(" or ")));
        }
        if !s.drop_comms.is_empty() {
            parts.push(format!("{name} dropped for {} process names", s.drop_comms.len()));
        }
        if s.untold {
            parts.push(format!("{name} not sent when its fd's open was not"));
        }
    }
    if parts.is_empty() {
        return "nothing to filter (every captured event may be used)".into();
    }
    parts.join("; ")
}

fn describe_clause(c: &Clause) -> String {
    let mut v = Vec::new();
    if c.need_success {
        v.push("it succeeded".to_string());
    }
    match c.flags_any {
        0 => {}
        3 => v.push("opened for writing".into()),
        f => v.push(format!("flags & {f:#o}")),
    }
    if let Some(p) = &c.paths {
        v.push(format!("the path is one of {} names or prefixes", p.len()));
    }
    if c.raw_dotdot {
        v.push("the path as passed has \"..\"".into());
    }
    if let Some((param, value)) = c.arg_eq {
        v.push(format!("{param} = {value}"));
    }
    if c.l4 != 0 {
        v.push(format!("its protocol is {}", c.l4));
    }
    if c.peer_named {
        v.push("its peer is a rule's name's address".into());
    }
    format!("({})", v.join(" and "))
}

/// One `kernel_drop` entry: events of these process names (of these
/// syscalls; None: all) are not sent.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelDrop {
    pub comms: Vec<Vec<u8>>,
    pub syscalls: Option<Vec<u32>>,
    pub text: String,
}

/// Parses a `kernel_drop` condition: `proc.name` and `evt.type` tests
/// joined by `and`, the subset the kernel evaluates. Errors name the column.
pub fn parse_kernel_drop(text: &str) -> Result<KernelDrop> {
    let ast =
        harrier_rules::parser::parse(text).map_err(|e| anyhow!("column {}: {}", e.span.start + 1, e.msg))?;
    let parts = match ast {
        Ast::And(xs) => xs,
        a => vec![a],
    };
    let mut d = KernelDrop { comms: Vec::new(), syscalls: None, text: text.to_string() };
    for p in parts {
        let Ast::Check { lhs, op, rhs, .. } = p else {
            bail!("only 'and' of proc.name and evt.type tests can run in the kernel ({})", describe(&p));
        };
        let col = lhs.span.start + 1;
        let values: Vec<String> = match (op, &rhs) {
            (Op::Eq, Rhs::Value(l)) => vec![l.text.clone()],
            (Op::In, Rhs::List(ls, _)) => ls.iter().map(|l| l.text.clone()).collect(),
            _ => bail!("column {col}: {} must be tested with = or in (...) to run in the kernel", lhs.name),
        };
        if !lhs.transformers.is_empty() || lhs.arg.is_some() {
            bail!("column {col}: {} with an argument or transformer cannot run in the kernel", lhs.name);
        }
        match lhs.name.as_str() {
            "proc.name" => {
                for v in values {
                    if v.len() > 15 {
                        bail!("column {col}: process name '{v}' is longer than the kernel's 15-byte comm");
                    }
                    d.comms.push(v.into_bytes());
                }
            }
            "evt.type" => {
                let nrs = values
                    .iter()
                    .map(|v| {
                        syscall_by_name(v)
                            .map(|s| s.nr)
                            .ok_or_else(|| anyhow!("column {col}: unknown syscall '{v}'"))
                    })
                    .collect::<Result<Vec<u32>>>()?;
                d.syscalls = Some(nrs);
            }
            f => bail!("column {col}: {f} cannot be evaluated in the kernel (proc.name and evt.type can)"),
        }
    }
    if d.comms.is_empty() {
        bail!("a kernel_drop condition needs a proc.name test");
    }
    Ok(d)
}

fn describe(a: &Ast) -> &'static str {
    match a {
        Ast::Or(_) => "'or' found: write one kernel_drop entry per alternative",
        Ast::Not(..) => "'not' found",
        Ast::Macro(..) => "a macro found",
        _ => "nested condition found",
    }
}

mod sockets;
#[cfg(test)]
mod tests;
