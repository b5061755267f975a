//! `cargo run -p harrier-rules --example rules-check -- FILE...`: loads rule files in order
//! (none: the default ruleset) and prints, per rule, whether it is evaluated, then the
//! syscalls the rules need. Errors: one line each, file:line:column, exit status 1.

use harrier_rules::ruleset::{LoadOptions, RuleSet};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut files = Vec::new();
    if args.is_empty() {
        files.push((harrier_rules::DEFAULT_RULES_NAME.to_string(), harrier_rules::DEFAULT_RULES.to_string()));
    }
    for a in &args {
        match std::fs::read_to_string(a) {
            Ok(t) => files.push((a.clone(), t)),
            Err(e) => {
                eprintln!("{a}: {e}");
                std::process::exit(1);
            }
        }
    }
    match RuleSet::load(&files, &LoadOptions::default()) {
        Ok(rs) => {
            for w in rs.warnings() {
                eprintln!("{w}");
            }
            println!("{}", rs.check_report());
            let sc = rs.event_types().syscall_names();
            println!("{} syscalls needed by the rules: {}", sc.len(), sc.join(","));
        }
        Err(diags) => {
            for d in diags {
                eprintln!("{d}");
            }
            std::process::exit(1);
        }
    }
}
