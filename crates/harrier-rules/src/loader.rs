//! Rule files → items: lists, macros and rules with appends, overrides and exceptions
//! merged in file order, each keeping where it was written.

use crate::diag::Diagnostic;
use crate::yaml::{self, Node, Pos, Style};

/// Where a piece of text comes from: its YAML scalar.
#[derive(Debug, Clone)]
pub struct Origin {
    pub file: usize,
    pub pos: Pos,
    pub style: Style,
    pub value: String,
}

/// A condition assembled from one or more YAML scalars (appends join them with a space).
#[derive(Debug, Clone, Default)]
pub struct CondText {
    pub text: String,
    /// (start offset in `text`, origin) of each piece, in order.
    pub pieces: Vec<(usize, Origin)>,
}

impl CondText {
    fn new(o: Origin) -> CondText {
        CondText { text: o.value.clone(), pieces: vec![(0, o)] }
    }
    fn append(&mut self, o: Origin) {
        self.text.push(' ');
        self.pieces.push((self.text.len(), o.clone()));
        self.text.push_str(&o.value);
    }
    /// File index and position of a byte offset of the text.
    pub fn locate(&self, files: &[(String, String)], offset: usize) -> (usize, Pos) {
        let (start, o) = self.pieces.iter().rev().find(|(s, _)| *s <= offset).unwrap_or(&self.pieces[0]);
        let text = &files[o.file].1;
        (o.file, yaml::locate(text, o.pos, o.style, &o.value, offset.saturating_sub(*start)))
    }
}

#[derive(Debug, Clone)]
pub struct ListItem {
    pub name: String,
    pub items: Vec<String>,
    pub file: usize,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct MacroItem {
    pub name: String,
    pub cond: CondText,
    pub file: usize,
    pub pos: Pos,
}

/// An exception value: one scalar, or a list (for `in`-style comparisons).
#[derive(Debug, Clone)]
pub enum ExcValue {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct Exception {
    pub name: String,
    /// A single field (`fields: proc.name`) or a tuple (`fields: [proc.name, fd.name]`).
    pub fields: Vec<String>,
    pub single: bool,
    pub comps: Vec<String>,
    /// One tuple per row (one value each when `single`).
    pub values: Vec<Vec<ExcValue>>,
    pub file: usize,
    pub pos: Pos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    Emergency,
    Alert,
    Critical,
    Error,
    Warning,
    Notice,
    Informational,
    Debug,
}

impl Priority {
    pub fn parse(s: &str) -> Option<Priority> {
        Some(match s.to_ascii_lowercase().as_str() {
            "emergency" => Priority::Emergency,
            "alert" => Priority::Alert,
            "critical" => Priority::Critical,
            "error" => Priority::Error,
            "warning" => Priority::Warning,
            "notice" => Priority::Notice,
            "informational" | "info" => Priority::Informational,
            "debug" => Priority::Debug,
            _ => return None,
        })
    }
    /// Falco's spelling in alerts.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Emergency => "Emergency",
            Priority::Alert => "Alert",
            Priority::Critical => "Critical",
            Priority::Error => "Error",
            Priority::Warning => "Warning",
            Priority::Notice => "Notice",
            Priority::Informational => "Informational",
            Priority::Debug => "Debug",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RuleItem {
    pub name: String,
    pub cond: CondText,
    pub output: String,
    pub output_origin: Option<Origin>,
    pub desc: String,
    pub priority: Priority,
    pub tags: Vec<String>,
    pub enabled: bool,
    pub source: String,
    pub exceptions: Vec<Exception>,
    pub file: usize,
    pub pos: Pos,
}

/// Everything the files define, merged.
#[derive(Debug, Default)]
pub struct Items {
    pub lists: Vec<ListItem>,
    pub macros: Vec<MacroItem>,
    pub rules: Vec<RuleItem>,
}

pub struct Loader<'f> {
    pub files: &'f [(String, String)],
    pub items: Items,
    pub diags: Vec<Diagnostic>,
}

const RULE_APPEND_KEYS: &[&str] = &["condition", "output", "desc", "tags", "exceptions"];
const RULE_REPLACE_KEYS: &[&str] = &[
    "condition",
    "output",
    "desc",
    "priority",
    "tags",
    "exceptions",
    "enabled",
    "warn_evttypes",
    "skip-if-unknown-filter",
];

impl<'f> Loader<'f> {
    pub fn new(files: &'f [(String, String)]) -> Self {
        Loader { files, items: Items::default(), diags: Vec::new() }
    }

    fn err(&mut self, file: usize, pos: Pos, msg: impl Into<String>) {
        self.diags.push(Diagnostic::error(&self.files[file].0, pos.line, pos.col, msg));
    }
    fn warn(&mut self, file: usize, pos: Pos, msg: impl Into<String>) {
        self.diags.push(Diagnostic::warning(&self.files[file].0, pos.line, pos.col, msg));
    }

    pub fn load_all(&mut self) {
        for f in 0..self.files.len() {
            self.load_file(f);
        }
    }

    fn load_file(&mut self, f: usize) {
        let docs = match yaml::parse(&self.files[f].1) {
            Ok(d) => d,
            Err(e) => return self.err(f, e.pos, format!("invalid YAML: {}", e.msg)),
        };
        for doc in docs {
            match doc {
                Node::Seq { items, .. } => {
                    for item in &items {
                        self.load_item(f, item);
                    }
                }
                n if n.is_null() => {}
                n => {
                    self.err(f, n.pos(), format!("a rules file must be a list of items, found {}", n.kind()))
                }
            }
        }
    }

    fn load_item(&mut self, f: usize, item: &Node) {
        let Node::Map { entries, pos } = item else {
            return self.err(f, item.pos(), format!("each item must be a mapping, found {}", item.kind()));
        };
        let first = entries.first().and_then(|(k, _)| k.as_str()).unwrap_or("");
        let has = |k: &str| item.get(k).is_some();
        if has("rule") {
            self.rule(f, item)
        } else if has("macro") {
            self.macro_(f, item)
        } else if has("list") {
            self.list(f, item)
        } else if has("required_engine_version") {
            // Harrier implements the language of Falco's current engine; older or newer
            // numbers are accepted as they are.
        } else if has("required_plugin_versions") {
            self.warn(f, *pos, "required_plugin_versions: Harrier has no plugins; ignored")
        } else {
            self.err(f, *pos, format!("unknown item '{first}': expected rule, macro, list, required_engine_version or required_plugin_versions"))
        }
    }

    fn str_of(&mut self, f: usize, n: &Node, what: &str) -> Option<String> {
        match n {
            Node::Scalar { value, .. } => Some(value.clone()),
            _ => {
                self.err(f, n.pos(), format!("{what} must be a string, found {}", n.kind()));
                None
            }
        }
    }

    fn origin(&mut self, f: usize, n: &Node, what: &str) -> Option<Origin> {
        match n {
            Node::Scalar { value, style, pos } => {
                Some(Origin { file: f, pos: *pos, style: *style, value: value.clone() })
            }
            _ => {
                self.err(f, n.pos(), format!("{what} must be a string, found {}", n.kind()));
                None
            }
        }
    }

    fn bool_of(&mut self, f: usize, n: &Node, what: &str) -> Option<bool> {
        match n.as_str() {
            Some("true" | "True" | "TRUE" | "yes") => Some(true),
            Some("false" | "False" | "FALSE" | "no") => Some(false),
            _ => {
                self.err(f, n.pos(), format!("{what} must be true or false"));
                None
            }
        }
    }

    fn str_list(&mut self, f: usize, n: &Node, what: &str) -> Option<Vec<String>> {
        match n {
            Node::Seq { items, .. } => items.iter().map(|i| self.str_of(f, i, what)).collect(),
            n if n.is_null() => Some(Vec::new()),
            _ => {
                self.err(f, n.pos(), format!("{what} must be a list, found {}", n.kind()));
                None
            }
        }
    }

    /// Reads `override:`: key → append | replace.
    fn overrides(&mut self, f: usize, item: &Node, kind: &str) -> Option<Vec<(String, bool, Pos)>> {
        let o = item.get("override")?;
        let Node::Map { entries, .. } = o else {
            self.err(f, o.pos(), "override must be a mapping of key: append|replace");
            return Some(Vec::new());
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let key = k.as_str().unwrap_or("").to_string();
            let append = match v.as_str() {
                Some("append") => true,
                Some("replace") => false,
                _ => {
                    self.err(f, v.pos(), format!("override of '{key}' must be append or replace"));
                    continue;
                }
            };
            let allowed: &[&str] = match (kind, append) {
                ("list", _) => &["items"],
                ("macro", _) => &["condition"],
                (_, true) => RULE_APPEND_KEYS,
                (_, false) => RULE_REPLACE_KEYS,
            };
            if !allowed.contains(&key.as_str()) {
                let how = if append { "appended" } else { "replaced" };
                self.err(f, k.pos(), format!("key '{key}' of a {kind} cannot be {how}"));
                continue;
            }
            if item.get(&key).is_none() {
                self.err(f, k.pos(), format!("override names '{key}' but the {kind} does not give it"));
                continue;
            }
            out.push((key, append, k.pos()));
        }
        // Every other key must be covered by the override.
        if let Node::Map { entries, .. } = item {
            for (k, _) in entries {
                let key = k.as_str().unwrap_or("");
                if key != kind && key != "override" && !out.iter().any(|(o, _, _)| o == key) {
                    self.err(f, k.pos(), format!("key '{key}' is not listed in the {kind}'s override"));
                }
            }
        }
        Some(out)
    }

    fn append_flag(&mut self, f: usize, item: &Node) -> bool {
        match item.get("append") {
            Some(n) => self.bool_of(f, n, "append").unwrap_or(false),
            None => false,
        }
    }

    fn list(&mut self, f: usize, item: &Node) {
        let pos = item.pos();
        let Some(name) = self.str_of(f, item.get("list").unwrap(), "list name") else { return };
        let Some(items_node) = item.get("items") else {
            return self.err(f, pos, format!("list '{name}' has no items"));
        };
        let Some(items) = self.str_list(f, items_node, "list items") else { return };
        let append = self.append_flag(f, item);
        let ov = self.overrides(f, item, "list");
        if append && ov.is_some() {
            return self.err(f, pos, format!("list '{name}': append and override cannot be used together"));
        }
        let existing = self.items.lists.iter().position(|l| l.name == name);
        let mode = ov.as_ref().and_then(|o| o.first()).map(|(_, a, _)| *a).or(append.then_some(true));
        match (mode, existing) {
            (Some(_), None) => self.err(
                f,
                pos,
                format!("list '{name}' has append or override but no list by that name exists"),
            ),
            (Some(true), Some(i)) => self.items.lists[i].items.extend(items),
            (Some(false), Some(i)) => self.items.lists[i].items = items,
            (None, Some(i)) => self.items.lists[i] = ListItem { name, items, file: f, pos },
            (None, None) => self.items.lists.push(ListItem { name, items, file: f, pos }),
        }
    }

    fn macro_(&mut self, f: usize, item: &Node) {
        let pos = item.pos();
        let Some(name) = self.str_of(f, item.get("macro").unwrap(), "macro name") else { return };
        let Some(cn) = item.get("condition") else {
            return self.err(f, pos, format!("macro '{name}' has no condition"));
        };
        let Some(cond) = self.origin(f, cn, "condition") else { return };
        let append = self.append_flag(f, item);
        let ov = self.overrides(f, item, "macro");
        if append && ov.is_some() {
            return self.err(f, pos, format!("macro '{name}': append and override cannot be used together"));
        }
        let existing = self.items.macros.iter().position(|m| m.name == name);
        let mode = ov.as_ref().and_then(|o| o.first()).map(|(_, a, _)| *a).or(append.then_some(true));
        match (mode, existing) {
            (Some(_), None) => self.err(
                f,
                pos,
                format!("macro '{name}' has append or override but no macro by that name exists"),
            ),
            (Some(true), Some(i)) => self.items.macros[i].cond.append(cond),
            (Some(false), Some(i)) => self.items.macros[i].cond = CondText::new(cond),
            (None, Some(i)) => {
                self.items.macros[i] = MacroItem { name, cond: CondText::new(cond), file: f, pos }
            }
            (None, None) => {
                self.items.macros.push(MacroItem { name, cond: CondText::new(cond), file: f, pos })
            }
        }
    }

    fn priority(&mut self, f: usize, n: &Node) -> Option<Priority> {
        let s = self.str_of(f, n, "priority")?;
        let p = Priority::parse(&s);
        if p.is_none() {
            self.err(f, n.pos(), format!("unknown priority '{s}' (emergency, alert, critical, error, warning, notice, informational, debug)"));
        }
        p
    }

    fn exceptions(&mut self, f: usize, n: &Node) -> Vec<Exception> {
        let Node::Seq { items, .. } = n else {
            if !n.is_null() {
                self.err(f, n.pos(), "exceptions must be a list");
            }
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in items {
            let pos = e.pos();
            let Some(name) = e.get("name").and_then(|n| n.as_str()).map(str::to_string) else {
                self.err(f, pos, "an exception needs a name");
                continue;
            };
            let (fields, single) = match e.get("fields") {
                None => (Vec::new(), false),
                Some(Node::Scalar { value, .. }) => (vec![value.clone()], true),
                Some(n) => (self.str_list(f, n, "exception fields").unwrap_or_default(), false),
            };
            let comps = match e.get("comps") {
                None => vec![if single { "in" } else { "=" }.to_string(); fields.len()],
                Some(Node::Scalar { value, .. }) => vec![value.clone()],
                Some(n) => self.str_list(f, n, "exception comps").unwrap_or_default(),
            };
            if !fields.is_empty() && comps.len() != fields.len() {
                self.err(
                    f,
                    pos,
                    format!("exception '{name}': {} fields but {} comps", fields.len(), comps.len()),
                );
                continue;
            }
            let mut values = Vec::new();
            match e.get("values") {
                None => {}
                Some(Node::Seq { items, .. }) => {
                    for row in items {
                        if single || fields.is_empty() {
                            // Without fields (appending values to an earlier exception) the
                            // shape is checked when the rule compiles.
                            match row {
                                Node::Scalar { value, .. } => values.push(vec![ExcValue::One(value.clone())]),
                                Node::Seq { items: cells, .. } if !single => {
                                    let mut tuple = Vec::new();
                                    for c in cells {
                                        match c {
                                            Node::Scalar { value, .. } => {
                                                tuple.push(ExcValue::One(value.clone()))
                                            }
                                            _ => tuple.push(ExcValue::Many(
                                                self.str_list(f, c, "exception value").unwrap_or_default(),
                                            )),
                                        }
                                    }
                                    values.push(tuple)
                                }
                                Node::Seq { .. } => {
                                    let v = self.str_list(f, row, "exception value").unwrap_or_default();
                                    values.push(vec![ExcValue::Many(v)])
                                }
                                _ => self.err(f, row.pos(), "an exception value must be a string or a list"),
                            }
                            continue;
                        }
                        let Node::Seq { items: cells, .. } = row else {
                            self.err(
                                f,
                                row.pos(),
                                format!(
                                    "exception '{name}': each value must be a list of {} items",
                                    fields.len()
                                ),
                            );
                            continue;
                        };
                        if cells.len() != fields.len() {
                            self.err(
                                f,
                                row.pos(),
                                format!(
                                    "exception '{name}': value has {} items but there are {} fields",
                                    cells.len(),
                                    fields.len()
                                ),
                            );
                            continue;
                        }
                        let mut tuple = Vec::new();
                        for c in cells {
                            match c {
                                Node::Scalar { value, .. } => tuple.push(ExcValue::One(value.clone())),
                                Node::Seq { .. } => tuple.push(ExcValue::Many(
                                    self.str_list(f, c, "exception value").unwrap_or_default(),
                                )),
                                _ => self.err(f, c.pos(), "an exception value must be a string or a list"),
                            }
                        }
                        values.push(tuple);
                    }
                }
                Some(n) if n.is_null() => {}
                Some(n) => self.err(f, n.pos(), "exception values must be a list"),
            }
            out.push(Exception { name, fields, single, comps, values, file: f, pos });
        }
        out
    }

    /// Merges exceptions: same name → values appended; new name → added.
    fn merge_exceptions(&mut self, into: &mut Vec<Exception>, new: Vec<Exception>) {
        for e in new {
            match into.iter_mut().find(|x| x.name == e.name) {
                Some(x) => x.values.extend(e.values),
                None => {
                    if e.fields.is_empty() {
                        self.err(
                            e.file,
                            e.pos,
                            format!(
                                "exception '{}' has no fields and no earlier exception has that name",
                                e.name
                            ),
                        );
                    } else {
                        into.push(e)
                    }
                }
            }
        }
    }

    fn rule(&mut self, f: usize, item: &Node) {
        let pos = item.pos();
        let Some(name) = self.str_of(f, item.get("rule").unwrap(), "rule name") else { return };
        let append = self.append_flag(f, item);
        let ov = self.overrides(f, item, "rule");
        if append && ov.is_some() {
            return self.err(f, pos, format!("rule '{name}': append and override cannot be used together"));
        }
        let existing = self.items.rules.iter().position(|r| r.name == name);
        if let Some(ov) = ov {
            let Some(i) = existing else {
                return self.err(
                    f,
                    pos,
                    format!("rule '{name}' has override but no rule by that name exists"),
                );
            };
            for (key, app, _) in ov {
                let n = item.get(&key).unwrap();
                self.apply_rule_key(f, i, &key, n, app);
            }
            return;
        }
        if append {
            let Some(i) = existing else {
                return self.err(f, pos, format!("rule '{name}' has append but no rule by that name exists"));
            };
            for key in ["condition", "exceptions", "output", "desc", "tags"] {
                if let Some(n) = item.get(key) {
                    self.apply_rule_key(f, i, key, n, true);
                }
            }
            if let Some(n) = item.get("enabled") {
                self.apply_rule_key(f, i, "enabled", n, false);
            }
            return;
        }
        // `- rule: X` with only `enabled:` changes an existing rule (Falco's older style).
        if let (Some(i), None, Some(en)) = (existing, item.get("condition"), item.get("enabled")) {
            return self.apply_rule_key(f, i, "enabled", en, false);
        }
        let mut missing = Vec::new();
        for k in ["condition", "output", "desc", "priority"] {
            if item.get(k).is_none() {
                missing.push(k);
            }
        }
        if !missing.is_empty() {
            return self.err(f, pos, format!("rule '{name}' misses {}", missing.join(", ")));
        }
        let Some(cond) = self.origin(f, item.get("condition").unwrap(), "condition") else { return };
        let Some(output_origin) = self.origin(f, item.get("output").unwrap(), "output") else { return };
        let Some(desc) = self.str_of(f, item.get("desc").unwrap(), "desc") else { return };
        let Some(priority) = self.priority(f, item.get("priority").unwrap()) else { return };
        let tags = match item.get("tags") {
            Some(n) => self.str_list(f, n, "tags").unwrap_or_default(),
            None => Vec::new(),
        };
        let enabled = match item.get("enabled") {
            Some(n) => self.bool_of(f, n, "enabled").unwrap_or(true),
            None => true,
        };
        let source = match item.get("source") {
            Some(n) => self.str_of(f, n, "source").unwrap_or_default(),
            None => "syscall".into(),
        };
        let exceptions = match item.get("exceptions") {
            Some(n) => self.exceptions(f, n),
            None => Vec::new(),
        };
        for e in &exceptions {
            if e.fields.is_empty() {
                self.err(f, e.pos, format!("exception '{}' has no fields", e.name));
            }
        }
        let rule = RuleItem {
            name,
            cond: CondText::new(cond),
            output: output_origin.value.trim().to_string(),
            output_origin: Some(output_origin),
            desc,
            priority,
            tags,
            enabled,
            source,
            exceptions,
            file: f,
            pos,
        };
        match existing {
            Some(i) => self.items.rules[i] = rule,
            None => self.items.rules.push(rule),
        }
    }

    fn apply_rule_key(&mut self, f: usize, i: usize, key: &str, n: &Node, append: bool) {
        match key {
            "condition" => {
                if let Some(o) = self.origin(f, n, "condition") {
                    let r = &mut self.items.rules[i];
                    if append {
                        r.cond.append(o)
                    } else {
                        r.cond = CondText::new(o)
                    }
                }
            }
            "output" => {
                if let Some(o) = self.str_of(f, n, "output") {
                    let r = &mut self.items.rules[i];
                    if append {
                        r.output = format!("{} {}", r.output, o.trim());
                    } else {
                        r.output = o.trim().to_string();
                    }
                }
            }
            "desc" => {
                if let Some(o) = self.str_of(f, n, "desc") {
                    let r = &mut self.items.rules[i];
                    if append {
                        r.desc = format!("{} {o}", r.desc);
                    } else {
                        r.desc = o;
                    }
                }
            }
            "tags" => {
                if let Some(t) = self.str_list(f, n, "tags") {
                    let r = &mut self.items.rules[i];
                    if append {
                        r.tags.extend(t);
                    } else {
                        r.tags = t;
                    }
                }
            }
            "priority" => {
                if let Some(p) = self.priority(f, n) {
                    self.items.rules[i].priority = p;
                }
            }
            "enabled" => {
                if let Some(b) = self.bool_of(f, n, "enabled") {
                    self.items.rules[i].enabled = b;
                }
            }
            "exceptions" => {
                let new = self.exceptions(f, n);
                let mut cur = std::mem::take(&mut self.items.rules[i].exceptions);
                if append {
                    self.merge_exceptions(&mut cur, new);
                } else {
                    cur = new;
                }
                self.items.rules[i].exceptions = cur;
            }
            _ => {} // warn_evttypes, skip-if-unknown-filter: accepted, no effect here.
        }
    }
}
