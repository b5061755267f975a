//! `harrier-bench`: Harrier's benchmarks (`make bench-capture`).

mod capture;
mod costs;
mod report;
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
    },
    /// Kernel cost of each capture step, and the dispatcher design, per getpid.
    KernelCosts {
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long, default_value_t = 2_000_000)]
        count: u64,
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
    for (label, wall, bpf) in rows {
        let bpf = if bpf.is_nan() { "-".to_string() } else { format!("{bpf:.1}") };
        println!("{label:<48} {wall:>12.1} {:>12.1} {bpf:>12}", wall - base);
    }
    Ok(())
}

/// The result column's meaning per workload, and its change against no sensor.
fn result_cells(case: &capture::Case, run: &capture::Run, base: Option<&capture::Run>) -> [String; 2] {
    use capture::Workload::*;
    let (value, delta) = match (case.workload, base) {
        (Getpid { .. }, Some(b)) => {
            (format!("{:.1} ns/call", run.result), format!("+{:.1} ns", run.result - b.result))
        }
        (Dd, Some(b)) => {
            (format!("{:.2} s", run.result), format!("{:+.0}%", (run.result / b.result - 1.0) * 100.0))
        }
        (Redis, Some(b)) => {
            (format!("{:.0} req/s", run.result), format!("{:+.1}%", (run.result / b.result - 1.0) * 100.0))
        }
        (Getpid { .. }, None) => (format!("{:.1} ns/call", run.result), String::new()),
        (Dd, None) => (format!("{:.2} s", run.result), String::new()),
        (Redis, None) => (format!("{:.0} req/s", run.result), String::new()),
    };
    [value, delta]
}

fn bench_capture(rounds: usize, quick: bool, out: PathBuf) -> Result<()> {
    use report::num;
    let cases = capture::cases(quick);
    let runs = capture::measure(&cases, rounds)?;
    let header = [
        "case",
        "events",
        "events/s",
        "BPF ns/event",
        "bytes/event",
        "consumer CPU ms/M events",
        "drops",
        "workload",
        "vs no sensor",
    ];
    let mut rows = Vec::new();
    for (i, (c, r)) in cases.iter().zip(&runs).enumerate() {
        let base = cases[..=i].iter().rposition(|b| b.workload == c.workload && b.syscalls.is_none());
        let base = base.filter(|&b| b != i).map(|b| &runs[b]);
        let [value, delta] = result_cells(c, r, base);
        rows.push(vec![
            c.label.clone(),
            num(r.events, 0),
            num(r.events_per_s, 0),
            num(r.bpf_ns, 1),
            num(r.bytes_per_event, 1),
            num(r.consumer_ms_per_m, 1),
            num(r.drops, 0),
            value,
            delta,
        ]);
    }
    let table = report::Table { header: header.map(String::from).to_vec(), rows };
    let md = format!(
        "Medians of {rounds} interleaved rounds. BPF ns/event: run-time stats \
        (BPF_ENABLE_STATS), which include ~57 ns of their own clock reads on this machine.\n\n{}",
        table.markdown()
    );
    println!("{md}");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("capture.md"), &md)?;
    let ns: Vec<(String, f64)> = cases
        .iter()
        .zip(&runs)
        .filter(|(c, _)| c.syscalls.is_some())
        .map(|(c, r)| (c.label.clone(), r.bpf_ns))
        .collect();
    report::bar_chart(
        &out.join("capture-bpf-ns.png"),
        "Kernel cost per syscall event (BPF run-time stats)",
        "ns per event",
        &ns,
        Some(125.0),
    )?;
    let redis: Vec<(String, f64)> = cases
        .iter()
        .zip(&runs)
        .filter(|(c, _)| c.workload == capture::Workload::Redis)
        .map(|(c, r)| (c.label.clone(), r.result))
        .collect();
    if !redis.is_empty() {
        report::bar_chart(
            &out.join("capture-redis.png"),
            "redis-benchmark, mean of 11 tests",
            "requests per second",
            &redis,
            None,
        )?;
    }
    eprintln!("bench-capture: wrote {}/capture.md and PNG charts", out.display());
    Ok(())
}

fn main() -> ExitCode {
    let r = match Cli::parse().command {
        Cmd::KernelCosts { rounds, count } => kernel_costs(rounds, count),
        Cmd::Capture { rounds, quick, out } => bench_capture(rounds, quick, out),
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
