//! `falco -L` / `-l RULE` with json_output: Falco's ruleset description. Lists, macros and
//! rules as written (`info`) and as compiled (`details`): macros and lists expanded, the
//! fields, operators, event types and plugins the condition uses, printed the way libsinsp
//! prints a condition. Built from the rule files' items and their condition syntax trees
//! (the compiled [`harrier_rules::expr::Expr`] is optimised and no longer the text's shape).

use anyhow::{bail, Result};
use harrier_rules::ast::{Ast, FieldRef, Literal, Op, Rhs};
use harrier_rules::events::{EventSet, EventType};
use harrier_rules::fields::{self, FieldArg, SourceFields};
use harrier_rules::loader::{ExcValue, Exception, Items, ListItem, Loader, RuleItem};
use harrier_rules::output::{self, Segment};
use harrier_rules::parser;
use harrier_rules::ruleset::LoadOptions;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// Macros nest at most this deep (the loader refuses cycles; this only bounds the walk).
const MAX_DEPTH: usize = 32;

/// The description as Falco prints it: every rule with the lists, macros and requirements
/// (`only` None, -L), or the one rule named (-l RULE: `{"rules": [..]}`, without the
/// config's append_output, as Falco prints it). `plugins` are the loaded plugins' names in
/// load order: a plugin field's `FieldArg::Plugin` names its plugin by that position.
pub fn json(
    files: &[(String, String)],
    opts: &LoadOptions,
    plugins: &[String],
    only: Option<&str>,
) -> Result<String> {
    let mut loader = Loader::new(files);
    loader.load_all();
    if let Some(d) = loader.diags.iter().find(|d| d.is_error()) {
        bail!("{d}");
    }
    let items = loader.items;
    let d = Describer::new(&items, opts, plugins);
    // Falco skips rules of a source no plugin gives: they are not described.
    let known =
        |r: &&RuleItem| r.source == "syscall" || opts.plugin_sources.iter().any(|s| s.source == r.source);
    let rules: Vec<&RuleItem> = items.rules.iter().filter(known).collect();
    if let Some(name) = only {
        let Some(r) = rules.iter().find(|r| r.name == name) else {
            bail!("Rule \"{name}\" is not loaded");
        };
        return Ok(json!({ "rules": [d.rule(r, false)] }).to_string());
    }
    let used = d.used(&rules);
    let v = json!({
        "lists": items.lists.iter().map(|l| d.list(l, used.contains(l.name.as_str()))).collect::<Vec<_>>(),
        "macros": items.macros.iter().map(|m| d.macro_(&m.name, &m.cond.text, used.contains(m.name.as_str()))).collect::<Vec<_>>(),
        "required_engine_version": match items.required_engine_version {
            Some((a, b, c)) => format!("{a}.{b}.{c}"),
            None => "0.0.0".into(),
        },
        "required_plugin_versions": items.required_plugins.iter().map(|r| {
            let one = |(n, v): &(String, String)| json!({"name": n, "version": v});
            let (first, alts) = r.any_of.split_first().map(|(f, a)| (Some(f), a)).unwrap_or((None, &[]));
            let mut e = json!({"alternatives": alts.iter().map(one).collect::<Vec<_>>()});
            if let Some((n, v)) = first {
                e["name"] = json!(n);
                e["version"] = json!(v);
            }
            e
        }).collect::<Vec<_>>(),
        "rules": rules.iter().map(|r| d.rule(r, true)).collect::<Vec<_>>(),
    });
    Ok(v.to_string())
}

struct Describer<'a> {
    lists: HashMap<&'a str, &'a ListItem>,
    /// Each macro's parsed condition (None: it does not parse; the load reported that).
    macros: HashMap<&'a str, Option<Ast>>,
    opts: &'a LoadOptions,
    plugins: &'a [String],
}

/// Names in first-seen order, each once (Falco's are sets).
#[derive(Default)]
struct Names(Vec<String>);

impl Names {
    fn add(&mut self, s: &str) {
        if !self.0.iter().any(|x| x == s) {
            self.0.push(s.to_string());
        }
    }
}

/// What a condition uses: its direct references (unexpanded) or its compiled parts.
#[derive(Default)]
struct Uses {
    macros: Names,
    lists: Names,
    fields: Names,
    operators: Names,
    plugins: Names,
}

impl<'a> Describer<'a> {
    fn new(items: &'a Items, opts: &'a LoadOptions, plugins: &'a [String]) -> Self {
        Describer {
            lists: items.lists.iter().map(|l| (l.name.as_str(), l)).collect(),
            macros: items
                .macros
                .iter()
                .map(|m| (m.name.as_str(), parser::parse(&m.cond.text).ok()))
                .collect(),
            opts,
            plugins,
        }
    }

    /// Lists and macros something refers to: a list (used or not), a macro (used or not) or
    /// a described rule, as Falco marks them.
    fn used(&self, rules: &[&RuleItem]) -> HashSet<&'a str> {
        let mut u = Uses::default();
        for l in self.lists.values() {
            for i in &l.items {
                if self.lists.contains_key(i.as_str()) {
                    u.lists.add(i);
                }
            }
        }
        for ast in self.macros.values().flatten() {
            self.refs(ast, &mut u);
        }
        for r in rules {
            if let Ok(ast) = parser::parse(&r.cond.text) {
                self.refs(&ast, &mut u);
            }
            for e in &r.exceptions {
                if let Some(ast) = exception_ast(e) {
                    self.refs(&ast, &mut u);
                }
            }
        }
        let known = self.lists.keys().chain(self.macros.keys()).copied();
        known.filter(|k| u.lists.0.iter().chain(&u.macros.0).any(|n| n == k)).collect()
    }

    fn list(&self, l: &ListItem, used: bool) -> Value {
        let (mut lists, mut items) = (Vec::new(), Vec::new());
        for i in &l.items {
            match self.lists.contains_key(i.as_str()) {
                true => lists.push(i),
                false => items.push(i),
            }
        }
        let mut compiled = Vec::new();
        self.expand_list(l, &mut compiled, 0);
        json!({
            "details": {"items_compiled": compiled, "lists": lists, "plugins": [], "used": used},
            "info": {"items": items, "name": l.name},
        })
    }

    fn macro_(&self, name: &str, cond: &str, used: bool) -> Value {
        let mut refs = Uses::default();
        let mut compiled = Uses::default();
        let (text, events) = match self.macros.get(name).cloned().flatten() {
            Some(ast) => {
                self.refs(&ast, &mut refs);
                let ast = self.expand(&ast, 0);
                self.parts(&ast, None, &mut compiled);
                (print(&ast), events(&ast))
            }
            None => (String::new(), Vec::new()),
        };
        json!({
            "details": {
                "condition_compiled": text,
                "condition_fields": compiled.fields.0,
                "condition_operators": compiled.operators.0,
                "events": events,
                "lists": refs.lists.0,
                "macros": refs.macros.0,
                // Falco 0.44.1 names no plugin for a macro, even one using a plugin's field.
                "plugins": [],
                "used": used,
            },
            "info": {"condition": cond, "name": name},
        })
    }

    /// A rule; `append` applies the config's append_output to its compiled output.
    fn rule(&self, r: &RuleItem, append: bool) -> Value {
        let scope = self.opts.plugin_sources.iter().find(|s| s.source == r.source);
        let mut refs = Uses::default();
        let mut compiled = Uses::default();
        let (mut text, mut evts) = (String::new(), Vec::new());
        if let Ok(main) = parser::parse(&r.cond.text) {
            self.refs(&main, &mut refs);
            // Falco compiles `(condition) and not (exception 1) and not (exception 2)...`.
            let nots: Vec<Ast> =
                r.exceptions.iter().filter_map(exception_ast).map(|e| Ast::Not(Box::new(e), 0..0)).collect();
            let full = match nots.is_empty() {
                true => main,
                false => Ast::And(std::iter::once(main).chain(nots).collect()),
            };
            let full = self.expand(&full, 0);
            self.parts(&full, scope, &mut compiled);
            text = print(&full);
            evts = match r.source.as_str() {
                "syscall" => events(&full),
                // A plugin source's events are all plugin events (and async ones).
                _ => vec!["pluginevent", "asyncevent"],
            };
        }
        // Every exception, with values or not.
        let (mut exc_names, mut exc_fields, mut exc_ops) =
            (Names::default(), Names::default(), Names::default());
        for e in &r.exceptions {
            exc_names.add(&e.name);
            e.fields.iter().for_each(|f| exc_fields.add(f));
            e.comps.iter().for_each(|c| exc_ops.add(c));
        }
        let mut fmt = r.output.clone();
        for a in self.opts.append_output.iter().filter(|a| append && a.applies(&r.source, &r.name, &r.tags)) {
            if !a.extra_output.is_empty() {
                fmt.push(' ');
                fmt.push_str(&a.extra_output);
            }
        }
        let mut out_fields = Names::default();
        if let Ok(o) = output::compile_in(scope, &fmt, &self.opts.container_info) {
            for s in &o.segments {
                if let Segment::Field { name, sel } = s {
                    out_fields.add(name);
                    self.plugin_of(&sel.arg, &mut compiled.plugins);
                }
            }
        }
        json!({
            "details": {
                "condition_compiled": text,
                "condition_fields": compiled.fields.0,
                "condition_operators": compiled.operators.0,
                "events": evts,
                "exception_fields": exc_fields.0,
                "exception_names": exc_names.0,
                "exception_operators": exc_ops.0,
                "lists": refs.lists.0,
                "macros": refs.macros.0,
                "output_compiled": fmt.replace("%container.info", &self.opts.container_info),
                "output_fields": out_fields.0,
                "plugins": compiled.plugins.0,
            },
            "info": {
                "capture": r.capture,
                "capture_duration": r.capture_duration.unwrap_or(0),
                "condition": r.cond.text,
                "description": r.desc,
                "enabled": r.enabled,
                "name": r.name,
                "output": r.output,
                "priority": r.priority.as_str(),
                "source": r.source,
                "tags": r.tags,
            },
        })
    }

    fn plugin_of(&self, arg: &FieldArg, out: &mut Names) {
        if let FieldArg::Plugin(p) = arg {
            if let Some(n) = self.plugins.get(p.plugin as usize) {
                out.add(n);
            }
        }
    }

    /// Whether an unquoted value names a list.
    fn names_list(&self, l: &Literal) -> bool {
        !l.quoted && self.lists.contains_key(l.text.as_str())
    }

    /// The macros and lists a condition names itself (not through its macros).
    fn refs(&self, a: &Ast, u: &mut Uses) {
        match a {
            Ast::And(v) | Ast::Or(v) => v.iter().for_each(|x| self.refs(x, u)),
            Ast::Not(x, _) => self.refs(x, u),
            Ast::Macro(m, _) if self.macros.contains_key(m.as_str()) => u.macros.add(m),
            Ast::Macro(..) => {}
            Ast::Check { rhs, op, .. } => match rhs {
                Rhs::List(items, _) => {
                    items.iter().filter(|l| self.names_list(l)).for_each(|l| u.lists.add(&l.text))
                }
                Rhs::ListName(l) if self.lists.contains_key(l.text.as_str()) => u.lists.add(&l.text),
                Rhs::Value(l) if matches!(op, Op::Eq | Op::Ne) && self.names_list(l) => u.lists.add(&l.text),
                _ => {}
            },
        }
    }

    /// The compiled fields, operators and plugins of an expanded condition.
    fn parts(&self, a: &Ast, scope: Option<&SourceFields>, u: &mut Uses) {
        match a {
            Ast::And(v) | Ast::Or(v) => v.iter().for_each(|x| self.parts(x, scope, u)),
            Ast::Not(x, _) => self.parts(x, scope, u),
            Ast::Macro(..) => {}
            Ast::Check { lhs, op, rhs, .. } => {
                u.operators.add(op.as_str());
                let rf = match rhs {
                    Rhs::Field(f) => Some(f),
                    _ => None,
                };
                for f in std::iter::once(lhs).chain(rf) {
                    u.fields.add(&field_name(f));
                    if let Ok((_, arg)) = fields::resolve_in(scope, &f.name, f.arg.as_deref()) {
                        self.plugin_of(&arg, &mut u.plugins);
                    }
                }
            }
        }
    }

    /// The condition with macros replaced by their conditions and lists by their items.
    fn expand(&self, a: &Ast, depth: usize) -> Ast {
        match a {
            Ast::And(v) => Ast::And(v.iter().map(|x| self.expand(x, depth)).collect()),
            Ast::Or(v) => Ast::Or(v.iter().map(|x| self.expand(x, depth)).collect()),
            Ast::Not(x, s) => Ast::Not(Box::new(self.expand(x, depth)), s.clone()),
            Ast::Macro(m, _) => match self.macros.get(m.as_str()) {
                Some(Some(inner)) if depth < MAX_DEPTH => self.expand(inner, depth + 1),
                _ => a.clone(),
            },
            Ast::Check { lhs, op, rhs, span } => {
                let list = |items: &[Literal]| {
                    let mut out = Vec::new();
                    for l in items {
                        match self.lists.get(l.text.as_str()).filter(|_| !l.quoted) {
                            Some(inner) => self.expand_list(inner, &mut out, 0),
                            None => out.push(l.text.clone()),
                        }
                    }
                    let lits = out.into_iter().map(|text| Literal { text, quoted: false, span: 0..0 });
                    Rhs::List(lits.collect(), 0..0)
                };
                let check = |op, rhs| Ast::Check { lhs: lhs.clone(), op, rhs, span: span.clone() };
                match rhs {
                    Rhs::List(items, _) => check(*op, list(items)),
                    Rhs::ListName(l) => check(*op, list(std::slice::from_ref(l))),
                    // Harrier reads `x = some_list` as `x in (some_list)` (and != as not in).
                    Rhs::Value(l) if matches!(op, Op::Eq | Op::Ne) && self.names_list(l) => {
                        let c = check(Op::In, list(std::slice::from_ref(l)));
                        if *op == Op::Ne {
                            Ast::Not(Box::new(c), span.clone())
                        } else {
                            c
                        }
                    }
                    _ => a.clone(),
                }
            }
        }
    }

    /// A list's items with the lists it names replaced by theirs (as the compiler does).
    fn expand_list(&self, l: &ListItem, out: &mut Vec<String>, depth: usize) {
        for item in &l.items {
            let unq = strip_quotes(item);
            match self.lists.get(unq) {
                Some(inner) if unq == item.as_str() && depth < MAX_DEPTH => {
                    self.expand_list(inner, out, depth + 1)
                }
                _ => out.push(unq.to_string()),
            }
        }
    }
}

fn strip_quotes(s: &str) -> &str {
    let b = s.as_bytes();
    match b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        true => &s[1..s.len() - 1],
        false => s,
    }
}

/// One exception as the condition Falco appends (negated) to the rule's: a single field is
/// one comparison with every value; a tuple is `(f1 c1 v1 and f2 c2 v2) or ...`, one
/// term per row. None without values, or when a field or comparison does not parse (the
/// load reported it).
fn exception_ast(e: &Exception) -> Option<Ast> {
    if e.values.is_empty() {
        return None;
    }
    let refs = e
        .fields
        .iter()
        .map(|f| match parser::parse(&format!("{f} exists")) {
            Ok(Ast::Check { lhs, .. }) => Some(lhs),
            _ => None,
        })
        .collect::<Option<Vec<FieldRef>>>()?;
    let ops = e.comps.iter().map(|c| Op::from_comp(c)).collect::<Option<Vec<Op>>>()?;
    let lit = |s: &str| Literal { text: strip_quotes(s).to_string(), quoted: false, span: 0..0 };
    let check = |lhs: &FieldRef, op: Op, rhs| Ast::Check { lhs: lhs.clone(), op, rhs, span: 0..0 };
    if e.single {
        let (lhs, op) = (refs.first()?, *ops.first()?);
        let values = e.values.iter().flatten().flat_map(|v| match v {
            ExcValue::One(s) => vec![lit(s)],
            ExcValue::Many(vs) => vs.iter().map(|s| lit(s)).collect(),
        });
        return Some(match op.takes_list() {
            true => check(lhs, op, Rhs::List(values.collect(), 0..0)),
            false => {
                Ast::Or(values.map(|l| check(lhs, op, Rhs::Value(Literal { quoted: true, ..l }))).collect())
            }
        });
    }
    let mut rows = Vec::new();
    for tuple in &e.values {
        let mut ands = Vec::new();
        for ((v, lhs), &op) in tuple.iter().zip(&refs).zip(&ops) {
            // The right side as Harrier's compiler builds it: a list for list operators
            // ("(a, b)" text is one), one value otherwise.
            let lits: Vec<Literal> = match v {
                ExcValue::One(s) if op.takes_list() && s.starts_with('(') && s.ends_with(')') => {
                    s[1..s.len() - 1].split(',').map(str::trim).filter(|x| !x.is_empty()).map(lit).collect()
                }
                ExcValue::One(s) => vec![lit(s)],
                ExcValue::Many(vs) => vs.iter().map(|s| lit(s)).collect(),
            };
            let rhs = match op.takes_list() {
                true => Rhs::List(lits, 0..0),
                false => match lits.into_iter().next() {
                    Some(l) => Rhs::Value(Literal { quoted: true, ..l }),
                    None => continue,
                },
            };
            ands.push(check(lhs, op, rhs));
        }
        rows.push(if ands.len() == 1 { ands.remove(0) } else { Ast::And(ands) });
    }
    Some(if rows.len() == 1 { rows.remove(0) } else { Ast::Or(rows) })
}

/// `name[arg]`, as Falco names a field in condition_fields.
fn field_name(f: &FieldRef) -> String {
    match &f.arg {
        Some(a) => format!("{}[{a}]", f.name),
        None => f.name.clone(),
    }
}

/// The field with its transformers: `tolower(proc.name)`.
fn field_text(f: &FieldRef) -> String {
    f.transformers.iter().fold(field_name(f), |s, t| format!("{}({s})", t.as_str()))
}

/// libsinsp's printing of a value: quoted when it has a space or a character it escapes.
fn escape(v: &str) -> String {
    let mut out = String::new();
    let mut quote = false;
    for c in v.chars() {
        let esc = match c {
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '"' => "\\\"",
            '\\' => "\\\\",
            ' ' => " ",
            _ => {
                out.push(c);
                continue;
            }
        };
        quote = true;
        out.push_str(esc);
    }
    match quote {
        true => format!("\"{out}\""),
        false => out,
    }
}

/// A condition as libsinsp prints it: `(a and b)`, `(a or b)`, `not a`, `f op v`.
fn print(a: &Ast) -> String {
    let join = |v: &[Ast], sep: &str| format!("({})", v.iter().map(print).collect::<Vec<_>>().join(sep));
    match a {
        Ast::And(v) => join(v, " and "),
        Ast::Or(v) => join(v, " or "),
        Ast::Not(x, _) => format!("not {}", print(x)),
        Ast::Macro(m, _) => m.clone(),
        Ast::Check { lhs, op, rhs, .. } => {
            let l = field_text(lhs);
            let r = match rhs {
                Rhs::None => return format!("{l} {}", op.as_str()),
                Rhs::Value(v) | Rhs::ListName(v) => escape(&v.text),
                Rhs::List(items, _) => {
                    format!("({})", items.iter().map(|i| escape(&i.text)).collect::<Vec<_>>().join(", "))
                }
                // A bare field on the right is written val(field); a transformed one is not.
                Rhs::Field(f) if f.transformers.is_empty() => format!("val({})", field_text(f)),
                Rhs::Field(f) => field_text(f),
            };
            format!("{l} {} {r}", op.as_str())
        }
    }
}

/// The event types a condition can match, as libsinsp's resolver finds them: only
/// `evt.type` comparisons restrict (under `not`, and/or swap). `asyncevent` is in every
/// set: an async event's type is its own name, whatever the condition compares.
fn events(a: &Ast) -> Vec<&'static str> {
    fn set(a: &Ast, neg: bool) -> EventSet {
        match a {
            Ast::And(v) | Ast::Or(v) => {
                let meet = matches!(a, Ast::And(_)) != neg;
                let start = if meet { EventSet::all() } else { EventSet::empty() };
                v.iter().fold(start, |acc, x| match meet {
                    true => acc.intersect(&set(x, neg)),
                    false => acc.union(&set(x, neg)),
                })
            }
            Ast::Not(x, _) => set(x, !neg),
            Ast::Check { lhs, op: op @ (Op::Eq | Op::Ne | Op::In), rhs, .. }
                if lhs.name == "evt.type" && lhs.arg.is_none() && lhs.transformers.is_empty() =>
            {
                let names: Vec<&str> = match rhs {
                    Rhs::Value(v) => vec![v.text.as_str()],
                    Rhs::List(items, _) => items.iter().map(|i| i.text.as_str()).collect(),
                    _ => return EventSet::all(),
                };
                let s = EventSet::from_names(&names);
                if (*op == Op::Ne) != neg {
                    s.complement()
                } else {
                    s
                }
            }
            _ => EventSet::all(),
        }
    }
    let mut names: Vec<&'static str> = set(a, false).iter().map(EventType::name).collect();
    names.push("asyncevent");
    names
}

#[cfg(test)]
#[path = "describe_tests.rs"]
mod tests;
