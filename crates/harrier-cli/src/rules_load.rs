//! Loading rule files for `harrier run` and `harrier rules check`.

use anyhow::{bail, Context, Result};
use harrier_falco::config::RunConfig;
use harrier_rules::ruleset::RuleSet;

/// Rule files in order: a directory contributes its *.yaml/*.yml, sorted.
fn expand(paths: &[String]) -> Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("rules file {p}"))?;
        let mut names = Vec::new();
        if meta.is_dir() {
            for e in std::fs::read_dir(p).with_context(|| format!("reading {p}"))? {
                let path = e?.path();
                if path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                    names.push(path.display().to_string());
                }
            }
            names.sort();
        } else {
            names.push(p.clone());
        }
        for n in names {
            let text = std::fs::read_to_string(&n).with_context(|| format!("reading {n}"))?;
            files.push((n, text));
        }
    }
    Ok(files)
}

/// The rule files of `cfg` (name, text), in order: the embedded defaults when it names none.
pub fn files(cfg: &RunConfig) -> Result<Vec<(String, String)>> {
    match cfg.rules_files.is_empty() {
        true => Ok(vec![(
            harrier_rules::DEFAULT_RULES_NAME.to_string(),
            harrier_rules::DEFAULT_RULES.to_string(),
        )]),
        false => expand(&cfg.rules_files),
    }
}

/// The rules of `cfg` (the embedded defaults when it names none).
pub fn load(cfg: &RunConfig) -> Result<RuleSet> {
    load_for(cfg, "syscall")
}

/// The rule set of one source: `syscall`, or a plugin's (its warnings are the syscall
/// load's too: said once, by that load).
pub fn load_for(cfg: &RunConfig, source: &str) -> Result<RuleSet> {
    let files = files(cfg)?;
    let mut opts = cfg.load_options();
    opts.source = source.to_string();
    let say_warnings = source == "syscall" || !cfg.syscall_source;
    match RuleSet::load(&files, &opts) {
        Ok(rules) => {
            for w in rules.warnings().iter().filter(|_| say_warnings) {
                say!("{w}");
            }
            let refused = |w: &&harrier_rules::Diagnostic| {
                w.falco.as_ref().is_some_and(|f| f.code.starts_with("LOAD_ERR"))
            };
            if let Some(w) = rules.warnings().iter().find(refused).filter(|_| cfg.as_falco) {
                let f = w.falco.as_ref().expect("found by its code");
                bail!("{}:{}:{}: {} ({}): {}", w.file, w.line, w.col, f.code, f.message, w.msg);
            }
            Ok(rules)
        }
        Err(diags) => {
            let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
            // Every error on its own line; the last one is the exit message.
            for d in &diags[..diags.len().saturating_sub(1)] {
                say!("{d}");
            }
            match (errors.len(), diags.last()) {
                (_, Some(last)) => bail!("{last}"),
                _ => bail!("the rules did not load"),
            }
        }
    }
}
