//! Real behaviours that Falco's rules (and Harrier's default rules) detect,
//! and what it takes to count their alerts as Falco's event-generator does:
//! an HTTP receiver for Harrier's alert output and event-generator's
//! `bench --loop` algorithm. Used by the live rule tests, `harrier-bench
//! rules-load` and its smoke test.

pub mod actions;
pub mod battery;
pub mod behaviour;
pub mod generator;
pub mod kit;
pub mod receiver;
pub mod runc;

pub use actions::{Action, Kit, ACTIONS};
pub use generator::{Generator, Round};
pub use receiver::{Receiver, Tally};

/// event-generator's rule-name match: letters and digits only (compare the
/// result case-insensitively).
pub fn normalise(rule: &str) -> String {
    rule.chars().filter(|c| c.is_ascii_alphanumeric()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_match_action_names_as_event_generator_does() {
        assert!(normalise("Execution from /dev/shm").eq_ignore_ascii_case("ExecutionFromDevShm"));
        assert!(normalise("PTRACE anti-debug attempt").eq_ignore_ascii_case("PTRACEAntiDebugAttempt"));
        assert!(!normalise("Read sensitive file trusted after startup")
            .eq_ignore_ascii_case("ReadSensitiveFileUntrusted"));
        let names: Vec<_> =
            actions::select(["Fileless execution via memfd_create", "Find AWS Credentials"], false)
                .iter()
                .map(|a| a.name)
                .collect();
        assert_eq!(names, ["FilelessExecutionViaMemfdCreate", "FindAWSCredentials"]);
        let traversal = ["Directory traversal monitored file read"];
        assert!(actions::select(traversal, false).is_empty(), "disabled");
        assert_eq!(actions::select(traversal, true).len(), 1);
    }

    #[test]
    fn every_action_name_is_unique_and_alphanumeric() {
        for (i, a) in ACTIONS.iter().enumerate() {
            assert_eq!(normalise(a.name), a.name, "{}", a.name);
            assert!(ACTIONS[..i].iter().all(|b| !b.name.eq_ignore_ascii_case(a.name)), "{}", a.name);
        }
    }
}
