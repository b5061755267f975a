//! `harrier-bench`: Harrier's benchmarks (`make bench-capture`).

mod costs;
mod workload;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "harrier-bench", about = "Harrier's benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Kernel cost of each capture step, and the dispatcher design, per getpid.
    KernelCosts {
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long, default_value_t = 2_000_000)]
        count: u64,
    },
    /// (internal) a workload: COUNT raw syscalls NR after a line on stdin.
    #[command(hide = true)]
    Loop { nr: i64, count: u64 },
}

fn kernel_costs(rounds: usize, count: u64) -> Result<()> {
    let rows = costs::measure(rounds, count)?;
    let base = rows[0].1;
    println!("{:<48} {:>12} {:>12} {:>12}", "getpid loop, median of rounds", "wall ns/call", "Δ vs none", "BPF ns/run");
    for (label, wall, bpf) in rows {
        let bpf = if bpf.is_nan() { "-".to_string() } else { format!("{bpf:.1}") };
        println!("{label:<48} {wall:>12.1} {:>12.1} {bpf:>12}", wall - base);
    }
    Ok(())
}

fn main() -> ExitCode {
    let r = match Cli::parse().command {
        Cmd::KernelCosts { rounds, count } => kernel_costs(rounds, count),
        Cmd::Loop { nr, count } => workload::syscall_loop(nr, count),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("harrier-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
