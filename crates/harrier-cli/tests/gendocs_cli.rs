//! `harrier gen-docs DIR` (hidden, used by packaging/install.mk): a man page per
//! visible command and completions for bash, zsh and fish, none of them
//! offering the hidden command; a bad DIR is a one-line error.

use std::path::PathBuf;
use std::process::Command;

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harrier-gendocs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn writes_man_pages_and_completions() {
    let dir = scratch("ok");
    let out = Command::new(HARRIER).arg("gen-docs").arg(&dir).output().unwrap();
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let pages: Vec<String> = [
        "harrier",
        "harrier-capture",
        "harrier-bypass",
        "harrier-bypass-start",
        "harrier-run",
        "harrier-fswatch",
        "harrier-falco",
    ]
    .iter()
    .map(|p| read(&format!("man/{p}.1")))
    .collect();
    let comps: Vec<(&str, String)> = ["harrier", "_harrier", "harrier.fish"]
        .iter()
        .map(|c| (*c, read(&format!("completions/{c}"))))
        .collect();
    let man_files = std::fs::read_dir(dir.join("man")).unwrap().count();
    std::fs::remove_dir_all(&dir).unwrap();

    assert!(out.status.success(), "gen-docs failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(pages[0].contains(".TH harrier 1"), "harrier.1 has no title line");
    assert!(pages[1].contains("\\-\\-syscalls"), "harrier-capture.1 lacks --syscalls");
    assert!(pages[3].contains("\\-\\-slots"), "harrier-bypass-start.1 lacks --slots");
    assert!(pages[4].contains("\\-\\-config"), "harrier-run.1 lacks --config");
    assert!(pages[5].contains("\\-\\-no\\-recursive"), "harrier-fswatch.1 lacks --no-recursive");
    assert!(
        pages[6].contains("\\-\\-validate") && pages[6].contains("\\-\\-option"),
        "harrier-falco.1 lacks Falco's options"
    );
    // harrier, run, rules, rules check, capture, convert, read, inspect, export, fswatch, falco, bypass and its 3.
    assert_eq!(man_files, 15, "one page per visible command");
    for (name, text) in &comps {
        let all = ["run", "rules", "capture", "fswatch", "bypass"].iter().all(|c| text.contains(c));
        assert!(all, "{name}: subcommands missing");
        assert!(!text.contains("gen-docs"), "{name} offers the hidden gen-docs");
    }
}

#[test]
fn hidden_from_help() {
    let out = Command::new(HARRIER).arg("--help").output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("gen-docs"));
}

#[test]
fn unwritable_dir_is_a_one_line_error() {
    let file = scratch("file");
    std::fs::write(&file, b"").unwrap();
    let out = Command::new(HARRIER).arg("gen-docs").arg(&file).output().unwrap();
    std::fs::remove_file(&file).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("harrier: error: creating "), "{err}");
}
