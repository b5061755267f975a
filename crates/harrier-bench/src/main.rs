//! `harrier-bench`: Harrier's benchmarks (`make bench-capture`).

mod alloc_count;
mod capture;
mod convert;
mod costs;
mod falco_diff;
mod files;
mod fs;
mod fs_rate;
mod fs_scen;
mod fs_watch;
mod fs_work;
mod handler_steps;
mod hook_costs;
mod legacy_size;
mod outputs;
mod path_depth;
mod plugins;
mod report;
mod rules;
mod rules_load;
mod sensor;
mod stop;
mod vs_falco;
mod workload;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "harrier-bench", about = "Harrier's benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The capture benchmark: getpid loop, dd, redis-benchmark; table + PNGs.
    Capture {
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Skip redis and use shorter loops (a smoke run).
        #[arg(long)]
        quick: bool,
        /// Where the table and charts go.
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
        /// Skip the SIGINT-to-exit measurement.
        #[arg(long)]
        no_stop: bool,
        /// Only the cases whose label contains this (e.g. "redis"); each
        /// workload's no-sensor row has the workload's name in its label.
        #[arg(long)]
        only: Option<String>,
    },
    /// A syscall tracepoint against fentry/fexit on the syscall's function, per openat and per
    /// unselected getpid (make bench-hooks: in the Debian guests, instructions counted by qemu).
    HookCosts(hook_costs::Args),
    /// An open's exit handler by the depth of the file, with and without the path cache
    /// (make bench-paths).
    PathDepth(path_depth::Args),
    /// Where the vs-falco mix's BPF time goes, per program and per step (make bench-steps).
    HandlerSteps(handler_steps::Args),
    /// Kernel cost of each capture step, and the dispatcher design, per getpid.
    KernelCosts {
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long, default_value_t = 2_000_000)]
        count: u64,
    },
    /// User-space ns per event of the rules engine (state + rules), replayed events.
    RulesCost {
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long, default_value = "../shared/data/falco-rules/falco_rules.yaml")]
        stable_rules: String,
        /// Replay this capture file's events instead of recording a workload
        /// (repeatable figures, and runs under callgrind, which cannot load BPF).
        #[arg(long)]
        events: Option<std::path::PathBuf>,
    },
    /// Legacy .scap conversion: events/s and bytes per syscall, legacy vs Harrier.
    Convert {
        #[arg(long, default_value = "../shared/data/scap")]
        dir: PathBuf,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Falco's performance-testing method against `harrier run` (make bench-rules):
    /// event-generator bench rounds, a stepped syscall load, CPU-quota cgroups.
    RulesLoad(rules_load::Args),
    /// `harrier run` side by side with a Falco binary (make bench-vs-falco): four workloads,
    /// the empty-program floor, BPF run-time stats, drop-free rate under 1 CPU, SIGINT stops.
    VsFalco(vs_falco::Args),
    /// Plugin sources (make bench-plugins): k8saudit through a file and its webhook, events/s
    /// of `harrier falco` and of a Falco binary, interleaved.
    Plugins(plugins::Args),
    /// Falco and `harrier run` at once on the battery (or a cargo build): every alert and
    /// output field compared, the report in docs/falco-diff.md.
    FalcoDiff(falco_diff::Args),
    /// Capture files: write and read events/s on one core, with and without zstd; bytes per event.
    Files {
        #[arg(long, default_value_t = 3_000_000)]
        events: usize,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        #[arg(long, default_value = "bench-results")]
        out: PathBuf,
        /// Requests of the redis capture for the bytes-per-syscall table (0: no table).
        #[arg(long, default_value_t = 20_000)]
        redis_requests: u32,
        /// Legacy captures whose integer widths the legacy sizes use.
        #[arg(long, default_value = "../shared/data/scap")]
        scap_dir: PathBuf,
    },
    /// Alert outputs (make bench-outputs): each sink's alerts/s, bursts, floods, memory; table + PNG.
    Outputs(outputs::Args),
    /// (internal) one in-process outputs case.
    #[command(hide = true)]
    OutputsCase(outputs::case::CaseArgs),
    /// (internal) the reads and the memfd exec of one flood through a sensor.
    #[command(hide = true)]
    OutputsFlood(outputs::e2e::FloodArgs),
    /// File-system watchers (make bench-fs): fswatch, inotify, fanotify, none; table + PNG.
    Fs(fs::Args),
    /// FSProbe's six scenarios (open+close of random files): every watcher, mode and ring size.
    FsScenarios(fs_scen::Args),
    /// (internal) a bench-fs watcher process.
    #[command(hide = true)]
    FsWatch {
        kind: String,
        path: PathBuf,
        #[arg(long)]
        pid: Option<u32>,
        #[arg(long)]
        bpf_stats: bool,
        /// Opens only (the scenarios' workload).
        #[arg(long)]
        opens: bool,
        #[arg(long, default_value_t = 8 << 20)]
        buffer_size: usize,
        /// fswatch: the reader's nice value (harrier fswatch --nice).
        #[arg(long, allow_negative_numbers = true)]
        nice: Option<i32>,
    },
    /// (internal) a workload: COUNT raw syscalls NR per thread after a line on stdin.
    #[command(hide = true)]
    Loop {
        nr: i64,
        count: u64,
        #[arg(default_value_t = 1)]
        threads: usize,
    },
}

fn kernel_costs(rounds: usize, count: u64) -> Result<()> {
    let rows = costs::measure(rounds, count)?;
    let base = rows[0].1;
    println!(
        "{:<48} {:>12} {:>12} {:>12}",
        "getpid loop, median of rounds", "wall ns/call", "Δ vs none", "BPF ns/run"
    );
    for &(label, wall, bpf) in &rows {
        let bpf = if bpf.is_nan() { "-".to_string() } else { format!("{bpf:.1}") };
        println!("{label:<48} {wall:>12.1} {:>12.1} {bpf:>12}", wall - base);
    }
    println!("wall columns: run-time stats off; BPF ns/run: a second run of each program with them on");
    let mut clock: Vec<f64> = (0..rounds.max(1)).map(|_| costs::user_clock_ns(2_000_000)).collect();
    println!(
        "one clock read in user space (vDSO CLOCK_MONOTONIC, same clocksource): {:.1} ns",
        workload::median(&mut clock)
    );
    if let Some(&(_, floor, _)) = rows.iter().find(|r| r.0 == costs::FLOOR) {
        println!(
            "floor of a timestamped exit event (the '{}' row): +{:.1} ns per call",
            costs::FLOOR,
            floor - base
        );
    }
    Ok(())
}

/// The result column's meaning per workload, and its change against no
/// sensor: the median of paired changes when the case has them, else the
/// change between the two medians.
fn result_cells(case: &capture::Case, run: &capture::Run, base: Option<&capture::Run>) -> [String; 2] {
    use capture::Workload::*;
    let value = match case.workload {
        Getpid { .. } => format!("{:.1} ns/call", run.result),
        Dd => format!("{:.2} s", run.result),
        Redis => format!("{:.0} req/s", run.result),
    };
    let paired = !run.paired.is_nan();
    let d = match base {
        _ if paired => run.paired,
        Some(b) => capture::change(case.workload, run.result, b.result),
        None => return [value, String::new()],
    };
    let mark = if paired { " (paired)" } else { "" };
    let mut delta = match case.workload {
        Getpid { .. } => format!("{d:+.1} ns{mark}"),
        Dd | Redis => format!("{:+.1}%{mark}", d * 100.0),
    };
    if !run.paired_cpu.is_nan() {
        delta += &format!("; CPU-bound {:+.1}%", run.paired_cpu * 100.0);
    }
    [value, delta]
}

fn bench_capture(rounds: usize, quick: bool, out: PathBuf, stop: bool, only: Option<&str>) -> Result<()> {
    use report::num;
    let mut cases = capture::cases(quick);
    if let Some(only) = only {
        cases.retain(|c| c.label.contains(only));
        if cases.is_empty() {
            anyhow::bail!("--only {only:?} matches no case");
        }
    }
    let (runs, picks) = capture::measure(&cases, rounds)?;
    let base_of = |i: usize| {
        let c = &cases[i];
        let b = cases[..=i].iter().rposition(|b| b.workload == c.workload && b.syscalls.is_none());
        b.filter(|&b| b != i).map(|b| &runs[b])
    };
    let header = [
        "case",
        "attach",
        "BPF stats",
        "events",
        "events/s",
        "BPF ns/run",
        "bytes/event",
        "consumer CPU ms/M events",
        "drops",
        "CPU µs/request",
        "workload",
        "vs no sensor",
    ];
    let mut rows = Vec::new();
    for (i, (c, r)) in cases.iter().zip(&runs).enumerate() {
        let [value, delta] = result_cells(c, r, base_of(i));
        let sensor = c.syscalls.is_some();
        rows.push(vec![
            c.label.clone(),
            if sensor { c.mode.to_string() } else { String::new() },
            if sensor { (if c.bpf_stats { "on" } else { "off" }).into() } else { String::new() },
            num(r.events, 0),
            num(r.events_per_s, 0),
            num(r.bpf_ns, 1),
            num(r.bytes_per_event, 1),
            num(r.consumer_ms_per_m, 1),
            num(r.drops, 0),
            num(r.cpu_us_per_request, 2),
            value,
            delta,
        ]);
    }
    let table = report::Table { header: header.map(String::from).to_vec(), rows };

    // auto: the pick per selection, and the stats-off figures of that mode.
    let mut auto_rows = Vec::new();
    for (label, choice) in &picks {
        let i = cases
            .iter()
            .position(|c| c.label == *label && c.mode == choice.mode && !c.bpf_stats)
            .expect("every mode is measured");
        let [value, delta] = result_cells(&cases[i], &runs[i], base_of(i));
        auto_rows.push(vec![label.clone(), choice.mode.to_string(), choice.reason.clone(), value, delta]);
    }
    let auto = report::Table {
        header: ["case", "auto picks", "why", "workload", "vs no sensor"].map(String::from).to_vec(),
        rows: auto_rows,
    };
    let mut md = format!(
        "Medians of {rounds} interleaved rounds. Each stats-off sensor run follows a no-sensor run of \
        the same workload, and its change is the median of those pairs' changes (marked paired). \
        For redis, CPU µs/request counts redis-server, redis-benchmark and the consumer (kernel time \
        included, where the sensor's BPF runs); \"CPU-bound\" is the requests/s that extra CPU costs \
        a CPU-bound redis (1 − base CPU / case CPU, paired), which a busy shared machine disturbs far \
        less than requests/s itself. \
        Workload figures come from the rows with BPF stats off; BPF ns/run from the rows with them on (BPF_ENABLE_STATS adds ~57 ns of its own clock reads \
        to every program run on the machine, so those rows' workload figures include that cost). \
        BPF ns/run is per selected event with per-syscall tracepoints, and per syscall on the machine \
        (selected or not) with the dispatcher.\n\n{}\n`auto` ({}), sampled while each workload ran:\n\n{}",
        table.markdown(),
        harrier_capture::attach::AUTO_RULE,
        auto.markdown()
    );
    if stop {
        let rows = stop::measure(rounds)?;
        let t = report::Table {
            header: ["selection", "attach", "SIGINT to exit (s)", "hr_* links left after exit"]
                .map(String::from)
                .to_vec(),
            rows: rows
                .iter()
                .map(|(sel, mode, secs, left)| {
                    vec![sel.clone(), mode.clone(), num(*secs, 2), left.to_string()]
                })
                .collect(),
        };
        md += &format!(
            "\nStop: `harrier capture`, SIGINT after 1 s attached, median of {rounds}:\n\n{}",
            t.markdown()
        );
    }
    println!("{md}");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("capture.md"), &md)?;
    let ns: Vec<(String, f64)> = cases
        .iter()
        .zip(&runs)
        .filter(|(c, _)| c.syscalls.is_some() && c.bpf_stats)
        .map(|(c, r)| (format!("{} [{}]", c.label, c.mode), r.bpf_ns))
        .collect();
    report::bar_chart(
        &out.join("capture-bpf-ns.png"),
        "Kernel cost per exit-path program run (BPF run-time stats)",
        "ns per run",
        &ns,
        None,
    )?;
    let redis: Vec<(String, f64)> = cases
        .iter()
        .zip(&runs)
        .filter(|(c, _)| c.workload == capture::Workload::Redis && !c.bpf_stats)
        .map(|(c, r)| match c.syscalls {
            Some(_) => (format!("{} [{}]", c.label, c.mode), r.result),
            None => (c.label.clone(), r.result),
        })
        .collect();
    if !redis.is_empty() {
        report::bar_chart(
            &out.join("capture-redis.png"),
            "redis-benchmark, mean of 11 tests (BPF stats off)",
            "requests per second",
            &redis,
            None,
        )?;
    }
    eprintln!("bench-capture: wrote {}/capture.md and PNG charts", out.display());
    Ok(())
}

fn rules_cost(rounds: usize, stable: &str, events: Option<&std::path::Path>) -> Result<()> {
    let rows = rules::measure(stable, rounds, events)?;
    let t = report::Table {
        header: ["rules", "events", "alerts", "user-space ns/event (median)"].map(String::from).to_vec(),
        rows: rows
            .iter()
            .map(|(l, n, a, ns)| vec![l.clone(), n.to_string(), a.to_string(), report::num(*ns, 1)])
            .collect(),
    };
    println!("{}", t.markdown());
    Ok(())
}

fn main() -> ExitCode {
    let r = match Cli::parse().command {
        Cmd::KernelCosts { rounds, count } => kernel_costs(rounds, count),
        Cmd::HookCosts(args) => hook_costs::run(args),
        Cmd::PathDepth(args) => path_depth::run(args),
        Cmd::HandlerSteps(args) => handler_steps::run(args),
        Cmd::Capture { rounds, quick, out, no_stop, only } => {
            bench_capture(rounds, quick, out, !no_stop, only.as_deref())
        }
        Cmd::RulesCost { rounds, stable_rules, events } => {
            rules_cost(rounds, &stable_rules, events.as_deref())
        }
        Cmd::Convert { dir, rounds } => convert::run(&dir, rounds),
        Cmd::RulesLoad(args) => rules_load::run_cli(args),
        Cmd::VsFalco(args) => vs_falco::run_cli(args),
        Cmd::Plugins(args) => plugins::run_cli(args),
        Cmd::FalcoDiff(args) => falco_diff::run_cli(args),
        Cmd::Files { events, rounds, out, redis_requests, scap_dir } => files::run(events, rounds, &out)
            .and_then(|()| {
                if redis_requests > 0 {
                    files::run_legacy(redis_requests, &scap_dir, &out)
                } else {
                    Ok(())
                }
            }),
        Cmd::Outputs(args) => outputs::run(args),
        Cmd::OutputsCase(args) => outputs::case::run(args),
        Cmd::OutputsFlood(args) => outputs::e2e::flood_child(args),
        Cmd::Fs(args) => fs::run(args),
        Cmd::FsScenarios(args) => fs_scen::run(args),
        Cmd::FsWatch { kind, path, pid, bpf_stats, opens, buffer_size, nice } => fs_watch::run(
            &kind,
            &path,
            pid,
            bpf_stats,
            fs_watch::Opts { opens, buffer_size, cache: true, nice },
        ),
        Cmd::Loop { nr, count, threads } => workload::syscall_loop(nr, count, threads),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("harrier-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
