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
    },
}

pub fn run(cmd: RulesCommand) -> Result<()> {
    match cmd {
        RulesCommand::Check { files } => {
            let cfg = RunConfig { rules_files: files, ..RunConfig::default() };
            let rules = rules_load::load(&cfg)?;
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
