//! `harrier rules check FILE...`: what loads, what is evaluated, what is attached.

use crate::rules_load;
use anyhow::Result;
use harrier_falco::config::RunConfig;

#[derive(clap::Subcommand)]
pub enum RulesCommand {
    /// Load rule files and report, per rule, whether Harrier evaluates it
    /// (naming the unsupported field when not) and which syscalls it needs.
    Check {
        /// Rule files or directories (default: the embedded rules).
        files: Vec<String>,
        /// Per active rule, whether enforcement would be decided in the
        /// kernel (and which syscalls), and which terms leave it to user space.
        #[arg(long)]
        enforce: bool,
    },
}

pub fn run(cmd: RulesCommand) -> Result<()> {
    match cmd {
        RulesCommand::Check { files, enforce } => {
            let cfg = RunConfig { rules_files: files, ..RunConfig::default() };
            let rules = rules_load::load(&cfg)?;
            if enforce {
                return enforce_report(&rules);
            }
            println!("{}", rules.check_report());
            let interest = harrier_engine::interest::interest(&rules);
            println!("{}", interest.summary());
            for r in &interest.unbounded_rules {
                println!("note: rule '{r}' has no evt.type: it sees typed syscalls only");
            }
            Ok(())
        }
    }
}

/// `rules check --enforce`: every active rule's enforcement decision, as
/// `harrier run` would compile it over the syscalls the rules need.
fn enforce_report(rules: &harrier_rules::ruleset::RuleSet) -> Result<()> {
    let interest = harrier_engine::interest::interest(rules);
    let active: Vec<u32> =
        rules.rules().iter().enumerate().filter(|(_, r)| r.is_active()).map(|(i, _)| i as u32).collect();
    let exempt = harrier_engine::guard::Exempt::default();
    let (mut kernel, mut partly) = (0, 0);
    // At most MAX_RULES per compile: the decision of a rule does not depend on the others.
    for chunk in active.chunks(harrier_capture::guard::MAX_RULES) {
        let plan = harrier_engine::guard::compile(rules, chunk, &exempt, &interest.syscalls, 1, true)?;
        for d in &plan.decisions {
            match (&d.user_space, d.deferred.is_empty()) {
                (None, true) => kernel += 1,
                (None, false) => partly += 1,
                _ => {}
            }
            println!("{}: {}", d.rule, d.summary());
        }
    }
    println!(
        "{} rules: {kernel} decided in the kernel, {partly} in the kernel until a term only user space knows, {} in user space",
        active.len(),
        active.len() - kernel - partly
    );
    Ok(())
}
