//! The loaded rule set: what the integration uses.

use crate::compile::{narrow_to, possible_events, CompileError, Compiler};
use crate::diag::Diagnostic;
use crate::events::{EventSet, EventType, EVENT_TYPE_COUNT};
use crate::expr::{Ctx, Expr, FieldSel, FlagCache};
use crate::fields::{self, Field};
use crate::loader::{Loader, Priority};
use crate::memo::{self, Memo};
use crate::output::{self, Output, OutputValue};
use crate::value::EventSource;
use std::fmt;
use std::sync::Arc;

/// Falco's `rule_matching`: stop at the first matching rule (default) or report all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuleMatching {
    #[default]
    First,
    All,
}

/// Falco's `append_output` entry: extra text and fields for the rules it matches.
#[derive(Debug, Clone, Default)]
pub struct AppendOutput {
    /// Only rules of this source (None: any).
    pub source: Option<String>,
    /// Only rules carrying all these tags.
    pub tags: Vec<String>,
    /// Only the rule of this name.
    pub rule: Option<String>,
    /// Appended to the output text after a space (may use %fields).
    pub extra_output: String,
    /// Added to output_fields: a field name (`proc.env`), or (name, fixed value).
    pub extra_fields: Vec<(String, Option<String>)>,
}

impl AppendOutput {
    /// Whether it applies to a rule of this source, name and tags.
    pub fn applies(&self, source: &str, rule: &str, tags: &[String]) -> bool {
        self.source.as_ref().is_none_or(|s| s == source)
            && self.rule.as_ref().is_none_or(|n| n == rule)
            && self.tags.iter().all(|t| tags.contains(t))
    }
}

#[derive(Clone)]
pub struct LoadOptions {
    pub rule_matching: RuleMatching,
    /// Rules less severe than this are not evaluated (Falco's `priority`).
    pub min_priority: Priority,
    /// Fields the integration can extract; a rule using another is not evaluable.
    pub supported: Arc<dyn Fn(Field) -> bool + Send + Sync>,
    pub append_output: Vec<AppendOutput>,
    /// What `%container.info` expands to.
    pub container_info: String,
    /// Fields the integration does not support are load errors instead of skipped rules
    /// (unknown fields are always errors).
    pub strict: bool,
    /// Falco's `rules:` config key: rules enabled or disabled after loading, in order.
    pub selection: Vec<Selection>,
    /// The source this rule set evaluates: `syscall`, or a plugin's (`k8s_audit`...).
    pub source: String,
    /// The plugin sources loaded, with the fields their rules may use: their rules belong
    /// to another rule set, they are not of an unknown source.
    pub plugin_sources: Vec<fields::SourceFields>,
    /// The loaded plugins (name, version): when there are any, rule files'
    /// required_plugin_versions must be met by them.
    pub plugins: Vec<(String, String)>,
}

/// What a `rules:` entry names: rules by name (`*` and `?` wildcards) or by tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Rule(String),
    Tag(String),
}

/// One `rules:` entry: `enable` or `disable` what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub enable: bool,
    pub what: Selector,
}

impl Selector {
    /// Whether it names this rule (its name, with wildcards, or a tag).
    pub fn names(&self, rule: &str, tags: &[String]) -> bool {
        match self {
            Selector::Rule(pattern) => wildcard(pattern.as_bytes(), rule.as_bytes()),
            Selector::Tag(t) => tags.iter().any(|x| x == t),
        }
    }
}

impl Selection {
    fn names(&self, rule: &str, tags: &[String]) -> bool {
        self.what.names(rule, tags)
    }

    /// Whether a rule is enabled after `entries`, starting from its file's `enabled`.
    pub fn apply(entries: &[Selection], enabled: bool, rule: &str, tags: &[String]) -> bool {
        entries.iter().fold(enabled, |e, s| if s.names(rule, tags) { s.enable } else { e })
    }
}

/// `*` any run, `?` any one character, everything else itself.
fn wildcard(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            rule_matching: RuleMatching::First,
            min_priority: Priority::Debug,
            supported: Arc::new(|_| true),
            append_output: Vec::new(),
            container_info: output::CONTAINER_INFO.to_string(),
            strict: false,
            selection: Vec::new(),
            source: "syscall".into(),
            plugin_sources: Vec::new(),
            plugins: Vec::new(),
        }
    }
}

impl fmt::Debug for LoadOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadOptions")
            .field("rule_matching", &self.rule_matching)
            .field("min_priority", &self.min_priority)
            .field("strict", &self.strict)
            .finish()
    }
}

/// Whether a rule is evaluated, and if not why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleStatus {
    Evaluable,
    /// Uses a field the integration does not extract.
    Unsupported {
        field: String,
        detail: String,
    },
    Disabled,
    BelowPriority,
    /// A source other than `syscall` (k8s_audit, plugins).
    OtherSource(String),
}

#[derive(Debug)]
pub struct Rule {
    /// Position in [`RuleSet::rules`]: stable, use it to keep per-rule counters.
    pub index: u32,
    pub name: String,
    pub desc: String,
    pub priority: Priority,
    pub tags: Vec<String>,
    pub source: String,
    /// Falco's `capture` and `capture_duration` (ms): a capture file from each alert on.
    pub capture: bool,
    pub capture_duration: Option<u64>,
    pub status: RuleStatus,
    /// Event types on which the rule can match (empty when not evaluated).
    pub event_types: EventSet,
    /// Fields of the condition that never have a value in Harrier (Kubernetes metadata):
    /// comparisons on them are always false.
    pub valueless_fields: Vec<&'static str>,
    /// Where the rule is defined.
    pub file: String,
    pub line: u32,
    pub col: u32,
    expr: Option<Expr>,
    /// What is evaluated: `expr` narrowed to `event_types` (evt.type tests folded away),
    /// its shared checks given memo slots. Only for events of those types.
    run: Option<Expr>,
    output: Output,
}

impl Rule {
    pub fn is_active(&self) -> bool {
        self.status == RuleStatus::Evaluable
    }
    /// The condition on this event: false for an event of another type, as the full
    /// condition would be (the narrowed one assumes the type).
    fn eval<S: EventSource + ?Sized>(&self, cx: &Ctx<'_, S>) -> bool {
        let Some(e) = &self.run else { return false };
        (!self.is_active() || self.event_types.contains(cx.src.event_type())) && e.eval(cx)
    }
    /// The alert text and Falco's `output_fields`.
    pub fn format_output<S: EventSource + ?Sized>(&self, src: &S) -> (String, Vec<(String, OutputValue)>) {
        self.output.format(src)
    }
    /// The compiled condition (None when the rule is not evaluated): for analyses such as
    /// deriving kernel-side filters.
    pub fn condition(&self) -> Option<&Expr> {
        self.expr.as_ref()
    }
    /// Every field the rule reads: condition, output and extra output fields.
    pub fn fields_used(&self) -> Vec<Field> {
        let mut v = Vec::new();
        if let Some(e) = &self.expr {
            e.fields(&mut v);
        }
        for s in &self.output.segments {
            if let output::Segment::Field { sel, .. } = s {
                v.push(sel.field);
            }
        }
        for (_, sel, _) in &self.output.extra {
            if let Some(sel) = sel {
                v.push(sel.field);
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }
    /// Every field selection the rule reads, with its argument (evt.arg.name
    /// names a parameter): condition, output and extra output fields.
    pub fn selections(&self) -> Vec<&FieldSel> {
        let mut v = Vec::new();
        if let Some(e) = &self.expr {
            e.selections(&mut v);
        }
        for s in &self.output.segments {
            if let output::Segment::Field { sel, .. } = s {
                v.push(sel);
            }
        }
        v.extend(self.output.extra.iter().filter_map(|(_, sel, _)| sel.as_ref()));
        v
    }
    /// The fields the output uses (to extract, or to show in docs).
    pub fn output_fields(&self) -> impl Iterator<Item = &str> {
        self.output.segments.iter().filter_map(|s| match s {
            output::Segment::Field { name, .. } => Some(name.as_str()),
            _ => None,
        })
    }
}

pub struct RuleSet {
    rules: Vec<Rule>,
    /// Per event type code: indices of the active rules that can match it, in file order.
    by_type: Vec<Box<[u32]>>,
    warnings: Vec<Diagnostic>,
    flags: FlagCache,
    matching: RuleMatching,
    /// Names the conditions compare addresses with (fd.sip.name...): resolve them with
    /// `dns().spawn_refresher(..)` (or `refresh()`) before relying on those comparisons.
    dns: Arc<crate::dns::Resolver>,
    /// Shared checks (see [`crate::memo`]).
    memo_slots: usize,
}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleSet").field("rules", &self.rules.len()).finish()
    }
}

impl RuleSet {
    /// Loads rule files (name, text) in order. Errors name file:line:column.
    pub fn load<N: AsRef<str>, T: AsRef<str>>(
        files: &[(N, T)],
        opts: &LoadOptions,
    ) -> Result<RuleSet, Vec<Diagnostic>> {
        Self::load_inner(files, opts, false)
    }

    /// Every diagnostic of loading `files`, errors and warnings, and the macros and lists
    /// nothing uses (what `falco -V` reports).
    pub fn diagnose<N: AsRef<str>, T: AsRef<str>>(files: &[(N, T)], opts: &LoadOptions) -> Vec<Diagnostic> {
        match Self::load_inner(files, opts, true) {
            Ok(r) => r.warnings,
            Err(d) => d,
        }
    }

    fn load_inner<N: AsRef<str>, T: AsRef<str>>(
        files: &[(N, T)],
        opts: &LoadOptions,
        keep_all: bool,
    ) -> Result<RuleSet, Vec<Diagnostic>> {
        let files: Vec<(String, String)> =
            files.iter().map(|(n, t)| (n.as_ref().to_string(), t.as_ref().to_string())).collect();
        let mut loader = Loader::new(&files);
        loader.load_all();
        let mut diags = loader.diags;
        let items = loader.items;
        match opts.plugins.is_empty() {
            true => diags.extend(items.required_plugins.iter().map(|r| {
                let f = &files[r.file].0;
                Diagnostic::warning(
                    f,
                    r.pos.line,
                    r.pos.col,
                    "required_plugin_versions: no plugin loaded; ignored",
                )
            })),
            false => diags.extend(crate::plugins::check(&files, &items.required_plugins, &opts.plugins)),
        }
        let supported = opts.supported.clone();
        let sup = move |f: Field| supported(f);
        let compiler = Compiler::new(&files, &items, &sup);
        let macro_errors = compiler.macro_errors();
        for e in &macro_errors {
            diags.push(compile_diag(&files, e, None, e.msg.clone()));
        }
        // Warnings of macros compiled on their own: a rule that uses them reports them.
        compiler.warnings.borrow_mut().clear();
        let mut rules = Vec::new();
        for (i, r) in items.rules.iter().enumerate() {
            let (line, col) = (r.pos.line, r.pos.col);
            let file = files[r.file].0.clone();
            let mut status = RuleStatus::Evaluable;
            let mut expr = None;
            // Syscall's scope, when there is one, holds the fields plugins extract from any source.
            let scope = opts.plugin_sources.iter().find(|s| s.source == r.source);
            let known = r.source == "syscall" || scope.is_some();
            if r.source != opts.source && known {
                status = RuleStatus::OtherSource(r.source.clone());
            } else if r.source != opts.source {
                status = RuleStatus::OtherSource(r.source.clone());
                let msg =
                    format!("rule '{}': source '{}' has no plugin loaded: not evaluated", r.name, r.source);
                let falco = format!("Unknown source {}, skipping", r.source);
                diags.push(Diagnostic::warning(&file, line, col, msg).as_falco(
                    "LOAD_UNKNOWN_SOURCE",
                    ("rule", &r.name),
                    falco,
                ));
            } else {
                compiler.set_scope(scope);
                match compiler.rule(&r.cond, &r.exceptions) {
                    Ok(e) => expr = Some(e),
                    // Reported once, where the macro is.
                    Err(e) if macro_errors.iter().any(|m| m.within.is_some() && m.within == e.within) => {
                        status = RuleStatus::Unsupported { field: String::new(), detail: e.msg };
                    }
                    Err(e) => {
                        let d =
                            compile_diag(&files, &e, Some(&r.name), format!("rule '{}': {}", r.name, e.msg));
                        let unknown =
                            e.falco.as_ref().is_some_and(|f| f.1.starts_with("filter_check called"));
                        match e.field {
                            Some(field) if !opts.strict => {
                                let w = Diagnostic { severity: crate::diag::Severity::Warning, ..d.clone() };
                                diags.push(w);
                                status = RuleStatus::Unsupported { field, detail: d.to_string() };
                            }
                            // skip-if-unknown-filter: Falco skips the rule with a warning.
                            _ if unknown && r.skip_unknown => {
                                let w = Diagnostic { severity: crate::diag::Severity::Warning, ..d.clone() };
                                diags.push(recode(w, "LOAD_UNKNOWN_FILTER"));
                                status =
                                    RuleStatus::Unsupported { field: String::new(), detail: d.to_string() };
                            }
                            _ => diags.push(d),
                        }
                    }
                }
                // Event type names this machine does not know: never matching here; Falco
                // refuses them (or skips the rule with skip-if-unknown-filter).
                for w in compiler.warnings.borrow_mut().drain(..) {
                    let d = compile_diag(&files, &w, Some(&r.name), w.msg.clone());
                    let d = Diagnostic { severity: crate::diag::Severity::Warning, ..d };
                    if r.skip_unknown {
                        diags.push(recode(d, "LOAD_UNKNOWN_FILTER"));
                        status = RuleStatus::Unsupported { field: String::new(), detail: w.msg.clone() };
                    } else {
                        diags.push(d);
                    }
                }
            }
            // The output: compiled with the matching append_output entries.
            let mut fmt = r.output.clone();
            let mut extra = Vec::new();
            for a in &opts.append_output {
                if !a.applies(&r.source, &r.name, &r.tags) {
                    continue;
                }
                if !a.extra_output.is_empty() {
                    fmt.push(' ');
                    fmt.push_str(&a.extra_output);
                }
                extra.extend(a.extra_fields.iter().cloned());
            }
            let mut output = match output::compile_in(scope, &fmt, &opts.container_info) {
                Ok(o) => o,
                Err((name, _)) => {
                    let (ol, oc) =
                        r.output_origin.as_ref().map(|o| (o.pos.line, o.pos.col)).unwrap_or((line, col));
                    let d = Diagnostic::error(
                        &file,
                        ol,
                        oc,
                        format!("rule '{}': unknown field '{name}' in output", r.name),
                    );
                    let code = if r.skip_unknown { "LOAD_UNKNOWN_FILTER" } else { "LOAD_ERR_COMPILE_OUTPUT" };
                    let d = d.as_falco(code, ("rule", &r.name), format!("invalid formatting token {name}"));
                    if status == RuleStatus::Evaluable && !opts.strict {
                        diags.push(Diagnostic { severity: crate::diag::Severity::Warning, ..d.clone() });
                        status = RuleStatus::Unsupported { field: name, detail: d.to_string() };
                    } else if opts.strict {
                        diags.push(d);
                    }
                    Output::default()
                }
            };
            for (name, fixed) in extra {
                let sel = match &fixed {
                    Some(_) => None,
                    None => {
                        match fields::resolve_in(scope, name.split('[').next().unwrap_or(""), bracket(&name))
                        {
                            Ok((field, arg)) => Some(FieldSel { field, arg, tfs: Box::new([]) }),
                            Err(_) => {
                                diags.push(Diagnostic::error(
                                    "append_output",
                                    0,
                                    0,
                                    format!("unknown field '{name}' in extra_fields"),
                                ));
                                None
                            }
                        }
                    }
                };
                output.extra.push((name, sel, fixed));
            }
            if status == RuleStatus::Evaluable {
                if !Selection::apply(&opts.selection, r.enabled, &r.name, &r.tags) {
                    status = RuleStatus::Disabled;
                } else if r.priority > opts.min_priority {
                    status = RuleStatus::BelowPriority;
                }
            }
            let event_types = match (&status, &expr) {
                (RuleStatus::Evaluable, Some(e)) => possible_events(e),
                _ => EventSet::empty(),
            };
            // Falco's check: over 100 event types and warn_evttypes on.
            let compiled =
                matches!(status, RuleStatus::Evaluable | RuleStatus::Disabled | RuleStatus::BelowPriority);
            let possible = expr.as_ref().filter(|_| compiled).map(possible_events);
            let syscall = r.source == "syscall";
            if let Some(p) = possible.filter(|p| syscall && r.warn_evttypes && p.len() > 100) {
                let msg = match p.is_all() {
                    true => format!(
                        "rule '{}' does not restrict evt.type: it is evaluated on every event",
                        r.name
                    ),
                    false => format!(
                        "rule '{}' matches {} event types: it is evaluated on most events",
                        r.name,
                        p.len()
                    ),
                };
                let falco =
                    "Rule matches too many evt.type values. This has a significant performance penalty.";
                diags.push(Diagnostic::warning(&file, line, col, msg).as_falco(
                    "LOAD_NO_EVTTYPE",
                    ("rule", &r.name),
                    falco,
                ));
            }
            let mut used = Vec::new();
            if let Some(e) = &expr {
                e.fields(&mut used);
            }
            let mut valueless_fields: Vec<&'static str> =
                used.iter().filter(|f| f.info().events == fields::Events::Never).map(|f| f.name()).collect();
            valueless_fields.sort_unstable();
            valueless_fields.dedup();
            // Only active rules are indexed by type; others run their condition as written.
            let run = match status == RuleStatus::Evaluable {
                true => expr.clone().map(|e| narrow_to(e, &event_types)),
                false => expr.clone(),
            };
            rules.push(Rule {
                valueless_fields,
                index: i as u32,
                name: r.name.clone(),
                desc: r.desc.clone(),
                priority: r.priority,
                tags: r.tags.clone(),
                source: r.source.clone(),
                capture: r.capture,
                capture_duration: r.capture_duration,
                status,
                event_types,
                file,
                line,
                col,
                run,
                expr,
                output,
            });
        }
        if keep_all {
            let (macros, lists) = compiler.unused(&items);
            let unused =
                macros.iter().map(|m| ("macro", "Macro", &m.name, m.file, m.pos, "LOAD_UNUSED_MACRO"));
            let lists = lists.iter().map(|l| ("list", "List", &l.name, l.file, l.pos, "LOAD_UNUSED_LIST"));
            for (kind, title, name, file, pos, code) in unused.chain(lists) {
                let d = Diagnostic::warning(
                    &files[file].0,
                    pos.line,
                    pos.col,
                    format!("{kind} '{name}' is not used"),
                );
                let falco = format!("{title} not referred to by any other rule/macro");
                diags.push(d.as_falco(code, (kind, name), falco));
            }
            return Err(diags);
        }
        if diags.iter().any(|d| d.is_error()) {
            diags.retain(|d| d.is_error());
            return Err(diags);
        }
        let memo_slots =
            memo::assign_slots(rules.iter_mut().filter(|r| r.is_active()).filter_map(|r| r.run.as_mut()));
        let mut by_type: Vec<Vec<u32>> = vec![Vec::new(); EVENT_TYPE_COUNT];
        for r in rules.iter().filter(|r| r.is_active()) {
            for e in r.event_types.iter() {
                by_type[e.0 as usize].push(r.index);
            }
        }
        Ok(RuleSet {
            rules,
            by_type: by_type.into_iter().map(Vec::into_boxed_slice).collect(),
            warnings: diags,
            flags: FlagCache::default(),
            matching: opts.rule_matching,
            dns: compiler.dns.clone(),
            memo_slots,
        })
    }

    /// The domain names of fd.sip.name/fd.cip.name/fd.lip.name/fd.rip.name comparisons.
    pub fn dns(&self) -> &Arc<crate::dns::Resolver> {
        &self.dns
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
    pub fn rule(&self, index: u32) -> &Rule {
        &self.rules[index as usize]
    }
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Event types some active rule needs: the syscalls to attach (for rules).
    pub fn event_types(&self) -> EventSet {
        self.rules.iter().filter(|r| r.is_active()).fold(EventSet::empty(), |a, r| a.union(&r.event_types))
    }

    /// Every field the active rules read (what the integration must extract).
    pub fn fields_used(&self) -> Vec<Field> {
        let mut v: Vec<Field> =
            self.rules.iter().filter(|r| r.is_active()).flat_map(|r| r.fields_used()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Every field selection the active rules read (what the integration must
    /// collect: `evt.arg.X` needs parameter X).
    pub fn selections(&self) -> Vec<&FieldSel> {
        self.rules.iter().filter(|r| r.is_active()).flat_map(|r| r.selections()).collect()
    }

    /// Indices of the active rules an event of this type must meet, in file order.
    pub fn candidates(&self, ty: EventType) -> &[u32] {
        self.by_type.get(ty.0 as usize).map(|b| &b[..]).unwrap_or(&[])
    }

    /// Evaluates one rule's condition (for callers that time each rule).
    pub fn rule_matches<S: EventSource + ?Sized>(&self, index: u32, src: &S) -> bool {
        let cx = Ctx { src, flags: &self.flags, memo: None };
        self.rules[index as usize].eval(&cx)
    }

    /// Per-event results of the checks several rules share: make one per evaluating thread,
    /// call [`Memo::next_event`] before each event, pass it to [`RuleSet::rule_matches_memo`].
    pub fn memo(&self) -> Memo {
        Memo::new(self.memo_slots)
    }

    /// Number of checks shared by several rules (or repeated in one).
    pub fn shared_checks(&self) -> usize {
        self.memo_slots
    }

    /// [`RuleSet::rule_matches`], reusing this event's results of shared checks.
    pub fn rule_matches_memo<S: EventSource + ?Sized>(&self, index: u32, src: &S, memo: &Memo) -> bool {
        let cx = Ctx { src, flags: &self.flags, memo: Some(memo) };
        self.rules[index as usize].eval(&cx)
    }

    /// Evaluates the rules that can match this event, calling `on_match` with each matching
    /// rule (only the first with `rule_matching: first`). Returns the number of matches.
    /// Allocates nothing.
    pub fn evaluate<S: EventSource + ?Sized>(&self, src: &S, mut on_match: impl FnMut(&Rule)) -> usize {
        let cx = Ctx { src, flags: &self.flags, memo: None };
        let mut n = 0;
        for &i in self.candidates(src.event_type()) {
            let r = &self.rules[i as usize];
            if r.eval(&cx) {
                n += 1;
                on_match(r);
                if self.matching == RuleMatching::First {
                    break;
                }
            }
        }
        n
    }

    /// Per rule: evaluable or not, and why.
    pub fn check_report(&self) -> CheckReport<'_> {
        CheckReport { rules: &self.rules }
    }
}

fn bracket(name: &str) -> Option<&str> {
    let i = name.find('[')?;
    name[i + 1..].strip_suffix(']')
}

pub struct CheckReport<'a> {
    rules: &'a [Rule],
}

impl CheckReport<'_> {
    pub fn total(&self) -> usize {
        self.rules.len()
    }
    /// Rules whose conditions compiled (enabled or not).
    pub fn evaluable(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| !matches!(r.status, RuleStatus::Unsupported { .. } | RuleStatus::OtherSource(_)))
            .count()
    }
    pub fn active(&self) -> usize {
        self.rules.iter().filter(|r| r.is_active()).count()
    }
}

impl fmt::Display for CheckReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in self.rules {
            let what = match &r.status {
                RuleStatus::Evaluable => {
                    let ev = &r.event_types;
                    if ev.is_all() {
                        "evaluable (all event types)".to_string()
                    } else if ev.is_empty() {
                        "evaluable, but no event can match it here".to_string()
                    } else {
                        format!("evaluable ({})", ev.iter().map(|e| e.name()).collect::<Vec<_>>().join(","))
                    }
                }
                RuleStatus::Unsupported { field, .. } => format!("not evaluable: unsupported field {field}"),
                RuleStatus::Disabled => "disabled".into(),
                RuleStatus::BelowPriority => "below the minimum priority".into(),
                RuleStatus::OtherSource(s) => format!("not evaluable: source {s}"),
            };
            let note = if r.valueless_fields.is_empty() {
                String::new()
            } else {
                format!(" [never set in Harrier: {}]", r.valueless_fields.join(", "))
            };
            writeln!(f, "{}:{}: {}: {what}{note}", r.file, r.line, r.name)?;
        }
        write!(f, "{} rules: {} evaluable, {} active", self.total(), self.evaluable(), self.active())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_entries_apply_in_order_by_name_pattern_or_tag() {
        let off = |w: &str| Selection { enable: false, what: Selector::Rule(w.into()) };
        let on_tag = |t: &str| Selection { enable: true, what: Selector::Tag(t.into()) };
        let tags = vec!["T1".to_string(), "network".to_string()];
        assert!(!Selection::apply(&[off("*")], true, "Read sensitive file", &tags));
        assert!(Selection::apply(&[off("*"), on_tag("T1")], true, "x", &tags));
        assert!(!Selection::apply(&[on_tag("T1"), off("x")], false, "x", &tags));
        assert!(Selection::apply(&[off("Read*file")], true, "Write file", &tags));
        assert!(!Selection::apply(&[off("Read*file")], true, "Read sensitive file", &tags));
        assert!(!Selection::apply(&[off("a?c")], true, "abc", &[]));
        assert!(Selection::apply(&[], true, "abc", &[]));
    }
}

/// A compile error as a diagnostic, with how Falco files it: the macro whose text it is in,
/// or the rule (and the exception within it).
fn compile_diag(files: &[(String, String)], e: &CompileError, rule: Option<&str>, msg: String) -> Diagnostic {
    let d = Diagnostic::error(&files[e.file].0, e.line, e.col, msg);
    let Some((code, falco)) = &e.falco else { return d };
    match (&e.within, rule) {
        (Some(("macro", m)), _) => d.as_falco(code, ("macro", m), falco.clone()),
        (Some((kind, x)), Some(r)) => d.as_falco(code, ("rule", r), falco.clone()).within((kind, x)),
        (Some((kind, x)), None) => d.as_falco(code, (kind, x), falco.clone()),
        (None, Some(r)) => d.as_falco(code, ("rule", r), falco.clone()),
        (None, None) => d,
    }
}

/// The same diagnostic under another Falco code (a skipped rule's warning).
fn recode(mut d: Diagnostic, code: &'static str) -> Diagnostic {
    if let Some(f) = &mut d.falco {
        f.code = code;
    }
    d
}
