//! A compiled condition as the kernel can test it, for one syscall's events.

use super::{cond, strings, G};
use harrier_capture::guard::{Entry, Op as GOp, Src, MAX_STR};
use harrier_capture::kfilter::{flags_offset, has_resolved_path};
use harrier_rules::ast::Op;
use harrier_rules::events::EventType;
use harrier_rules::expr::{CRhs, Check, Expr};
use harrier_rules::fields::Field;
use harrier_schema::SyscallInfo;

const O_ACCMODE: u32 = 3;
const O_DIRECTORY: u32 = 0o200000;
/// Ancestors the kernel walks up to (`hr_g_ancestor`).
const MAX_DEPTH: u32 = 8;

/// Split on the call's success first: most fields' meaning depends on it,
/// and each side then simplifies (a failed open reads no file).
pub(crate) fn lower(e: &Expr, ty: EventType, s: &SyscallInfo) -> G {
    let ok = super::simplify(lower_in(e, ty, s, true));
    let failed = super::simplify(lower_in(e, ty, s, false));
    match (&ok, &failed) {
        (G::Unknown(_), G::Unknown(_)) => ok,
        _ => cond(success(), ok, failed),
    }
}

fn lower_in(e: &Expr, ty: EventType, s: &SyscallInfo, ok: bool) -> G {
    match e {
        Expr::Const(b) => G::Const(*b),
        Expr::EvtType { set, negate } => G::Const(set.contains(ty) != *negate),
        Expr::Not(x) => G::Not(Box::new(lower_in(x, ty, s, ok))),
        Expr::And(xs) => G::And(xs.iter().map(|x| lower_in(x, ty, s, ok)).collect()),
        Expr::Or(xs) => G::Or(xs.iter().map(|x| lower_in(x, ty, s, ok)).collect()),
        Expr::Check(c) => check(c, s, ok).unwrap_or_else(|| unknown(c)),
    }
}

fn unknown(c: &Check) -> G {
    G::Unknown(c.sel.field.name().to_string())
}

fn test(op: GOp, entries: Vec<Entry>) -> G {
    G::Test(op, entries)
}

fn success() -> G {
    test(GOp::Success, vec![])
}

fn flags(mask: u32, value: u32) -> G {
    test(GOp::Flags { mask, value }, vec![])
}

fn not(g: G) -> G {
    G::Not(Box::new(g))
}

fn str_in(src: Src, entries: Vec<Entry>) -> G {
    test(GOp::StrIn { src, set: 0, dirs: false }, entries)
}

fn is_exec(s: &SyscallInfo) -> bool {
    matches!(s.name, "execve" | "execveat")
}

/// `field = x`, `in (...)`, `startswith x` on strings as set entries; with
/// `!=` the caller negates. None: another operator, or too long to test.
fn entries(c: &Check) -> Option<Vec<Entry>> {
    let lits = strings(c)?;
    let (exact, make): (bool, fn(Vec<u8>) -> Entry) = match c.op {
        Op::Eq | Op::Ne | Op::In => (true, Entry::Exact),
        Op::StartsWith => (false, Entry::Prefix),
        _ => return None,
    };
    if lits.iter().any(|b| b.len() + exact as usize > MAX_STR || (!exact && b.is_empty())) {
        return None;
    }
    Some(lits.into_iter().map(make).collect())
}

fn negated(c: &Check, g: G) -> G {
    if c.op == Op::Ne {
        not(g)
    } else {
        g
    }
}

fn bool_lit(c: &Check) -> Option<bool> {
    match (&c.rhs, c.op) {
        (CRhs::One(l), Op::Eq) => l.boolean,
        (CRhs::One(l), Op::Ne) => l.boolean.map(|b| !b),
        _ => None,
    }
}

/// `ok`: the call succeeded.
fn check(c: &Check, s: &SyscallInfo, ok: bool) -> Option<G> {
    if !c.sel.tfs.is_empty() {
        return None;
    }
    let path = has_resolved_path(s.nr);
    // fd.* of a failed open: user space names it from the caller's path; an
    // exec that failed leaves the old program's fields.
    let on_success = |g: G| if ok { g } else { unknown(c) };
    Some(match c.sel.field {
        // Events are numbered from 1: Falco's never_true macro.
        Field::EvtNum if c.op == Op::Eq && matches!(&c.rhs, CRhs::One(l) if l.num == Some(0)) => {
            G::Const(false)
        }
        Field::EvtRes if matches!(&c.rhs, CRhs::One(l) if &l.bytes[..] == b"SUCCESS") => {
            negated(c, G::Const(ok))
        }
        Field::EvtRawres if c.op == Op::Ge && matches!(&c.rhs, CRhs::One(l) if l.num == Some(0)) => {
            G::Const(ok)
        }
        Field::EvtIsOpenRead | Field::EvtIsOpenWrite if flags_offset(s.nr).is_some() => {
            let want = bool_lit(c)?;
            let other = if c.sel.field == Field::EvtIsOpenRead { 0 } else { 1 };
            let g = G::Or(vec![flags(O_ACCMODE, other), flags(O_ACCMODE, 2)]);
            if want {
                g
            } else {
                not(g)
            }
        }
        Field::FdTypechar | Field::FdType if path && flags_offset(s.nr).is_some() => {
            let lits = strings(c)?;
            if !matches!(c.op, Op::Eq | Op::In | Op::Ne) {
                return None;
            }
            let has = |a: &[u8], b: &[u8]| lits.iter().any(|l| &l[..] == a || &l[..] == b);
            let (file, dir) = (has(b"f", b"file"), has(b"d", b"directory"));
            // An open's fd: a directory if asked for one, else a file when
            // its path is absolute, else something only user space names.
            let typed = G::Or(vec![
                G::And(vec![flags(O_DIRECTORY, O_DIRECTORY), G::Const(dir)]),
                G::And(vec![flags(O_DIRECTORY, 0), G::Const(file)]),
            ]);
            let abs = str_in(Src::Path, vec![Entry::Prefix(b"/".to_vec())]);
            on_success(negated(c, cond(abs, typed, unknown(c))))
        }
        // An open's fd is its return value: none, or negative, when it failed.
        Field::FdNum if path && c.op == Op::Ge && matches!(&c.rhs, CRhs::One(l) if l.num == Some(0)) => {
            G::Const(ok)
        }
        Field::FdName if path => on_success(negated(c, str_in(Src::Path, entries(c)?))),
        Field::FdDirectory if path && matches!(c.op, Op::Eq | Op::In | Op::Ne) => {
            let dirs = strings(c)?
                .into_iter()
                .map(|mut d| {
                    if !d.ends_with(b"/") {
                        d.push(b'/');
                    }
                    d
                })
                .collect::<Vec<_>>();
            if dirs.iter().any(|d| d.len() > MAX_STR) {
                return None;
            }
            let g = test(
                GOp::StrIn { src: Src::Path, set: 0, dirs: true },
                dirs.into_iter().map(Entry::Dir).collect(),
            );
            on_success(negated(c, g))
        }
        Field::ProcName => negated(c, str_in(Src::Comm, entries(c)?)),
        // No parent: no value, and `!=` compares false then.
        Field::ProcPname if c.op != Op::Ne => str_in(Src::Ancestor(1), entries(c)?),
        Field::ProcAname if c.op != Op::Ne => {
            let n = c.sel.arg.index().filter(|n| (1..=MAX_DEPTH).contains(n))?;
            str_in(Src::Ancestor(n as u8), entries(c)?)
        }
        Field::ProcExe if is_exec(s) => on_success(negated(c, str_in(Src::Exe, entries(c)?))),
        Field::ProcArgs if is_exec(s) => {
            // The kernel joins empty arguments with their spaces: a literal
            // with two spaces in a row might tell them apart.
            if strings(c)?.iter().any(|l| l.windows(2).any(|w| w == b"  ") || l.first() == Some(&b' ')) {
                return None;
            }
            on_success(negated(c, str_in(Src::Args, entries(c)?)))
        }
        Field::ProcCmdline | Field::ProcPcmdline if c.op == Op::StartsWith => {
            let src = if c.sel.field == Field::ProcCmdline { Src::Comm } else { Src::Ancestor(1) };
            G::And(vec![str_in(src, cmdline_names(&strings(c)?)?), unknown(c)])
        }
        Field::UserUid if matches!(c.op, Op::Eq | Op::In | Op::Ne) => {
            let uids = match &c.rhs {
                CRhs::One(l) => vec![l.num?],
                CRhs::Many(ls) => ls.iter().map(|l| l.num).collect::<Option<_>>()?,
                CRhs::Set { lits, .. } => lits.iter().map(|l| l.num).collect::<Option<_>>()?,
                _ => return None,
            };
            let set = uids
                .into_iter()
                .map(|u| u32::try_from(u).ok().map(|u| Entry::Exact(u.to_le_bytes().to_vec())))
                .collect::<Option<Vec<_>>>()?;
            negated(c, str_in(Src::Uid, set))
        }
        Field::EvtArg => arg(c, s)?,
        f if host_value(f).is_some() => {
            let v = host_value(f)?;
            let lits = strings(c)?;
            let hit = match c.op {
                Op::Eq | Op::Ne | Op::In => lits.iter().any(|l| &l[..] == v),
                Op::StartsWith => lits.iter().any(|l| v.starts_with(l)),
                _ => return None,
            };
            cond(test(GOp::HostCgroup, vec![]), G::Const(hit != (c.op == Op::Ne)), unknown(c))
        }
        _ => return None,
    })
}

/// Where Harrier's parameter `name` of `s` is in its record: a fixed one's
/// offset, or a variable one's index and the first variable one's offset.
enum Place {
    Fixed(u32),
    Var { index: u8, first: u32 },
}

fn place(s: &SyscallInfo, name: &str) -> Option<Place> {
    let (mut off, mut vars) = (harrier_schema::wire::PARAMS_BASE as u32, 0u8);
    let params = s.params?;
    let first = params.iter().filter_map(|p| p.wire.fixed_size()).sum::<usize>() as u32 + off;
    for p in params {
        match p.wire.fixed_size() {
            Some(n) if p.name == name => return Some(Place::Fixed(off)).filter(|_| n >= 4),
            Some(n) => off += n as u32,
            None if p.name == name => return Some(Place::Var { index: vars, first }).filter(|_| vars < 8),
            None => vars += 1,
        }
    }
    None
}

/// `evt.arg.X` as Falco names and writes it: a string or path parameter
/// (as written when absolute: user space resolves a relative one), or
/// ptrace's request by its names.
fn arg(c: &Check, s: &SyscallInfo) -> Option<G> {
    use harrier_schema::falco_params::Kind;
    let key = c.sel.arg.key()?;
    let fp = harrier_schema::falco_params::params(s.name)?.iter().find(|p| p.name == key)?;
    match (fp.kind, place(s, fp.src)?) {
        (Kind::Str, Place::Var { index, first }) => {
            Some(negated(c, str_in(Src::Param { index, first }, entries(c)?)))
        }
        (Kind::Path | Kind::RelPath(_), Place::Var { index, first }) => {
            let src = Src::Param { index, first };
            let abs = str_in(src, vec![Entry::Prefix(b"/".to_vec())]);
            Some(cond(abs, negated(c, str_in(src, entries(c)?)), unknown(c)))
        }
        (Kind::Named(r @ "falco_ptrace_request"), Place::Fixed(off)) => {
            let lits = strings(c)?;
            // Falco's text: the names, or the number when none applies.
            let named = |v: u64| match harrier_schema::falco::parts(r, v) {
                Some((_, names)) if !names.is_empty() => names,
                Some((n, _)) => n,
                None => v.to_string(),
            };
            let hit = |name: &str| match c.op {
                Op::Eq | Op::Ne | Op::In => lits.iter().any(|l| l == name.as_bytes()),
                Op::Contains => {
                    lits.iter().any(|l| name.as_bytes().windows(l.len().max(1)).any(|w| w == &l[..]))
                }
                _ => false,
            };
            if !matches!(c.op, Op::Eq | Op::Ne | Op::In | Op::Contains) {
                return None;
            }
            // Requests are below 0x4300: every one that has a name.
            let values: Vec<u32> = (0..0x4300u32).filter(|&v| hit(&named(v as u64))).collect();
            if values.len() > 16 {
                return None;
            }
            let g = G::Or(
                values
                    .into_iter()
                    .map(|value| test(GOp::Num { off, mask: u32::MAX, value }, vec![]))
                    .collect(),
            );
            Some(negated(c, g))
        }
        _ => None,
    }
}

/// The values user space gives a host (no container) process.
fn host_value(f: Field) -> Option<&'static [u8]> {
    Some(match f {
        Field::ContainerId | Field::ContainerName | Field::ContainerType => b"host",
        Field::ContainerImage | Field::ContainerImageRepository | Field::ContainerImageTag => b"",
        _ => return None,
    })
}

/// Process names a command line starting with one of `lits` needs. It is
/// the name, a space, the arguments: a literal "W rest" needs the name W or
/// "W ..." (a name with a space), one without a space a name starting so.
fn cmdline_names(lits: &[Vec<u8>]) -> Option<Vec<Entry>> {
    let mut out = Vec::new();
    for l in lits {
        match l.iter().position(|&c| c == b' ') {
            Some(i) => {
                let w = &l[..i];
                if w.is_empty() || w.len() + 1 > MAX_STR {
                    return None;
                }
                out.push(Entry::Exact(w.to_vec()));
                let mut p = w.to_vec();
                p.push(b' ');
                out.push(Entry::Prefix(p));
            }
            None if !l.is_empty() && l.len() <= MAX_STR => out.push(Entry::Prefix(l.clone())),
            None => return None,
        }
    }
    Some(out)
}
