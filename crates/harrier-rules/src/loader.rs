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
    /// skip-if-unknown-filter: an unknown field or event type skips the rule (a warning).
    pub skip_unknown: bool,
    /// warn_evttypes (default true): warn when the rule matches too many event types.
    pub warn_evttypes: bool,
    /// Falco's `capture: true`: a capture file is written from each of its alerts on, for
    /// `capture_duration` ms (else the config's default).
    pub capture: bool,
    pub capture_duration: Option<u64>,
    pub file: usize,
    pub pos: Pos,
}

/// Everything the files define, merged.
#[derive(Debug, Default)]
pub struct Items {
    pub lists: Vec<ListItem>,
    pub macros: Vec<MacroItem>,
    pub rules: Vec<RuleItem>,
    pub required_plugins: Vec<crate::plugins::Requirement>,
    /// The highest required_engine_version of the files (major, minor, patch).
    pub required_engine_version: Option<(u64, u64, u64)>,
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
    "capture",
    "capture_duration",
];

impl<'f> Loader<'f> {
    pub fn new(files: &'f [(String, String)]) -> Self {
        Loader { files, items: Items::default(), diags: Vec::new() }
    }

    fn err(&mut self, file: usize, pos: Pos, msg: impl Into<String>) {
        self.diags.push(Diagnostic::error(&self.files[file].0, pos.line, pos.col, msg));
    }
    /// An error Falco reports too: its code, item and message.
    fn err_as(
        &mut self,
        file: usize,
        pos: Pos,
        msg: impl Into<String>,
        code: &'static str,
        item: (&'static str, &str),
        falco: impl Into<String>,
    ) {
        let d = Diagnostic::error(&self.files[file].0, pos.line, pos.col, msg).as_falco(code, item, falco);
        self.diags.push(d);
    }
    /// A missing key, as Falco reports it.
    fn missing(
        &mut self,
        file: usize,
        pos: Pos,
        msg: impl Into<String>,
        item: (&'static str, &str),
        key: &str,
    ) {
        let falco = format!("Item has no mapping for key '{key}'");
        self.err_as(file, pos, msg, "LOAD_ERR_YAML_VALIDATE", item, falco)
    }
    /// The item's name, which Falco needs to be there and not empty.
    fn name_of(&mut self, f: usize, item: &Node, kind: &'static str) -> Option<String> {
        let n = item.get(kind).expect("the item's kind is its key");
        if n.is_null() {
            let falco = format!("Mapping for key '{kind}' is empty");
            self.err_as(
                f,
                n.pos(),
                format!("{kind} without a name"),
                "LOAD_ERR_YAML_VALIDATE",
                (kind, ""),
                falco,
            );
            return None;
        }
        self.str_of(f, n, &format!("{kind} name"))
    }

    pub fn load_all(&mut self) {
        for f in 0..self.files.len() {
            self.load_file(f);
        }
    }

    fn load_file(&mut self, f: usize) {
        let docs = match yaml::parse(&self.files[f].1) {
            Ok(d) => d,
            Err(e) => {
                // yaml-cpp's words for the same mistakes, as Falco reports them.
                let what = match e.msg.as_str() {
                    "mapping values are not allowed in this context" => "illegal map value",
                    m => m,
                };
                let falco = format!("yaml-cpp: error at line {}, column {}: {what}", e.pos.line, e.pos.col);
                let msg = format!("invalid YAML: {}", e.msg);
                return self.err_as(f, e.pos, msg, "LOAD_ERR_YAML_PARSE", ("rules content", ""), falco);
            }
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
                    let falco = match n {
                        Node::Map { .. } => "Rules content is not yaml array of objects",
                        _ => "Rules content is not yaml",
                    };
                    let msg = format!("a rules file must be a list of items, found {}", n.kind());
                    self.err_as(f, n.pos(), msg, "LOAD_ERR_YAML_VALIDATE", ("rules content", ""), falco)
                }
            }
        }
    }

    fn load_item(&mut self, f: usize, item: &Node) {
        let Node::Map { entries, pos } = item else {
            let msg = format!("each item must be a mapping, found {}", item.kind());
            let falco = "Unexpected element type. Each element should be a yaml associative array.";
            return self.err_as(
                f,
                item.pos(),
                msg,
                "LOAD_ERR_YAML_VALIDATE",
                ("rules content item", ""),
                falco,
            );
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
            self.engine_version(f, item.get("required_engine_version").unwrap())
        } else if has("required_plugin_versions") {
            match crate::plugins::parse(f, item.get("required_plugin_versions").unwrap()) {
                Ok(r) => self.items.required_plugins.extend(r),
                Err((p, msg)) => self.err(f, p, msg),
            }
        } else {
            self.err(f, *pos, format!("unknown item '{first}': expected rule, macro, list, required_engine_version or required_plugin_versions"))
        }
    }

    /// required_engine_version: a number N (Falco's older form, "0.N.0") or "x.y.z", at most
    /// the engine's version ([`crate::ENGINE_VERSION`]) in the same major, as Falco checks it.
    fn engine_version(&mut self, f: usize, n: &Node) {
        let item = ("required_engine_version", "");
        let text = n.as_str().unwrap_or("").trim();
        let parse = |t: &str| -> Option<(u64, u64, u64)> {
            let mut p = t.split('.').map(|x| x.parse::<u64>().ok());
            let v = (p.next()??, p.next()??, p.next()??);
            p.next().is_none().then_some(v)
        };
        let want = match text.parse::<u32>() {
            Ok(minor) => (0, minor as u64, 0),
            Err(_) => match parse(text) {
                Some(v) => v,
                None => {
                    let falco = format!("Unable to parse engine version '{text}' as a semver string. Expected \"x.y.z\" semver format.");
                    let msg = format!("required_engine_version '{text}' is not a version (x.y.z)");
                    return self.err_as(f, n.pos(), msg, "LOAD_ERR_YAML_VALIDATE", item, falco);
                }
            },
        };
        let have = parse(crate::ENGINE_VERSION).expect("a valid engine version");
        let req = &mut self.items.required_engine_version;
        *req = (*req).max(Some(want));
        if want.0 != have.0 || want > have {
            let (w, h) = (format!("{}.{}.{}", want.0, want.1, want.2), crate::ENGINE_VERSION);
            let falco = format!("Rules require engine version {w}, but engine version is {h}");
            let msg = format!("the rules require engine version {w}; this is {h}");
            self.err_as(f, n.pos(), msg, "LOAD_ERR_VALIDATE", item, falco);
        }
    }

    /// A duration in milliseconds (capture_duration).
    fn millis(&mut self, f: usize, n: &Node) -> Option<u64> {
        let v = n.as_str().and_then(|s| s.parse().ok());
        if v.is_none() {
            self.err(f, n.pos(), "capture_duration must be a number of milliseconds");
        }
        v
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
        let Some(name) = self.name_of(f, item, "list") else { return };
        let Some(items_node) = item.get("items") else {
            return self.missing(f, pos, format!("list '{name}' has no items"), ("list", &name), "items");
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
        let Some(name) = self.name_of(f, item, "macro") else { return };
        let Some(cn) = item.get("condition") else {
            return self.missing(
                f,
                pos,
                format!("macro '{name}' has no condition"),
                ("macro", &name),
                "condition",
            );
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

    /// An exception's error, as Falco reports it (the rule, then the exception).
    fn exc_err(
        &mut self,
        f: usize,
        pos: Pos,
        msg: String,
        code: &'static str,
        rule: &str,
        exc: &str,
        falco: &str,
    ) {
        let d = Diagnostic::error(&self.files[f].0, pos.line, pos.col, msg)
            .as_falco(code, ("rule", rule), falco)
            .within(("exception", exc));
        self.diags.push(d);
    }

    fn exceptions(&mut self, f: usize, n: &Node, rule: &str) -> Vec<Exception> {
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
                let msg = "an exception needs a name".to_string();
                self.exc_err(
                    f,
                    pos,
                    msg,
                    "LOAD_ERR_YAML_VALIDATE",
                    rule,
                    "",
                    "Item has no mapping for key 'name'",
                );
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
                let msg = format!("exception '{name}': {} fields but {} comps", fields.len(), comps.len());
                let falco = "Fields and comps lists must have equal length";
                self.exc_err(f, pos, msg, "LOAD_ERR_VALIDATE", rule, &name, falco);
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
                            let msg = format!(
                                "exception '{name}': value has {} items but there are {} fields",
                                cells.len(),
                                fields.len()
                            );
                            let falco = "Fields and values lists must have equal length";
                            self.exc_err(f, row.pos(), msg, "LOAD_ERR_VALIDATE", rule, &name, falco);
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
    fn merge_exceptions(&mut self, rule: &str, into: &mut Vec<Exception>, new: Vec<Exception>) {
        for e in new {
            match into.iter_mut().find(|x| x.name == e.name) {
                Some(x) => x.values.extend(e.values),
                None => {
                    if e.fields.is_empty() {
                        let msg = format!(
                            "exception '{}' has no fields and no earlier exception has that name",
                            e.name
                        );
                        let falco = "Rule exception must have fields property with a list of fields";
                        self.exc_err(e.file, e.pos, msg, "LOAD_ERR_VALIDATE", rule, &e.name, falco);
                    } else {
                        into.push(e)
                    }
                }
            }
        }
    }

    fn rule(&mut self, f: usize, item: &Node) {
        let pos = item.pos();
        let Some(name) = self.name_of(f, item, "rule") else { return };
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
            if item.get("condition").is_none() && item.get("exceptions").is_none() {
                let msg =
                    format!("rule '{name}' has append but neither a condition nor exceptions to append");
                let falco = "Appended rule must have exceptions or condition property";
                return self.err_as(f, pos, msg, "LOAD_ERR_VALIDATE", ("rule", &name), falco);
            }
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
            let msg = format!("rule '{name}' misses {}", missing.join(", "));
            return self.missing(f, pos, msg, ("rule", &name), missing[0]);
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
            Some(n) => self.exceptions(f, n, &name),
            None => Vec::new(),
        };
        for e in &exceptions {
            if e.fields.is_empty() {
                let msg = format!("exception '{}' has no fields", e.name);
                let d = Diagnostic::error(&self.files[f].0, e.pos.line, e.pos.col, msg)
                    .as_falco(
                        "LOAD_ERR_YAML_VALIDATE",
                        ("rule", &name),
                        "Item has no mapping for key 'fields'",
                    )
                    .within(("exception", &e.name));
                self.diags.push(d);
            }
        }
        let flag = |me: &mut Self, key: &str, default: bool| match item.get(key) {
            Some(n) => me.bool_of(f, n, key).unwrap_or(default),
            None => default,
        };
        let skip_unknown = flag(self, "skip-if-unknown-filter", false);
        let warn_evttypes = flag(self, "warn_evttypes", true);
        let capture = flag(self, "capture", false);
        let capture_duration = item.get("capture_duration").and_then(|n| self.millis(f, n));
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
            skip_unknown,
            warn_evttypes,
            capture,
            capture_duration,
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
                let rule = self.items.rules[i].name.clone();
                let new = self.exceptions(f, n, &rule);
                let mut cur = std::mem::take(&mut self.items.rules[i].exceptions);
                if append {
                    self.merge_exceptions(&rule, &mut cur, new);
                } else {
                    cur = new;
                }
                self.items.rules[i].exceptions = cur;
            }
            "skip-if-unknown-filter" => {
                if let Some(b) = self.bool_of(f, n, key) {
                    self.items.rules[i].skip_unknown = b;
                }
            }
            "warn_evttypes" => {
                if let Some(b) = self.bool_of(f, n, key) {
                    self.items.rules[i].warn_evttypes = b;
                }
            }
            "capture" => {
                if let Some(b) = self.bool_of(f, n, key) {
                    self.items.rules[i].capture = b;
                }
            }
            "capture_duration" => {
                if let Some(ms) = self.millis(f, n) {
                    self.items.rules[i].capture_duration = Some(ms);
                }
            }
            _ => {}
        }
    }
}
