//! `harrier`: the command-line front of the sensor.

mod capture;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "harrier", version, about = "Low-overhead eBPF syscall sensor")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Capture syscalls, one event per syscall at exit; print a summary or JSON.
    Capture(capture::CaptureArgs),
    /// Answer getpid() & co. from a read-only BPF map (see libharrier-bypass.so).
    #[command(subcommand)]
    Bypass(harrier_bypass::BypassCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Capture(args) => capture::run(args),
        Command::Bypass(cmd) => harrier_bypass::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("harrier: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
