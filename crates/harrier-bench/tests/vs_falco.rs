//! A smoke run of `harrier-bench vs-falco` with Harrier only (CI has no
//! Falco): the mix and the getpid loop, one round, the floor, the BPF pass,
//! a rate step; the report must hold every table and the chart.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn a_quick_harrier_only_run_writes_the_report() {
    if unsafe { libc::geteuid() } != 0 {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "CI runs as root");
        eprintln!("note: not root, skipping the vs-falco smoke run");
        return;
    }
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_harrier-bench"));
    let harrier = bench.with_file_name("harrier");
    assert!(harrier.exists(), "{} missing: cargo build --release --workspace first", harrier.display());
    let out = std::env::temp_dir().join(format!("harrier-vsfalco-smoke-{}", std::process::id()));
    let o = Command::new(&bench)
        .args([
            "vs-falco",
            "--quick",
            "--workloads",
            "mix,getpid",
            "--mix-secs",
            "1",
            "--getpid-calls",
            "200000",
        ])
        .args(["--rate-steps", "50000", "--rate-secs", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "vs-falco failed:\n{stderr}");
    let md = std::fs::read_to_string(out.join("vs-falco.md")).unwrap();
    assert_eq!(stdout.trim(), md.trim(), "the report is printed too");
    for row in [
        "| mix (syscalls) | no sensor |",
        "| mix (syscalls) | harrier run |",
        "| getpid (calls) | harrier run, empty programs |",
        "| mix | harrier run | hr_exit_openat |",
        "| harrier run | 4 |",
    ] {
        assert!(md.contains(row), "no row {row:?} in:\n{md}");
    }
    assert!(md.contains("alone (no --falco given)") && !md.contains("| Falco"), "no Falco without --falco");
    // Two workloads, each once plain and once with BPF stats: four SIGINT
    // stops, none killed, nothing left attached.
    let stops = md.lines().find(|l| l.starts_with("| harrier run | 4 |")).unwrap();
    assert!(
        stops.contains("| 0 | 0 / 0 / 0 |") && !stops.contains("without"),
        "every final stats line seen: {stops}"
    );
    // The floor's empty programs ran.
    assert!(md.contains("| mix | harrier run, empty programs | hr_empty_btf |"), "{md}");
    assert!(std::fs::metadata(out.join("vs-falco.png")).unwrap().len() > 1000);
    std::fs::remove_dir_all(&out).unwrap();
}
