//! AST → compiled expressions: macros and lists expanded, fields resolved once against the
//! table, operators type-checked, literals parsed, sets and regexes built.

use crate::ast::{Ast, FieldRef, Literal, Op, Rhs, Span, Transformer};
use crate::events::{EventSet, EventType};
use crate::expr::{CRhs, Check, Expr, FieldSel, Lit};
use crate::fields::{self, Field, FieldError, FieldType};
use crate::loader::{CondText, ExcValue, Exception, Items, ListItem, MacroItem};
use crate::matchers::{self, FxSet};
use crate::memo::NO_SLOT;
use crate::parser::{self, ParseError};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

/// A compile error: where, what, and the field if the problem is an unsupported field.
#[derive(Debug, Clone)]
pub struct CompileError {
    pub file: usize,
    pub line: u32,
    pub col: u32,
    pub msg: String,
    /// Set when the rule cannot be evaluated because the integration does not extract this
    /// field (a known field), as opposed to a mistake in the rule.
    pub field: Option<String>,
    /// Falco's code and message for it, and the innermost macro or exception its text is in
    /// (Falco names that item rather than the rule).
    pub falco: Option<(&'static str, String)>,
    pub within: Option<(&'static str, String)>,
}

impl CompileError {
    fn as_falco(mut self, code: &'static str, msg: impl Into<String>) -> Self {
        self.falco = Some((code, msg.into()));
        self
    }
}

pub struct Compiler<'a> {
    pub files: &'a [(String, String)],
    /// Warnings found while compiling (event type names this machine does not have).
    pub warnings: std::cell::RefCell<Vec<CompileError>>,
    lists: HashMap<&'a str, &'a ListItem>,
    macros: HashMap<&'a str, (&'a MacroItem, Result<Ast, ParseError>)>,
    supported: &'a dyn Fn(Field) -> bool,
    /// The plugin source whose rule is compiled (None: syscall).
    scope: Cell<Option<&'a fields::SourceFields>>,
    /// The domain names comparisons on fd.*ip.name use, resolved off the hot path.
    pub dns: std::sync::Arc<crate::dns::Resolver>,
    /// Macros and lists some condition (or list) refers to: the rest are unused.
    used: RefCell<HashSet<String>>,
    /// Compiling every macro to check it (`macro_errors`): nothing is registered for the
    /// run then (no names to resolve).
    probing: Cell<bool>,
}

/// Where the AST being compiled came from, for error positions.
struct Site<'c> {
    cond: &'c CondText,
    /// "macro m used at file:l:c" notes, innermost last.
    notes: Vec<String>,
    /// The macro or exception whose text this is (None: the rule's own condition).
    within: Option<(&'static str, String)>,
}

type R<T> = Result<T, CompileError>;

impl<'a> Compiler<'a> {
    pub fn new(
        files: &'a [(String, String)],
        items: &'a Items,
        supported: &'a dyn Fn(Field) -> bool,
    ) -> Self {
        let lists: HashMap<&str, &ListItem> = items.lists.iter().map(|l| (l.name.as_str(), l)).collect();
        let macros =
            items.macros.iter().map(|m| (m.name.as_str(), (m, parser::parse(&m.cond.text)))).collect();
        // A list named among another list's items is used.
        let used = items
            .lists
            .iter()
            .flat_map(|l| l.items.iter())
            .filter(|i| lists.contains_key(i.as_str()))
            .cloned()
            .collect();
        Compiler {
            files,
            warnings: Default::default(),
            lists,
            macros,
            supported,
            scope: Cell::new(None),
            dns: Default::default(),
            used: RefCell::new(used),
            probing: Cell::new(false),
        }
    }

    /// The source whose rules are compiled next: a plugin source's fields (None: syscall).
    pub fn set_scope(&self, scope: Option<&'a fields::SourceFields>) {
        self.scope.set(scope);
    }

    /// Syntax errors of macros, reported whether or not a rule uses them (as Falco does).
    pub fn macro_errors(&self) -> Vec<CompileError> {
        let mut out = Vec::new();
        for (m, res) in self.macros.values() {
            let site = Site { cond: &m.cond, notes: Vec::new(), within: Some(("macro", m.name.clone())) };
            match res {
                Err(e) => out.push(
                    self.error(&site, &e.span, format!("macro '{}': {}", m.name, e.msg), None).as_falco(
                        "LOAD_ERR_COMPILE_CONDITION",
                        e.falco.clone().unwrap_or_else(|| e.msg.clone()),
                    ),
                ),
                // Falco compiles every macro, used or not: an undefined one inside is an error.
                Ok(ast) => {
                    self.probing.set(true);
                    let r = self.expr(ast, &site, &mut vec![m.name.clone()]);
                    self.probing.set(false);
                    if let Err(e) = r {
                        if e.falco.as_ref().is_some_and(|f| f.1.starts_with("Undefined macro")) {
                            out.push(CompileError { msg: format!("macro '{}': {}", m.name, e.msg), ..e });
                        }
                    }
                }
            }
        }
        out.sort_by_key(|e| (e.file, e.line, e.col));
        out
    }

    /// Macros and lists no rule, macro or list refers to (after every rule compiled).
    pub fn unused<'i>(&self, items: &'i Items) -> (Vec<&'i MacroItem>, Vec<&'i ListItem>) {
        let used = self.used.borrow();
        (
            items.macros.iter().filter(|m| !used.contains(&m.name)).collect(),
            items.lists.iter().filter(|l| !used.contains(&l.name)).collect(),
        )
    }

    fn error(&self, site: &Site<'_>, span: &Span, msg: String, field: Option<String>) -> CompileError {
        let (file, pos) = site.cond.locate(self.files, span.start);
        let mut msg = msg;
        for n in site.notes.iter().rev() {
            msg.push_str(" (");
            msg.push_str(n);
            msg.push(')');
        }
        CompileError {
            file,
            line: pos.line,
            col: pos.col,
            msg,
            field,
            falco: None,
            within: site.within.clone(),
        }
    }

    /// Compiles a rule's condition and its exceptions.
    pub fn rule(&self, cond: &CondText, exceptions: &[Exception]) -> R<Expr> {
        let site = Site { cond, notes: Vec::new(), within: None };
        let ast = parser::parse(&cond.text).map_err(|e| {
            let falco = e.falco.unwrap_or_else(|| e.msg.clone());
            self.error(&site, &e.span, e.msg, None).as_falco("LOAD_ERR_COMPILE_CONDITION", falco)
        })?;
        let mut stack = Vec::new();
        let main = self.expr(&ast, &site, &mut stack)?;
        let mut excs = Vec::new();
        for e in exceptions {
            if let Some(x) = self.exception(e)? {
                excs.push(x);
            }
        }
        if excs.is_empty() {
            return Ok(optimize(main));
        }
        Ok(optimize(Expr::And(vec![main, Expr::Not(Box::new(Expr::Or(excs.into())))].into())))
    }

    fn expr(&self, ast: &Ast, site: &Site<'_>, stack: &mut Vec<String>) -> R<Expr> {
        Ok(match ast {
            Ast::And(v) => {
                Expr::And(v.iter().map(|a| self.expr(a, site, stack)).collect::<R<Vec<_>>>()?.into())
            }
            Ast::Or(v) => {
                Expr::Or(v.iter().map(|a| self.expr(a, site, stack)).collect::<R<Vec<_>>>()?.into())
            }
            Ast::Not(a, _) => Expr::Not(Box::new(self.expr(a, site, stack)?)),
            Ast::Macro(name, span) => {
                let Some((m, parsed)) = self.macros.get(name.as_str()) else {
                    return Err(self
                        .error(site, span, format!("undefined macro '{name}'"), None)
                        .as_falco("LOAD_ERR_VALIDATE", format!("Undefined macro '{name}' used in filter.")));
                };
                self.used.borrow_mut().insert(name.clone());
                if stack.iter().any(|s| s == name) {
                    return Err(self.error(site, span, format!("macro '{name}' refers to itself"), None));
                }
                let (file, pos) = site.cond.locate(self.files, span.start);
                let inner_site = Site {
                    cond: &m.cond,
                    within: Some(("macro", name.clone())),
                    notes: {
                        let mut n = site.notes.clone();
                        n.push(format!(
                            "in macro '{name}' used at {}:{}:{}",
                            self.files[file].0, pos.line, pos.col
                        ));
                        n
                    },
                };
                let ast = match parsed {
                    Ok(a) => a,
                    Err(e) => {
                        let falco = e.falco.clone().unwrap_or_else(|| e.msg.clone());
                        let err = self.error(&inner_site, &e.span, e.msg.clone(), None);
                        return Err(err.as_falco("LOAD_ERR_COMPILE_CONDITION", falco));
                    }
                };
                stack.push(name.clone());
                let r = self.expr(ast, &inner_site, stack);
                stack.pop();
                r?
            }
            Ast::Check { lhs, op, rhs, .. } => self.check(lhs, *op, rhs, site)?,
        })
    }

    fn field(&self, f: &FieldRef, site: &Site<'_>) -> R<(FieldSel, FieldType)> {
        let scope = self.scope.get();
        let (field, arg) = match fields::resolve_in(scope, &f.name, f.arg.as_deref()) {
            Ok(x) => x,
            // A typo or a plugin's field: an error, as in Falco.
            Err(FieldError::Unknown) => {
                return Err(self.error(site, &f.span, format!("unknown field '{}'", f.name), None).as_falco(
                    "LOAD_ERR_COMPILE_CONDITION",
                    format!("filter_check called with nonexistent field {}", f.name),
                ))
            }
            Err(FieldError::BadArg(why)) => {
                return Err(self.error(site, &f.span, format!("field '{}' {why}", f.name), None))
            }
        };
        // A plugin source's fields are all the plugin host's to extract.
        let syscall = scope.is_none_or(|s| s.source == "syscall");
        if syscall && !matches!(arg, fields::FieldArg::Plugin(_)) && !(self.supported)(field) {
            return Err(self.error(
                site,
                &f.span,
                format!("field '{}' is not supported here", f.name),
                Some(f.name.clone()),
            ));
        }
        let mut ty = match &arg {
            fields::FieldArg::Plugin(p) => p.ty,
            _ => field.ty(),
        };
        for t in &f.transformers {
            ty = match t {
                Transformer::Len => FieldType::U64,
                _ => FieldType::Str,
            };
        }
        Ok((FieldSel { field, arg, tfs: f.transformers.clone().into() }, ty))
    }

    /// Expands list items: unquoted names of lists become their items, recursively.
    fn expand_items(&self, items: &[Literal], out: &mut Vec<String>, depth: usize) {
        for it in items {
            match (it.quoted, self.lists.get(it.text.as_str())) {
                (false, Some(l)) if depth < 32 => {
                    self.used.borrow_mut().insert(l.name.clone());
                    self.expand_list(l, out, depth + 1)
                }
                _ => out.push(it.text.clone()),
            }
        }
    }

    fn expand_list(&self, l: &ListItem, out: &mut Vec<String>, depth: usize) {
        for item in &l.items {
            let unq = strip_quotes(item);
            match self.lists.get(unq) {
                Some(inner) if unq == item.as_str() && depth < 32 => self.expand_list(inner, out, depth + 1),
                _ => out.push(unq.to_string()),
            }
        }
    }

    fn check(&self, lhs: &FieldRef, op: Op, rhs: &Rhs, site: &Site<'_>) -> R<Expr> {
        // Falco expands a list's name wherever a bare value stands: `x = some_list` is
        // `x in (some_list)`.
        if let (Op::Eq | Op::Ne, Rhs::Value(l)) = (op, rhs) {
            if !l.quoted && self.lists.contains_key(l.text.as_str()) {
                let as_in = self.check(lhs, Op::In, &Rhs::List(vec![l.clone()], l.span.clone()), site)?;
                return Ok(if op == Op::Ne { Expr::Not(Box::new(as_in)) } else { as_in });
            }
        }
        let (sel, ty) = self.field(lhs, site)?;
        let span = &lhs.span;
        let list = matches!(&sel.arg, fields::FieldArg::Plugin(p) if p.list) && sel.tfs.is_empty();
        if list && !matches!(op, Op::In | Op::Intersects | Op::Exists) {
            let msg = format!("operator '{}' cannot be used with list field '{}'", op.as_str(), lhs.name);
            let falco = format!("'{}' operator not supported list filters", op.as_str());
            return Err(self.error(site, span, msg, None).as_falco("LOAD_ERR_COMPILE_CONDITION", falco));
        }
        let bad_op = |what: &str| {
            Err(self.error(
                site,
                span,
                format!(
                    "operator '{}' cannot be used with {} field '{}'{what}",
                    op.as_str(),
                    ty.name(),
                    lhs.name
                ),
                None,
            ))
        };
        // Operators each type accepts.
        let ok = match ty {
            t if t.is_numeric() => matches!(
                op,
                Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::In | Op::Intersects | Op::Exists
            ),
            FieldType::Bool | FieldType::IpAddr | FieldType::IpNet => {
                matches!(op, Op::Eq | Op::Ne | Op::In | Op::Intersects | Op::Exists)
            }
            _ => true,
        };
        if !ok {
            return bad_op("");
        }
        if matches!(op, Op::BContains | Op::BStartsWith)
            && !matches!(ty, FieldType::Bytes | FieldType::Str | FieldType::Dyn)
        {
            return bad_op("");
        }
        // Literal values, expanded.
        let values: Vec<(String, Span)> = match rhs {
            Rhs::None => Vec::new(),
            Rhs::Value(l) => vec![(l.text.clone(), l.span.clone())],
            Rhs::List(items, s) => {
                let mut out = Vec::new();
                self.expand_items(items, &mut out, 0);
                out.into_iter().map(|t| (t, s.clone())).collect()
            }
            Rhs::ListName(l) => match self.lists.get(l.text.as_str()) {
                Some(list) => {
                    self.used.borrow_mut().insert(list.name.clone());
                    let mut out = Vec::new();
                    self.expand_list(list, &mut out, 0);
                    out.into_iter().map(|t| (t, l.span.clone())).collect()
                }
                None => return Err(self.error(site, &l.span, format!("undefined list '{}'", l.text), None)),
            },
            Rhs::Field(f) => {
                let (rsel, _) = self.field(f, site)?;
                return Ok(Expr::Check(Box::new(Check { sel, op, rhs: CRhs::Field(rsel), slot: NO_SLOT })));
            }
        };
        // Literals must parse as the field's type.
        for (v, s) in &values {
            let lit = Lit::new(v);
            let bad = match ty {
                t if t.is_numeric() => lit.num.is_none(),
                FieldType::Bool => lit.boolean.is_none(),
                FieldType::IpAddr | FieldType::IpNet => lit.net.is_none(),
                _ => false,
            };
            if bad {
                return Err(self.error(
                    site,
                    s,
                    format!("'{v}' is not a valid {} value for '{}'", ty.name(), lhs.name),
                    None,
                ));
            }
        }
        if let Some(ip) = address_of_name(sel.field) {
            return self.name_check(lhs, op, ip, &values, site);
        }
        // evt.type: a bit test on the event's type.
        if sel.field == Field::EvtType && sel.tfs.is_empty() && matches!(op, Op::Eq | Op::Ne | Op::In) {
            let mut set = EventSet::empty();
            for (v, s) in &values {
                // Unknown names never match (another architecture's syscall, or a typo):
                // a warning, not an error, so Falco's files load everywhere.
                match EventType::from_name(v) {
                    Some(e) => set.insert(e),
                    None => {
                        let w = self
                            .error(site, s, format!("unknown event type '{v}' never matches"), None)
                            .as_falco("LOAD_ERR_COMPILE_CONDITION", format!("unknown event type {v}"));
                        let mut ws = self.warnings.borrow_mut();
                        if !ws.iter().any(|x| x.msg == w.msg) {
                            ws.push(w);
                        }
                    }
                }
            }
            return Ok(Expr::EvtType { set: Box::new(set), negate: op == Op::Ne });
        }
        let crhs = match op {
            Op::Exists => CRhs::None,
            Op::In | Op::Intersects => {
                let mut strs = FxSet::default();
                let mut lits = Vec::new();
                for (v, _) in &values {
                    strs.insert(v.as_bytes().into());
                    lits.push(Lit::new(v));
                }
                CRhs::Set { strs, lits: lits.into() }
            }
            Op::PMatch => CRhs::Prefixes(values.iter().map(|(v, _)| v.as_bytes().into()).collect()),
            Op::Regex => {
                let (v, s) = &values[0];
                match regex::bytes::Regex::new(v) {
                    Ok(re) => CRhs::Regex(re),
                    Err(e) => {
                        return Err(self.error(
                            site,
                            s,
                            format!("invalid regex: {}", first_line(&e.to_string())),
                            None,
                        ))
                    }
                }
            }
            Op::BContains | Op::BStartsWith => {
                let (v, s) = &values[0];
                match matchers::parse_hex(v) {
                    Some(b) => CRhs::One(Lit::bytes(b)),
                    None => {
                        return Err(self.error(
                            site,
                            s,
                            format!("'{v}' is not hex bytes (bcontains/bstartswith take hex, e.g. CAFEBABE)"),
                            None,
                        ))
                    }
                }
            }
            _ => CRhs::One(Lit::new(&values[0].0)),
        };
        Ok(Expr::Check(Box::new(Check { sel, op, rhs: crhs, slot: NO_SLOT })))
    }

    /// `fd.sip.name = x` and friends, as Falco evaluates them: x is resolved (off the
    /// hot path) and the fd's address is looked up among x's addresses.
    fn name_check(
        &self,
        lhs: &FieldRef,
        op: Op,
        ip: Field,
        values: &[(String, Span)],
        site: &Site<'_>,
    ) -> R<Expr> {
        if self.probing.get() {
            return Ok(Expr::Const(false));
        }
        if !matches!(op, Op::Eq | Op::Ne | Op::In) || !lhs.transformers.is_empty() {
            let msg = format!(
                "'{}' compares addresses with a name's resolved addresses: use =, != or in, without transformers (not '{}')",
                lhs.name,
                op.as_str()
            );
            return Err(self.error(site, &lhs.span, msg, None));
        }
        let names: Vec<&str> = values.iter().map(|(v, _)| v.as_str()).collect();
        let set = self.dns.register(&names);
        let sel = FieldSel { field: ip, arg: crate::fields::FieldArg::None, tfs: Box::new([]) };
        Ok(Expr::Check(Box::new(Check { sel, op, rhs: CRhs::Names(set), slot: NO_SLOT })))
    }

    /// One exception → `(f1 c1 v1 and f2 c2 v2) or ...`, or None without values. Its fields
    /// and comparisons are checked even without values, as Falco checks them.
    fn exception(&self, e: &Exception) -> R<Option<Expr>> {
        // Errors point at the exception's entry.
        let text = e.name.clone();
        let cond = CondText {
            text: text.clone(),
            pieces: vec![(
                0,
                crate::loader::Origin {
                    file: e.file,
                    pos: e.pos,
                    style: crate::yaml::Style::Plain,
                    value: text,
                },
            )],
        };
        let site = Site {
            cond: &cond,
            notes: vec![format!("in exception '{}'", e.name)],
            within: Some(("exception", e.name.clone())),
        };
        let unsupported = |fname: &str| format!("'{fname}' is not a supported filter field");
        let mut refs = Vec::new();
        for fname in &e.fields {
            let fr = match parser::parse(&format!("{fname} exists")) {
                Ok(Ast::Check { lhs, .. }) => lhs,
                _ => {
                    let err = self.error(&site, &(0..0), format!("'{fname}' is not a field"), None);
                    return Err(err.as_falco("LOAD_ERR_VALIDATE", unsupported(fname)));
                }
            };
            let fr = FieldRef { span: 0..0, ..fr };
            self.field(&fr, &site).map_err(|err| match err.field {
                Some(_) => err,
                None => err.as_falco("LOAD_ERR_VALIDATE", unsupported(fname)),
            })?;
            refs.push(fr);
        }
        let mut ops = Vec::new();
        for c in &e.comps {
            let op = match Op::from_comp(c) {
                Some(op) if op != Op::Exists => op,
                _ => {
                    let err = self.error(&site, &(0..0), format!("unknown comparison '{c}'"), None);
                    let falco = format!("'{c}' is not a supported comparison operator");
                    return Err(err.as_falco("LOAD_ERR_VALIDATE", falco));
                }
            };
            ops.push(op);
        }
        if e.values.is_empty() {
            return Ok(None);
        }
        let mut rows = Vec::new();
        for tuple in &e.values {
            if tuple.len() != refs.len() {
                let msg =
                    format!("a value has {} items but the exception has {} fields", tuple.len(), refs.len());
                let err = self.error(&site, &(0..0), msg, None);
                return Err(
                    err.as_falco("LOAD_ERR_VALIDATE", "Fields and values lists must have equal length")
                );
            }
            let mut ands = Vec::new();
            for (i, v) in tuple.iter().enumerate() {
                let op = ops[i];
                // The right side as the parser would have built it: a list for list
                // operators (a single unquoted value there may name a list).
                let lits: Vec<Literal> = match v {
                    // "(a, b, some_list)": Falco reads a parenthesised value as a list.
                    ExcValue::One(s) if op.takes_list() && s.starts_with('(') && s.ends_with(')') => s
                        [1..s.len() - 1]
                        .split(',')
                        .map(str::trim)
                        .filter(|x| !x.is_empty())
                        .map(|x| Literal { text: strip_quotes(x).to_string(), quoted: false, span: 0..0 })
                        .collect(),
                    ExcValue::One(s) => {
                        vec![Literal { text: strip_quotes(s).to_string(), quoted: false, span: 0..0 }]
                    }
                    ExcValue::Many(vs) => vs
                        .iter()
                        .map(|s| Literal { text: strip_quotes(s).to_string(), quoted: false, span: 0..0 })
                        .collect(),
                };
                let rhs = if op.takes_list() {
                    Rhs::List(lits, 0..0)
                } else {
                    match lits.into_iter().next() {
                        Some(l) => Rhs::Value(Literal { quoted: true, ..l }),
                        None => continue,
                    }
                };
                ands.push(self.check(&refs[i], op, &rhs, &site)?);
            }
            rows.push(if ands.len() == 1 { ands.pop().unwrap() } else { Expr::And(ands.into()) });
        }
        Ok(Some(Expr::Or(rows.into())))
    }
}

/// The address field a name field is compared through.
fn address_of_name(f: Field) -> Option<Field> {
    Some(match f {
        Field::FdSipName => Field::FdSip,
        Field::FdCipName => Field::FdCip,
        Field::FdLipName => Field::FdLip,
        Field::FdRipName => Field::FdRip,
        _ => return None,
    })
}

fn strip_quotes(s: &str) -> &str {
    let b = s.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        &s[1..s.len() - 1]
    } else {
        s
    }
}

fn first_line(s: &str) -> String {
    s.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(s).trim().to_string()
}

/// The event types on which `e` can be true. A comparison on a field without a value is
/// false, so a check can only hold where its field has values; `not` is exact only over
/// event-type tests and otherwise gives up (all types).
pub fn possible_events(e: &Expr) -> EventSet {
    match e {
        Expr::Const(true) => EventSet::all(),
        Expr::Const(false) => EventSet::empty(),
        Expr::EvtType { set, negate } => {
            if *negate {
                set.complement()
            } else {
                (**set).clone()
            }
        }
        Expr::And(v) => v.iter().fold(EventSet::all(), |acc, x| acc.intersect(&possible_events(x))),
        Expr::Or(v) => v.iter().fold(EventSet::empty(), |acc, x| acc.union(&possible_events(x))),
        Expr::Not(inner) => match &**inner {
            Expr::EvtType { set, negate } => {
                if *negate {
                    (**set).clone()
                } else {
                    set.complement()
                }
            }
            _ => EventSet::all(),
        },
        Expr::Check(c) => {
            let mut s = fields::field_events(c.sel.field, &c.sel.arg);
            if let CRhs::Field(r) = &c.rhs {
                s = s.intersect(&fields::field_events(r.field, &r.arg));
            }
            s
        }
    }
}

/// `e` for events known to be of the types in `possible` (the rule's candidates, by the
/// index by type): `evt.type` tests this decides become constants and fold away. Every
/// Falco rule starts with one, and macros such as `open_read` repeat it.
pub fn narrow_to(e: Expr, possible: &EventSet) -> Expr {
    match e {
        Expr::EvtType { set, negate } => {
            let overlap = possible.intersect(&set);
            if overlap.is_empty() {
                Expr::Const(negate)
            } else if overlap == *possible {
                Expr::Const(!negate)
            } else {
                Expr::EvtType { set, negate }
            }
        }
        Expr::And(v) => {
            let mut out = Vec::with_capacity(v.len());
            for x in v.into_vec() {
                match narrow_to(x, possible) {
                    Expr::Const(true) => {}
                    Expr::Const(false) => return Expr::Const(false),
                    x => out.push(x),
                }
            }
            match out.len() {
                0 => Expr::Const(true),
                1 => out.pop().unwrap(),
                _ => Expr::And(out.into()),
            }
        }
        Expr::Or(v) => {
            let mut out = Vec::with_capacity(v.len());
            for x in v.into_vec() {
                match narrow_to(x, possible) {
                    Expr::Const(false) => {}
                    Expr::Const(true) => return Expr::Const(true),
                    x => out.push(x),
                }
            }
            match out.len() {
                0 => Expr::Const(false),
                1 => out.pop().unwrap(),
                _ => Expr::Or(out.into()),
            }
        }
        Expr::Not(x) => match narrow_to(*x, possible) {
            Expr::Const(b) => Expr::Const(!b),
            x => Expr::Not(Box::new(x)),
        },
        other => other,
    }
}

/// Flattens nested and/or (macros nest them) and orders each list's members cheapest first:
/// evaluation has no side effects, so the order is free, and a cheap test that fails spares
/// the expensive ones.
pub fn optimize(e: Expr) -> Expr {
    match e {
        Expr::And(v) => {
            let mut out = Vec::new();
            for x in v.into_vec() {
                match optimize(x) {
                    Expr::And(inner) => out.extend(inner.into_vec()),
                    Expr::Const(true) => {}
                    other => out.push(other),
                }
            }
            // Positive tests first: in rules they say what is watched and usually fail;
            // negated ones are exceptions and usually hold.
            out.sort_by_key(|e| (matches!(e, Expr::Not(_)), cost(e)));
            if out.len() == 1 {
                out.pop().unwrap()
            } else {
                Expr::And(out.into())
            }
        }
        Expr::Or(v) => {
            let mut out = Vec::new();
            for x in v.into_vec() {
                match optimize(x) {
                    Expr::Or(inner) => out.extend(inner.into_vec()),
                    Expr::Const(false) => {}
                    other => out.push(other),
                }
            }
            let mut out = merge_alternatives(out);
            out.sort_by_key(cost);
            match out.len() {
                0 => Expr::Const(false),
                1 => out.pop().unwrap(),
                _ => Expr::Or(out.into()),
            }
        }
        Expr::Not(inner) => match optimize(*inner) {
            Expr::Not(x) => *x,
            x => Expr::Not(Box::new(x)),
        },
        other => other,
    }
}

/// A rough cost of evaluating `e`, in units of one field extraction.
fn cost(e: &Expr) -> u32 {
    match e {
        Expr::Const(_) => 0,
        Expr::EvtType { .. } => 1,
        Expr::Not(x) => cost(x),
        Expr::And(v) | Expr::Or(v) => v.iter().map(cost).sum::<u32>() + 1,
        Expr::Check(c) => {
            let op = match c.op {
                Op::Exists | Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => 2,
                Op::In | Op::Intersects | Op::StartsWith | Op::BStartsWith | Op::EndsWith => 3,
                Op::PMatch | Op::Contains | Op::BContains | Op::IContains => 5,
                Op::Glob | Op::IGlob => 6,
                Op::Regex => 12,
            };
            // Multi-valued fields (every ancestor) and transformers cost more.
            let multi = if matches!(c.sel.arg, fields::FieldArg::None)
                && c.sel.field.info().arg == fields::ArgForm::OptIndex
            {
                4
            } else {
                1
            };
            let rhs = match &c.rhs {
                CRhs::Field(_) => 3,
                CRhs::Many(ls) => ls.len() as u32,
                _ => 0,
            };
            op * multi + 2 * c.sel.tfs.len() as u32 + rhs
        }
    }
}

/// Merges `f op a or f op b or ...` (same string field, same operator among =, contains,
/// icontains, startswith, endswith) into one check with several literals: one extraction.
fn merge_alternatives(v: Vec<Expr>) -> Vec<Expr> {
    let mergeable = |c: &Check| {
        matches!(c.op, Op::Eq | Op::Contains | Op::IContains | Op::StartsWith | Op::EndsWith)
            && c.sel.field.ty() == FieldType::Str
            && c.sel.tfs.is_empty()
            && matches!(c.rhs, CRhs::One(_) | CRhs::Many(_))
    };
    let mut out: Vec<Expr> = Vec::with_capacity(v.len());
    for e in v {
        if let Expr::Check(c) = &e {
            if mergeable(c) {
                let same = out.iter_mut().find_map(|o| match o {
                    Expr::Check(p)
                        if mergeable(p)
                            && p.op == c.op
                            && p.sel.field == c.sel.field
                            && p.sel.arg == c.sel.arg =>
                    {
                        Some(p)
                    }
                    _ => None,
                });
                if let Some(p) = same {
                    let mut lits: Vec<Lit> = match std::mem::replace(&mut p.rhs, CRhs::None) {
                        CRhs::One(l) => vec![l],
                        CRhs::Many(ls) => ls.into_vec(),
                        _ => unreachable!("mergeable checks have literal right sides"),
                    };
                    match &c.rhs {
                        CRhs::One(l) => lits.push(l.clone()),
                        CRhs::Many(ls) => lits.extend(ls.iter().cloned()),
                        _ => unreachable!("mergeable checks have literal right sides"),
                    }
                    p.rhs = CRhs::Many(lits.into());
                    continue;
                }
            }
        }
        out.push(e);
    }
    out
}
