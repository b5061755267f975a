//! `--filter EXPR`: a condition in the rule language (the same parser,
//! fields and evaluation as `harrier run`), compiled as a one-rule ruleset
//! and evaluated through harrier-engine's field extraction over the state
//! rebuilt from the capture.

use anyhow::{bail, Result};
use harrier_capfile::Foreign;
use harrier_engine::source::Source;
use harrier_engine::state::EngineState;
use harrier_rules::events::EventType;
use harrier_rules::ruleset::{LoadOptions, RuleSet};
use harrier_rules::{EventSource, Field, FieldArg, Value};
use harrier_schema::view::SyscallView;
use std::cell::RefCell;
use std::sync::Arc;

/// The line and column where the condition starts in the generated rule file.
const COND_LINE: u32 = 6;
const COND_COL: u32 = 5;

pub struct Filter {
    rules: RuleSet,
    scratch: RefCell<String>,
}

/// What the filter needs besides the event and the state.
pub struct Clock<'a> {
    pub epoch_offset: u64,
    pub capture_start_ns: u64,
    pub host: &'a str,
}

impl Filter {
    /// Compiles a condition; an error names the column in `expr` (1-based).
    pub fn compile(expr: &str) -> Result<Filter> {
        // One line, so that a column in the generated file is a column in expr.
        let one_line = expr.replace(['\n', '\r', '\t'], " ");
        let lead = one_line.len() - one_line.trim_start().len();
        let cond = one_line.trim();
        if cond.is_empty() {
            bail!("--filter: empty condition");
        }
        let yaml = format!(
            "- rule: filter\n  desc: filter\n  priority: EMERGENCY\n  output: filter\n  condition: |-\n    {cond}\n"
        );
        let opts = LoadOptions {
            supported: Arc::new(harrier_engine::source::supported),
            strict: true,
            ..Default::default()
        };
        match RuleSet::load(&[("--filter", yaml.as_str())], &opts) {
            Ok(rules) => {
                // Offline: names (fd.sip.name = x) are resolved once, before any event.
                rules.dns().refresh();
                Ok(Filter { rules, scratch: RefCell::new(String::with_capacity(256)) })
            }
            Err(diags) => {
                let d = diags.iter().find(|d| d.is_error()).or(diags.first());
                match d {
                    Some(d) if d.line == COND_LINE => {
                        let col = d.col.saturating_sub(COND_COL - 1) as usize + lead;
                        bail!("--filter: column {col}: {}", strip_rule(&d.msg))
                    }
                    Some(d) => bail!("--filter: {}", strip_rule(&d.msg)),
                    None => bail!("--filter: the condition does not compile"),
                }
            }
        }
    }

    /// Does this syscall event (state applied as the engine would) match?
    pub fn matches(&self, v: &SyscallView, state: &EngineState, num: u64, clock: &Clock) -> bool {
        let ty = EventType(v.syscall.nr as u16);
        if self.rules.candidates(ty).is_empty() {
            return false;
        }
        let src = Source {
            view: Some(v),
            ty,
            tid: v.header.tid,
            num,
            wall_ns: v.header.ts + clock.epoch_offset,
            epoch_offset: clock.epoch_offset,
            boot_epoch_ns: 0,
            capture_start_ns: clock.capture_start_ns,
            host: clock.host,
            state,
            scratch: &self.scratch,
            cache: Default::default(),
            dns: Some(self.rules.dns()),
            ifaddrs: &[],
        };
        self.rules.rule_matches(0, &src)
    }

    /// Does this foreign event match? Only if its name is an event type
    /// Harrier knows (e.g. a syscall it does not type).
    pub fn matches_foreign(&self, f: &Foreign, state: &EngineState, num: u64, clock: &Clock) -> bool {
        let Some(ty) = EventType::from_name(f.name) else { return false };
        if self.rules.candidates(ty).is_empty() {
            return false;
        }
        let inner = Source {
            view: None,
            ty,
            tid: f.tid,
            num,
            wall_ns: f.ts + clock.epoch_offset,
            epoch_offset: clock.epoch_offset,
            boot_epoch_ns: 0,
            capture_start_ns: clock.capture_start_ns,
            host: clock.host,
            state,
            scratch: &self.scratch,
            cache: Default::default(),
            dns: Some(self.rules.dns()),
            ifaddrs: &[],
        };
        let res = f.param("res").and_then(|r| r.trim().parse().ok());
        self.rules.rule_matches(0, &ForeignSource { inner, f, res })
    }
}

/// A foreign event (from a legacy capture) as the rules see it: its name as
/// evt.type when Harrier knows the name, process fields from the state,
/// evt.res/evt.rawres from its "res" parameter and evt.arg.NAME from its
/// text parameters. Fields that need a typed event have no value.
struct ForeignSource<'a> {
    inner: Source<'a, EngineState>,
    f: &'a Foreign<'a>,
    res: Option<i64>,
}

impl EventSource for ForeignSource<'_> {
    fn event_type(&self) -> EventType {
        self.inner.ty
    }

    fn extract(&self, field: Field, arg: &FieldArg, out: &mut dyn FnMut(Value<'_>) -> bool) {
        match field {
            Field::EvtRawres => {
                if let Some(r) = self.res {
                    out(Value::S64(r));
                }
            }
            Field::EvtRes => match (self.res, self.f.param("res")) {
                (Some(r), _) if r >= 0 => {
                    out(Value::str("SUCCESS"));
                }
                (_, Some(text)) => {
                    out(Value::str(text));
                }
                _ => {}
            },
            Field::EvtFailed => {
                if let Some(r) = self.res {
                    out(Value::Bool(r < 0));
                }
            }
            Field::EvtArg | Field::EvtRawarg => {
                if let Some(v) = arg.key().and_then(|k| self.f.param(k)) {
                    out(Value::str(v));
                }
            }
            _ => self.inner.extract(field, arg, out),
        }
    }
}

/// "rule 'filter': msg" → "msg": there is no rule as far as the user knows.
fn strip_rule(msg: &str) -> &str {
    msg.strip_prefix("rule 'filter': ").unwrap_or(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_column_in_the_filter() {
        let e = Filter::compile("evt.type = openat and proc.nme = cat").err().unwrap().to_string();
        assert!(e.starts_with("--filter: column 23: "), "{e}");
        let e = Filter::compile("  evt.type = openat and (").err().unwrap().to_string();
        assert!(e.starts_with("--filter: column "), "{e}");
        assert!(Filter::compile("").is_err());
        assert!(Filter::compile("evt.type in (openat, close) and not fd.name startswith /proc").is_ok());
    }
}
