//! Compiled conditions and their evaluation. Fields are resolved, literals parsed and sets
//! built at load time; evaluating walks a small tree and never allocates.

use crate::ast::{Op, Transformer};
use crate::events::EventSet;
use crate::fields::{Field, FieldArg};
use crate::matchers::{self, FxSet};
use crate::memo::{Memo, NO_SLOT};
use crate::value::{EventSource, Value};
use std::net::IpAddr;
use std::sync::Mutex;

/// A literal, parsed every way its uses may need.
#[derive(Debug, Clone)]
pub struct Lit {
    pub bytes: Box<[u8]>,
    pub num: Option<i128>,
    pub net: Option<IpNet>,
    pub boolean: Option<bool>,
    /// `contains` searcher for `bytes`, built once: building one per comparison cost more
    /// than the search. Boxed: it is large and most literals never search.
    finder: Box<Finder>,
}

/// A substring searcher (its Debug shows the needle only, so equal literals print alike).
#[derive(Clone)]
struct Finder(memchr::memmem::Finder<'static>);

impl std::fmt::Debug for Finder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Finder({:?})", self.0.needle())
    }
}

impl Lit {
    pub fn new(text: &str) -> Lit {
        Lit {
            bytes: text.as_bytes().into(),
            num: parse_num(text),
            net: IpNet::parse(text),
            boolean: parse_bool(text),
            finder: Box::new(Finder(memchr::memmem::Finder::new(text.as_bytes()).into_owned())),
        }
    }
    pub fn bytes(b: Vec<u8>) -> Lit {
        let finder = Box::new(Finder(memchr::memmem::Finder::new(&b).into_owned()));
        Lit { bytes: b.into(), num: None, net: None, boolean: None, finder }
    }
}

fn parse_num(s: &str) -> Option<i128> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return i128::from_str_radix(h, 16).ok();
    }
    s.parse::<i128>().ok()
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// An address with a prefix length (a plain address is /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IpNet {
    pub addr: IpAddr,
    pub bits: u8,
}

impl IpNet {
    pub fn parse(s: &str) -> Option<IpNet> {
        let (a, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b.parse::<u8>().ok()?)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = bits.unwrap_or(max);
        (bits <= max).then_some(IpNet { addr, bits })
    }
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = if self.bits == 0 { 0 } else { u32::MAX << (32 - self.bits) };
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = if self.bits == 0 { 0 } else { u128::MAX << (128 - self.bits) };
                u128::from(n) & mask == u128::from(a) & mask
            }
            (IpAddr::V4(n), IpAddr::V6(a)) => a
                .to_ipv4_mapped()
                .is_some_and(|a| IpNet { addr: IpAddr::V4(n), bits: self.bits }.contains(IpAddr::V4(a))),
            _ => false,
        }
    }
}

/// A field with its argument and transformers (innermost first).
#[derive(Debug, Clone)]
pub struct FieldSel {
    pub field: Field,
    pub arg: FieldArg,
    pub tfs: Box<[Transformer]>,
}

/// What is on the right of a compiled comparison.
#[derive(Debug, Clone)]
pub enum CRhs {
    None,
    One(Lit),
    /// `in`/`intersects`: strings in a hash set, plus the literals for other value kinds.
    Set {
        strs: FxSet<Box<[u8]>>,
        lits: Box<[Lit]>,
    },
    /// `pmatch` prefixes.
    Prefixes(Box<[Box<[u8]>]>),
    Regex(regex::bytes::Regex),
    Field(FieldSel),
    /// Any of these literals with the check's operator: `a or b or c` on the same string
    /// field and operator, merged by the optimizer so the field is extracted once.
    Many(Box<[Lit]>),
    /// `fd.sip.name = x` (and `in`, `!=`): the addresses x resolved to.
    Names(std::sync::Arc<crate::dns::NameSet>),
}

#[derive(Debug, Clone)]
pub struct Check {
    pub sel: FieldSel,
    pub op: Op,
    pub rhs: CRhs,
    /// Where its per-event result is kept when other rules share it ([`crate::memo`]).
    pub slot: u32,
}

#[derive(Debug, Clone)]
pub enum Expr {
    Const(bool),
    And(Box<[Expr]>),
    Or(Box<[Expr]>),
    Not(Box<Expr>),
    /// `evt.type = x`, `evt.type in (...)`, `evt.type != x`: a bit test.
    EvtType {
        set: Box<EventSet>,
        negate: bool,
    },
    Check(Box<Check>),
}

/// Rendered flag strings, cached by (renderer, bits): harrier-schema's renderers allocate,
/// so each combination is rendered once and the steady state allocates nothing.
#[derive(Default)]
pub struct FlagCache {
    map: Mutex<FlagMap>,
}

/// (renderer name's address, bits) → rendered text.
type FlagMap = std::collections::HashMap<(usize, u64), Box<[u8]>, matchers::FxBuild>;

impl std::fmt::Debug for FlagCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FlagCache")
    }
}

const FLAG_CACHE_MAX: usize = 4096;

impl FlagCache {
    /// Calls `f` with the rendered text of the flags.
    pub fn with<R>(&self, bits: u64, renderer: &'static str, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let key = (renderer.as_ptr() as usize, bits);
        if !map.contains_key(&key) {
            if map.len() >= FLAG_CACHE_MAX {
                map.clear();
            }
            let text = harrier_schema::render::render(renderer, bits).unwrap_or_else(|| bits.to_string());
            map.insert(key, text.into_bytes().into());
        }
        f(&map[&key])
    }
}

/// Size of the stack buffer transformers write into; longer values are cut.
const TF_BUF: usize = 4096;

pub struct Ctx<'a, S: EventSource + ?Sized> {
    pub src: &'a S,
    pub flags: &'a FlagCache,
    /// This event's results of shared checks (None: evaluate every check).
    pub memo: Option<&'a Memo>,
}

impl Expr {
    /// Every field the expression reads.
    /// Every field selection the expression reads (with its argument).
    pub fn selections<'a>(&'a self, out: &mut Vec<&'a FieldSel>) {
        match self {
            Expr::Const(_) | Expr::EvtType { .. } => {}
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| e.selections(out)),
            Expr::Not(e) => e.selections(out),
            Expr::Check(c) => {
                out.push(&c.sel);
                if let CRhs::Field(r) = &c.rhs {
                    out.push(r);
                }
            }
        }
    }

    pub fn fields(&self, out: &mut Vec<Field>) {
        match self {
            Expr::Const(_) | Expr::EvtType { .. } => {}
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| e.fields(out)),
            Expr::Not(e) => e.fields(out),
            Expr::Check(c) => {
                out.push(c.sel.field);
                if let CRhs::Field(r) = &c.rhs {
                    out.push(r.field);
                }
            }
        }
    }

    pub fn eval<S: EventSource + ?Sized>(&self, cx: &Ctx<'_, S>) -> bool {
        match self {
            Expr::Const(b) => *b,
            Expr::And(v) => v.iter().all(|e| e.eval(cx)),
            Expr::Or(v) => v.iter().any(|e| e.eval(cx)),
            Expr::Not(e) => !e.eval(cx),
            Expr::EvtType { set, negate } => set.contains(cx.src.event_type()) != *negate,
            Expr::Check(c) => match cx.memo {
                Some(m) if c.slot != NO_SLOT => m.get_or(c.slot, || c.eval(cx)),
                _ => c.eval(cx),
            },
        }
    }
}

impl Check {
    fn eval<S: EventSource + ?Sized>(&self, cx: &Ctx<'_, S>) -> bool {
        if let CRhs::Field(rsel) = &self.rhs {
            // val(): compare with each value of the other field, both borrowed.
            let mut hit = false;
            with_values(cx, rsel, &mut |rv| {
                with_values(cx, &self.sel, &mut |v| {
                    hit = cmp_two(cx, self.op, v, rv);
                    hit
                });
                hit
            });
            return hit;
        }
        if self.op == Op::Exists {
            let mut any = false;
            with_values(cx, &self.sel, &mut |_| {
                any = true;
                true
            });
            return any;
        }
        // A plugin's list field is `in` a set when every value is (Falco's list semantics).
        if self.op == Op::In
            && matches!(&self.sel.arg, FieldArg::Plugin(p) if p.list)
            && self.sel.tfs.is_empty()
        {
            let (mut any, mut all) = (false, true);
            with_values(cx, &self.sel, &mut |v| {
                any = true;
                all = cmp_value(cx, Op::In, v, &self.rhs);
                !all
            });
            return any && all;
        }
        let mut hit = false;
        with_values(cx, &self.sel, &mut |v| {
            hit = cmp_value(cx, self.op, v, &self.rhs);
            hit
        });
        hit
    }
}

/// Two extracted values (`val()`): numbers as numbers, anything else as text.
fn cmp_two<S: EventSource + ?Sized>(cx: &Ctx<'_, S>, op: Op, a: Value<'_>, b: Value<'_>) -> bool {
    let num = |v: Value<'_>| match v {
        Value::U64(n) => Some(n as i128),
        Value::S64(n) => Some(n as i128),
        _ => None,
    };
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return match op {
            Op::Eq => x == y,
            Op::Ne => x != y,
            Op::Lt => x < y,
            Op::Le => x <= y,
            Op::Gt => x > y,
            Op::Ge => x >= y,
            _ => false,
        };
    }
    if let (Value::Ip(x), Value::Ip(y)) = (a, b) {
        return (x == y) == (op == Op::Eq) && matches!(op, Op::Eq | Op::Ne);
    }
    let (mut ba, mut bb) = ([0u8; 48], [0u8; 48]);
    with_text(cx, a, &mut ba, &mut |ta| {
        let mut hit = false;
        with_text(cx, b, &mut bb, &mut |tb| {
            hit = cmp_bytes(op, ta, tb);
            hit
        });
        hit
    })
}

/// A value's text, without allocating.
fn with_text<S: EventSource + ?Sized>(
    cx: &Ctx<'_, S>,
    v: Value<'_>,
    buf: &mut [u8; 48],
    f: &mut dyn FnMut(&[u8]) -> bool,
) -> bool {
    match v {
        Value::Str(s) => f(s),
        Value::U64(n) => {
            let mut b = [0u8; 24];
            f(matchers::fmt_u64(n, &mut b))
        }
        Value::S64(n) => {
            let mut b = [0u8; 24];
            f(matchers::fmt_i64(n, &mut b))
        }
        Value::Bool(x) => f(if x { b"true" } else { b"false" }),
        Value::Ip(ip) => f(ip_text(ip, buf)),
        Value::Flags { bits, renderer } => cx.flags.with(bits, renderer, |t| f(t)),
    }
}

/// Extracts the field and applies transformers, feeding each value to `f`.
fn with_values<S: EventSource + ?Sized>(
    cx: &Ctx<'_, S>,
    sel: &FieldSel,
    f: &mut dyn FnMut(Value<'_>) -> bool,
) {
    if sel.tfs.is_empty() {
        cx.src.extract(sel.field, &sel.arg, f);
        return;
    }
    cx.src.extract(sel.field, &sel.arg, &mut |v| {
        let mut buf = [0u8; TF_BUF];
        let mut num = [0u8; 24];
        // Start from the value's text.
        let text: &[u8] = match v {
            Value::Str(b) => b,
            Value::U64(n) => matchers::fmt_u64(n, &mut num),
            Value::S64(n) => matchers::fmt_i64(n, &mut num),
            Value::Bool(b) => {
                if b {
                    b"true"
                } else {
                    b"false"
                }
            }
            Value::Ip(_) => return f(v),
            Value::Flags { bits, renderer } => {
                return cx.flags.with(bits, renderer, |t| apply_tfs(&sel.tfs, t, &mut buf, f));
            }
        };
        apply_tfs(&sel.tfs, text, &mut buf, f)
    });
}

fn apply_tfs(
    tfs: &[Transformer],
    text: &[u8],
    buf: &mut [u8; TF_BUF],
    f: &mut dyn FnMut(Value<'_>) -> bool,
) -> bool {
    let n = text.len().min(TF_BUF);
    buf[..n].copy_from_slice(&text[..n]);
    let (mut start, mut end) = (0usize, n);
    for t in tfs {
        match t {
            Transformer::ToLower => buf[start..end].make_ascii_lowercase(),
            Transformer::ToUpper => buf[start..end].make_ascii_uppercase(),
            Transformer::Basename => {
                let s = &buf[start..end];
                // Falco: the part after the last '/'; a path ending in '/' has an empty basename.
                if let Some(i) = s.iter().rposition(|&c| c == b'/') {
                    start += i + 1;
                }
            }
            Transformer::B64 => match matchers::b64_decode_in_place(&mut buf[start..end]) {
                Some(len) => end = start + len,
                None => return false,
            },
            Transformer::Len => return f(Value::U64((end - start) as u64)),
        }
    }
    f(Value::Str(&buf[start..end]))
}

/// One value against the right-hand side.
fn cmp_value<S: EventSource + ?Sized>(cx: &Ctx<'_, S>, op: Op, v: Value<'_>, rhs: &CRhs) -> bool {
    match v {
        Value::Str(s) => cmp_str(op, s, rhs),
        Value::U64(n) => cmp_num(op, n as i128, rhs),
        Value::S64(n) => cmp_num(op, n as i128, rhs),
        Value::Bool(b) => match rhs {
            CRhs::One(l) => match op {
                Op::Eq => l.boolean == Some(b),
                Op::Ne => l.boolean.is_some_and(|x| x != b),
                _ => false,
            },
            CRhs::Set { lits, .. } => lits.iter().any(|l| l.boolean == Some(b)),
            _ => false,
        },
        Value::Ip(ip) => match rhs {
            CRhs::One(l) => match (op, l.net) {
                (Op::Eq, Some(n)) => n.contains(ip),
                (Op::Ne, Some(n)) => !n.contains(ip),
                (_, _) => {
                    let mut buf = [0u8; 48];
                    cmp_str(op, ip_text(ip, &mut buf), rhs)
                }
            },
            CRhs::Set { lits, .. } => lits.iter().any(|l| l.net.is_some_and(|n| n.contains(ip))),
            CRhs::Names(set) => set.matches(ip, op == Op::Ne),
            _ => false,
        },
        Value::Flags { bits, renderer } => {
            // Equality with a number compares the raw value; everything else the names.
            if let (Op::Eq | Op::Ne, CRhs::One(Lit { num: Some(n), .. })) = (op, rhs) {
                return (*n == bits as i128) == (op == Op::Eq);
            }
            cx.flags.with(bits, renderer, |t| cmp_str(op, t, rhs))
        }
    }
}

fn ip_text(ip: IpAddr, buf: &mut [u8; 48]) -> &[u8] {
    use std::io::Write;
    let mut c = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(c, "{ip}");
    let n = c.position() as usize;
    &buf[..n]
}

fn cmp_str(op: Op, s: &[u8], rhs: &CRhs) -> bool {
    match rhs {
        CRhs::One(l) => cmp_lit(op, s, l),
        CRhs::Many(ls) => ls.iter().any(|l| cmp_lit(op, s, l)),
        CRhs::Set { strs, .. } => strs.contains(s),
        CRhs::Prefixes(ps) => ps.iter().any(|p| matchers::path_prefix(p, s)),
        CRhs::Regex(re) => re.is_match(s),
        CRhs::None | CRhs::Field(_) | CRhs::Names(_) => false,
    }
}

/// A value against a literal: as [`cmp_bytes`], with the literal's prebuilt searcher.
fn cmp_lit(op: Op, s: &[u8], l: &Lit) -> bool {
    match op {
        Op::Contains | Op::BContains => l.finder.0.find(s).is_some(),
        _ => cmp_bytes(op, s, &l.bytes),
    }
}

fn cmp_bytes(op: Op, s: &[u8], b: &[u8]) -> bool {
    match op {
        Op::Eq => s == b,
        Op::Ne => s != b,
        Op::Lt => s < b,
        Op::Le => s <= b,
        Op::Gt => s > b,
        Op::Ge => s >= b,
        Op::Contains | Op::BContains => matchers::contains(s, b),
        Op::IContains => matchers::icontains(s, b),
        Op::StartsWith | Op::BStartsWith => s.starts_with(b),
        Op::EndsWith => s.ends_with(b),
        Op::Glob => matchers::glob(b, s, false),
        Op::IGlob => matchers::glob(b, s, true),
        _ => false,
    }
}

fn cmp_num(op: Op, n: i128, rhs: &CRhs) -> bool {
    match rhs {
        CRhs::One(l) => match l.num {
            Some(b) => match op {
                Op::Eq => n == b,
                Op::Ne => n != b,
                Op::Lt => n < b,
                Op::Le => n <= b,
                Op::Gt => n > b,
                Op::Ge => n >= b,
                _ => {
                    let mut buf = [0u8; 24];
                    let t = fmt_i128(n, &mut buf);
                    cmp_str(op, t, rhs)
                }
            },
            None => {
                let mut buf = [0u8; 24];
                let t = fmt_i128(n, &mut buf);
                cmp_str(op, t, rhs)
            }
        },
        CRhs::Set { lits, .. } => lits.iter().any(|l| l.num == Some(n)),
        _ => {
            let mut buf = [0u8; 24];
            let t = fmt_i128(n, &mut buf);
            cmp_str(op, t, rhs)
        }
    }
}

fn fmt_i128(n: i128, buf: &mut [u8; 24]) -> &[u8] {
    if n < 0 {
        matchers::fmt_i64(n as i64, buf)
    } else {
        matchers::fmt_u64(n as u64, buf)
    }
}
