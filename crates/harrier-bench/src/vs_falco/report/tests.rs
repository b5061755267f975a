use super::*;
use crate::sensor::{bpf::ProgStat, Kind};
use crate::vs_falco::work::Done;
use crate::vs_falco::{rate::Step, Setup, COPIES_ONLY, HARRIER};
use std::time::Duration;

/// A run of `ops` operations in `secs`, its sensor using `cpu_s`.
fn run(ops: f64, secs: f64, cpu_s: f64) -> Sample {
    Sample { done: Done { ops, secs, syscalls: ops, ..Done::default() }, cpu_s, ..Sample::default() }
}

#[test]
fn added_cost_is_paired_per_round() {
    // Round 2's machine is slower for everyone: pairs cancel that.
    let base = [run(1e6, 1.0, 0.0), run(1e6, 2.0, 0.0), run(1e6, 1.0, 0.0)];
    let with = [run(1e6, 1.2, 0.0), run(1e6, 2.2, 0.0), run(1e6, 1.3, 0.0)];
    assert!((paired_added(&with, &base) - 200.0).abs() < 1e-6, "{}", paired_added(&with, &base));
}

#[test]
fn ratios_need_both_sides() {
    assert_eq!(ratio(50.0, 100.0), "0.50×");
    assert_eq!(ratio(50.0, 0.0), "-");
    assert_eq!(ratio(f64::NAN, 10.0), "-");
    assert_eq!(ratio(10.0, -5.0), "-", "a base within the noise below zero has no ratio");
    assert_eq!(ratio(-10.0, 5.0), "< 0");
}

#[test]
fn cells_take_medians_and_sum_drops() {
    let mut runs = vec![run(1e6, 1.0, 0.010), run(1e6, 1.0, 0.030), run(1e6, 1.0, 0.020)];
    runs[1].drops = 5;
    runs[2].alerts = 4;
    for (i, r) in runs.iter_mut().enumerate() {
        r.rss.median_kb = 1024 * (10 + i as u64);
        r.rss.samples = 5;
        r.rss.peak_kb = 1024 * 40;
        r.hwm_kb = 1024 * 50;
    }
    let base = vec![run(1e6, 0.9, 0.0); 3];
    let c = cell(&runs, &base, &[], true);
    assert_eq!(c.ops_s, 1e6);
    assert!((c.cpu_ns_syscall - 20.0).abs() < 1e-9, "median of 10, 30, 20 ns");
    assert!((c.added_ns - 100.0).abs() < 1e-6);
    assert_eq!((c.rss_mb, c.peak_mb, c.drops, c.alerts), (11.0, 50.0, 5, 0.0));
    assert!(c.bpf_ns_syscall.is_nan(), "no BPF pass");
    let none = cell(&base, &base, &[], false);
    assert!(none.added_ns.is_nan() && none.cpu_ns_syscall.is_nan());
}

fn prog(name: &str, cnt: u64, ns: u64) -> ProgStat {
    ProgStat { id: 0, name: name.into(), run_cnt: cnt, run_time_ns: ns }
}

#[test]
fn programs_are_summed_by_name_and_tail_calls_left_out() {
    let mut s = run(1000.0, 1.0, 0.0);
    s.progs = vec![
        prog("hr_empty_tp", 500, 50_000),
        prog("hr_empty_tp", 500, 30_000),
        prog("sys_exit", 1000, 200_000),
        prog("tail", 0, 0),
    ];
    let rows = programs(&[s]);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["sys_exit", "hr_empty_tp"], "by ns per syscall, descending; never-run left out");
    assert_eq!((rows[1].1, rows[1].2, rows[1].3), (1.0, 80.0, 80.0));
    let mut b = run(1000.0, 1.0, 0.0);
    b.progs = rows.iter().map(|r| prog(&r.0, 1000, (r.3 * 1000.0) as u64)).collect();
    assert!((bpf_ns(&b) - 280.0).abs() < 1e-9);
}

#[test]
fn the_report_has_every_table_and_the_chart() {
    let out = std::env::temp_dir().join(format!("harrier-vsfalco-report-{}", std::process::id()));
    let setup = |label: &str, kind| Setup { label: label.into(), kind, args: vec![] };
    let o = Opts {
        falco: Some(("/opt/f/falco".into(), "/opt/f/falco.yaml".into())),
        harrier: "/x/harrier".into(),
        rules: vec!["rules.yaml".into()],
        setups: vec![
            setup(NONE, None),
            setup(FALCO, Some(Kind::Falco)),
            setup(HARRIER, Some(Kind::Harrier)),
            setup(COPIES_ONLY, Some(Kind::Harrier)),
            setup(FLOOR, Some(Kind::Harrier)),
            setup(NO_ENTRY_COPIES, Some(Kind::Harrier)),
            setup(FLOOR_NO_ENTRY, Some(Kind::Harrier)),
        ],
        workloads: vec![Workload::Getpid],
        rounds: 1,
        bpf_rounds: 1,
        rate_steps: vec![],
        rate_secs: Duration::from_secs(1),
        exec_every: 200,
        out: out.clone(),
        settle: Duration::ZERO,
    };
    let stop = crate::sensor::StopReport {
        status: std::os::unix::process::ExitStatusExt::from_raw(0),
        final_stats: Some(Duration::from_millis(300)),
        gone: Duration::from_millis(400),
        killed: false,
        left_progs: 0,
        left_links: 0,
        left_maps: 0,
        counters: Default::default(),
    };
    let with = |ns: f64| Sample { stop: Some(stop.clone()), ..run(1e6, ns / 1e3, 0.1) };
    // ns per call: none 200, Falco 400 (+200), harrier 300 (+100), copies only 280 (+80), floor 260 (+60),
    // no entry copies 270 (+70), its floor 235 (+35).
    let samples: Samples = vec![vec![
        vec![run(1e6, 0.2, 0.0)],
        vec![with(400.0)],
        vec![with(300.0)],
        vec![with(280.0)],
        vec![with(260.0)],
        vec![with(270.0)],
        vec![with(235.0)],
    ]];
    let mut bpf: Samples = vec![vec![vec![]; 7]];
    let mut b = with(300.0);
    b.progs = vec![prog("hr_dispatch", 1_000_000, 80_000_000)];
    bpf[0][2].push(b);
    let meta = Meta {
        falco_version: Some("Falco 0.44.1".into()),
        harrier_version: "harrier 0.1.0".into(),
        load_before: "1.00 1.00 1.00".into(),
        load_after: "2.00 2.00 2.00".into(),
        minutes: 1.0,
        sizes: crate::vs_falco::work::Sizes {
            mix: Duration::from_secs(1),
            exec_every: 200,
            redis_requests: 1,
            getpid_calls: 1_000_000,
            execs: 1,
        },
        per_op: vec![],
    };
    let rates = vec![
        Rates {
            label: FALCO.into(),
            steps: vec![
                Step { target: 1, rate: 200_000.0, drops: 0 },
                Step { target: 2, rate: 250_000.0, drops: 7 },
            ],
        },
        Rates { label: HARRIER.into(), steps: vec![Step { target: 1, rate: 100_000.0, drops: 0 }] },
    ];
    write(&o, &meta, &samples, &bpf, &rates).unwrap();
    let md = std::fs::read_to_string(out.join("vs-falco.md")).unwrap();
    let row = |start: &str| {
        md.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no row {start}:\n{md}"))
            .to_string()
    };
    let h = row("| getpid (calls) | harrier run |");
    assert!(
        h.contains("+100.0") && h.contains("0.50×") && h.contains("1.67×"),
        "Falco's half, the floor's 1.67×: {h}"
    );
    assert!(row("| getpid (calls) | harrier run, entry copies only |").ends_with("| 0.40× | 1.33× |"));
    assert!(
        row("| getpid (calls) | harrier run, empty programs |").ends_with("| 0.30× |  |"),
        "no floor × itself"
    );
    assert!(
        row("| getpid (calls) | harrier run, no entry copies |").ends_with("| 0.35× | 2.00× |"),
        "compared with the floor of its own attach"
    );
    assert!(
        row("| getpid (calls) | harrier run, empty programs, no entry copies |").ends_with("| 0.17× |  |")
    );
    assert!(row("| getpid (calls) | Falco 0.44.1 |").contains("+200.0"));
    assert!(row("| getpid | harrier run |").contains("| 80.0 |"), "BPF ns per syscall");
    assert!(row("| getpid | harrier run | hr_dispatch |").contains("| 1.000 | 80.0 | 80.0 |"));
    assert!(row("| harrier run | 100000 (load-bound").contains("0.50×"), "drop-free rate vs Falco's");
    assert!(row("| Falco 0.44.1 | 200000 |").contains("250000 (7)"));
    assert!(row("| harrier run | 2 |").contains("0.30 / 0.30"), "stops: the main and the BPF run");
    assert!(md.contains("load average 1.00 1.00 1.00 at the start, 2.00 2.00 2.00 at the end"));
    assert!(std::fs::metadata(out.join("vs-falco.png")).unwrap().len() > 1000);
    std::fs::remove_dir_all(&out).unwrap();
}
