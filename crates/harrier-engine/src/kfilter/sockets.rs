//! Which socket() events can stay in the kernel.
//!
//! A socket() kept back leaves user space without the fd (untold.h marks
//! it, so its close stays in the kernel too). That is exact when no rule
//! reads a socket's fd on a later event, except on the events that say
//! what their socket is from the kernel (events.tbl's `socktype`): connect
//! and the dups, from which the state makes the entry socket() would have.

use super::{expr_use, lits, Use};
use harrier_rules::ast::Op;
use harrier_rules::events::EventType;
use harrier_rules::expr::{CRhs, Check, Expr};
use harrier_rules::fields::Field;
use harrier_rules::ruleset::RuleSet;
use harrier_schema::syscall_by_name;

/// The socket syscalls the kernel filter judges when sockets are kept back.
pub(super) const JUDGED: [&str; 2] = ["socket", "connect"];

/// `fd.l4proto = tcp` (or udp, or `in` with one of them): the protocol's number.
pub(super) fn l4_number(c: &Check) -> u8 {
    match lits(&c.rhs).as_deref() {
        Some([b"tcp"]) if c.sel.tfs.is_empty() => 6,
        Some([b"udp"]) if c.sel.tfs.is_empty() => 17,
        _ => 0,
    }
}

/// Keeps only the tests the kernel makes of syscall `name`: a connect's
/// socket tests (and never success: its fd.* fields have values when it
/// failed, unlike an open's), nobody else's.
pub(super) fn fit_socket_tests(name: &str, cs: &mut [super::Clause]) {
    for c in cs {
        if name == "connect" {
            c.need_success = false;
        } else {
            c.l4 = 0;
            c.peer_named = false;
        }
    }
}

/// Events that describe their socket themselves, and socket() (its own rules
/// have clauses of their own).
const SELF_DESCRIBED: [&str; 5] = ["socket", "connect", "dup", "dup2", "dup3"];

/// Whether some rule reads a socket's fd (its name, type, addresses) on an
/// event that does not describe the socket itself: then every socket() is sent.
pub(super) fn socket_fds_needed(rules: &RuleSet) -> bool {
    rules.rules().iter().filter(|r| r.is_active()).any(|r| {
        let output_reads_fds = r.output_fields().any(reads_an_fd);
        r.event_types.iter().any(|t| {
            let Some(s) = syscall_by_name(t.name()).filter(|s| !SELF_DESCRIBED.contains(&s.name)) else {
                return false;
            };
            let names_an_fd = s.params.unwrap_or_default().iter().any(|p| p.name == "fd");
            if !names_an_fd {
                return false;
            }
            match r.condition() {
                None => output_reads_fds,
                Some(e) => {
                    expr_use(e, t) != Use::Never
                        && l4_may(e, t) != 0
                        && may_be_socket(e)
                        && (output_reads_fds || mentions(e, &reads_an_fd))
                }
            }
        })
    })
}

/// A field that shows an fd's table entry: fd.*, or the arguments as Falco
/// renders them (an fd argument with its name).
fn reads_an_fd(name: &str) -> bool {
    name.starts_with("fd.") || name.starts_with("evt.arg") || name == "evt.info"
}

fn mentions(e: &Expr, f: &impl Fn(&str) -> bool) -> bool {
    match e {
        Expr::Const(_) | Expr::EvtType { .. } => false,
        Expr::Check(c) => f(c.sel.field.name()),
        Expr::Not(x) => mentions(x, f),
        Expr::And(xs) | Expr::Or(xs) => xs.iter().any(|x| mentions(x, f)),
    }
}

/// fd.l4proto's values, one bit each.
const L4: [&[u8]; 4] = [b"tcp", b"udp", b"icmp", b"raw"];
const L4_OTHER: u8 = 1 << L4.len();
const L4_ALL: u8 = (L4_OTHER << 1) - 1;

fn l4_bits(vals: &[&[u8]]) -> u8 {
    vals.iter().fold(0, |m, v| m | L4.iter().position(|l| l == v).map_or(L4_OTHER, |i| 1 << i))
}

/// The fd.l4proto values under which `e` may hold on events of type `ty`:
/// 0 when its tests contradict (the `outbound` macro's sendto branch wants
/// `fd.l4proto != tcp`, the SSH rule that uses it `fd.l4proto=tcp`).
fn l4_may(e: &Expr, ty: EventType) -> u8 {
    match e {
        Expr::Const(false) => 0,
        Expr::EvtType { .. } if expr_use(e, ty) == Use::Never => 0,
        Expr::Check(c) if c.sel.field == Field::FdL4proto && c.sel.tfs.is_empty() => {
            match (c.op, lits(&c.rhs)) {
                (Op::Eq | Op::In, Some(v)) => l4_bits(&v),
                (Op::Ne, Some(v)) => L4_ALL & !l4_bits(&v),
                _ => L4_ALL,
            }
        }
        Expr::And(xs) => xs.iter().fold(L4_ALL, |m, x| m & l4_may(x, ty)),
        Expr::Or(xs) => xs.iter().fold(0, |m, x| m | l4_may(x, ty)),
        _ => L4_ALL,
    }
}

/// False when a top-level conjunct pins fd.type/fd.typechar to kinds of fd
/// that are no socket (files, directories, pipes...).
fn may_be_socket(e: &Expr) -> bool {
    const NOT_SOCKETS: [&[u8]; 19] = [
        b"file",
        b"f",
        b"directory",
        b"d",
        b"pipe",
        b"p",
        b"memfd",
        b"m",
        b"event",
        b"e",
        b"signalfd",
        b"s",
        b"timerfd",
        b"t",
        b"inotify",
        b"i",
        b"eventpoll",
        b"l",
        b"unknown",
    ];
    super::fd_type_may_be(e, |b| !NOT_SOCKETS.contains(&b))
}

/// `evt.arg.domain = AF_PACKET` (or `contains`, `in`) on socket(): the one
/// family value it allows, if exactly one family's name passes.
pub(super) fn domain_eq(c: &Check) -> Option<u32> {
    if c.sel.field != Field::EvtArg || c.sel.arg.key() != Some("domain") || !c.sel.tfs.is_empty() {
        return None;
    }
    let vals = match &c.rhs {
        CRhs::One(_) | CRhs::Many(_) | CRhs::Set { .. } => lits(&c.rhs)?,
        _ => return None,
    };
    let passes = |name: &str| match c.op {
        Op::Eq | Op::In => vals.iter().any(|v| v == &name.as_bytes()),
        Op::Contains => vals.iter().any(|v| name.as_bytes().windows(v.len().max(1)).any(|w| w == *v)),
        _ => false,
    };
    let mut allowed = (0..64u32)
        .filter(|&v| harrier_schema::render::render("socket_family", v as u64).is_some_and(|n| passes(&n)));
    match (allowed.next(), allowed.next()) {
        (Some(v), None) => Some(v),
        _ => None,
    }
}
