//! A compiled condition as the kernel can test it, for one syscall's events.

use super::{cond, strings, G};
use harrier_capture::guard::{Entry, Mode, Op as GOp, Src, MAX_NEEDLE, MAX_STR};
use harrier_capture::kfilter::{flags_offset, has_resolved_path};
use harrier_rules::ast::Op;
use harrier_rules::events::EventType;
use harrier_rules::expr::{CRhs, Check, Expr};
use harrier_rules::fields::Field;
use harrier_schema::falco_params::Kind;
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
    if let (Some(mode), Some((src, needs_success))) = (substr_mode(c.op), string_src(c, s, path)) {
        let g = substr(c, src, mode)?;
        return Some(if needs_success { on_success(g) } else { g });
    }
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
        Field::ProcAname if c.op != Op::Ne => str_in(ancestor(c)?, entries(c)?),
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
        Field::ProcIsExeFromMemfd if is_exec(s) => {
            let want = bool_lit(c)?;
            let Place::Fixed(off) = place(s, "exe_flags")? else { return None };
            let memfd = harrier_state::process::EXE_MEMFD;
            on_success(test(GOp::Num { off, mask: memfd, value: if want { memfd } else { 0 } }, vec![]))
        }
        Field::ProcDuration => duration(c)?,
        Field::ProcExepath if is_exec(s) => on_success(negated(c, str_in(exepath(s)?, entries(c)?))),
        // The last part of an absolute path: it ends with "/name".
        Field::FdFilename if path && matches!(c.op, Op::Eq | Op::In | Op::Ne) => {
            let names = strings(c)?;
            if names.iter().any(|n| n.is_empty() || n.contains(&b'/') || n.len() + 1 > MAX_NEEDLE) {
                return None;
            }
            let ends = G::Or(
                names
                    .into_iter()
                    .map(|mut n| {
                        n.insert(0, b'/');
                        test(
                            GOp::Substr { src: Src::Path, needle: 0, mode: Mode::EndsWith },
                            vec![Entry::Exact(n)],
                        )
                    })
                    .collect(),
            );
            let abs = str_in(Src::Path, vec![Entry::Prefix(b"/".to_vec())]);
            let whole = test(GOp::Whole { src: Src::Path }, vec![]);
            on_success(cond(G::And(vec![abs, whole]), negated(c, ends), unknown(c)))
        }
        f if host_value(f).is_some() => {
            let v = host_value(f)?;
            let lits = strings(c)?;
            let hit = match c.op {
                Op::Eq | Op::Ne | Op::In => lits.iter().any(|l| &l[..] == v),
                Op::StartsWith => lits.iter().any(|l| v.starts_with(l)),
                Op::EndsWith => lits.iter().any(|l| v.ends_with(l)),
                Op::Contains => {
                    lits.iter().any(|l| v.windows(l.len().max(1)).any(|w| w == &l[..]) || l.is_empty())
                }
                _ => return None,
            };
            cond(test(GOp::HostCgroup, vec![]), G::Const(hit != (c.op == Op::Ne)), unknown(c))
        }
        _ => return None,
    })
}

fn substr_mode(op: Op) -> Option<Mode> {
    Some(match op {
        Op::Contains => Mode::Contains,
        Op::IContains => Mode::IContains,
        Op::EndsWith => Mode::EndsWith,
        _ => return None,
    })
}

/// The kernel's string for a field the substring operators test, and
/// whether it has its meaning only when the call succeeded.
fn string_src(c: &Check, s: &SyscallInfo, path: bool) -> Option<(Src, bool)> {
    Some(match c.sel.field {
        Field::FdName if path => (Src::Path, true),
        Field::ProcName => (Src::Comm, false),
        Field::ProcPname => (Src::Ancestor(1), false),
        Field::ProcAname => (ancestor(c)?, false),
        Field::ProcExe if is_exec(s) => (Src::Exe, true),
        Field::ProcExepath if is_exec(s) => (exepath(s)?, true),
        // Arguments joined by the kernel: an empty one leaves two spaces.
        Field::ProcArgs if is_exec(s) => {
            if strings(c)?.iter().any(|l| l.windows(2).any(|w| w == b"  ")) {
                return None;
            }
            (Src::Args, true)
        }
        Field::EvtArg => match falco_param(c, s)? {
            (Kind::Str, Place::Var { index, first }) => (Src::Param { index, first }, false),
            _ => return None,
        },
        _ => return None,
    })
}

/// `proc.aname[n]`'s ancestor, within the depth the kernel walks.
fn ancestor(c: &Check) -> Option<Src> {
    let n = c.sel.arg.index().filter(|n| (1..=MAX_DEPTH).contains(n))?;
    Some(Src::Ancestor(n as u8))
}

/// `proc.exepath` at exec: the record's new image path.
fn exepath(s: &SyscallInfo) -> Option<Src> {
    match place(s, "exe")? {
        Place::Var { index, first } => Some(Src::Param { index, first }),
        Place::Fixed(_) => None,
    }
}

/// `evt.arg.KEY` as Falco names it: its kind and where the record has it.
fn falco_param(c: &Check, s: &SyscallInfo) -> Option<(Kind, Place)> {
    let key = c.sel.arg.key()?;
    let fp = harrier_schema::falco_params::params(s.name)?.iter().find(|p| p.name == key)?;
    Some((fp.kind, place(s, fp.src)?))
}

/// `contains`, `icontains`, `endswith` (any of the literals). A string cut
/// to the kernel's buffer proves a find, never a miss: a miss there, or any
/// `endswith` of it, is user space's.
fn substr(c: &Check, src: Src, mode: Mode) -> Option<G> {
    let lits = strings(c)?;
    if lits.is_empty() || lits.iter().any(|l| l.is_empty() || l.len() > MAX_NEEDLE) {
        return None;
    }
    if mode == Mode::IContains && lits.iter().any(|l| !l.is_ascii()) {
        return None;
    }
    let found = G::Or(
        lits.into_iter()
            .map(|l| {
                let l = if mode == Mode::IContains { l.to_ascii_lowercase() } else { l };
                test(GOp::Substr { src, needle: 0, mode }, vec![Entry::Exact(l)])
            })
            .collect(),
    );
    let whole = test(GOp::Whole { src }, vec![]);
    Some(match (src, mode) {
        // Process names are whole: the kernel's comm is proc.name.
        (Src::Comm | Src::Ancestor(_), _) => found,
        (_, Mode::EndsWith) => cond(whole, found, unknown(c)),
        _ => G::Or(vec![found, G::And(vec![not(whole), unknown(c)])]),
    })
}

/// `proc.duration` against a number of ns: the kernel's age of the thread
/// group (its leader's start time, the clock of the events' timestamps).
fn duration(c: &Check) -> Option<G> {
    let CRhs::One(l) = &c.rhs else { return None };
    let n = u64::try_from(l.num?).ok()?;
    let older = |ns: u64| test(GOp::Age { ns }, vec![]);
    Some(match c.op {
        Op::Gt => older(n),
        Op::Ge if n > 0 => older(n - 1),
        Op::Le => not(older(n)),
        Op::Lt if n > 0 => not(older(n - 1)),
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
    let key = c.sel.arg.key()?;
    // An open's flags as Falco writes them ("O_TRUNC|O_CREAT|O_WRONLY"):
    // these names are no part of another's, so a name in the text is its bit.
    if key == "flags" && c.op == Op::Contains && flags_offset(s.nr).is_some() && has_resolved_path(s.nr) {
        let CRhs::One(l) = &c.rhs else { return None };
        let bit = crate::kfilter::open_flag_bit(&l.bytes)?;
        return Some(flags(bit, bit));
    }
    match falco_param(c, s)? {
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
