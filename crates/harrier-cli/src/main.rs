//! `harrier`: the command-line front of the sensor.

/// eprintln! that ignores a closed stderr (e.g. `2>&1 | head`) instead of
/// panicking: losing a message must not cost the capture its clean exit.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod alert_capture;
mod capread;
mod capture;
mod convert;
mod convert_file;
mod enforce;
mod export;
mod falco;
mod file_out;
mod filter;
mod fswatch;
mod gendocs;
mod plugin_run;
mod read_cmd;
mod replay;
mod rules_cmd;
mod rules_load;
mod run;
mod run_outputs;
mod text;
mod watch;

use clap::error::ErrorKind;
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
    /// Detect threats with Falco's rules: alerts on stdout, a file or HTTP.
    Run(run::RunArgs),
    /// Rule files: check what loads and what Harrier evaluates.
    #[command(subcommand)]
    Rules(rules_cmd::RulesCommand),
    /// Capture syscalls, one event per syscall at exit; print a summary or JSON.
    Capture(capture::CaptureArgs),
    /// Convert a legacy Falco/sysdig .scap capture into Harrier's exit-only events.
    Convert(convert::ConvertArgs),
    /// Print a capture file's events (text or --json), optionally filtered.
    Read(read_cmd::ReadArgs),
    /// Summarise a capture file: versions, host, time span, events per syscall, drops.
    Inspect(read_cmd::InspectArgs),
    /// Write a capture file's events in another format (Parquet).
    Export(export::ExportArgs),
    /// Watch the file system: events with paths resolved in the kernel.
    Fswatch(fswatch::FswatchArgs),
    /// Answer getpid() & co. from a read-only BPF map (see libharrier-bypass.so).
    #[command(subcommand)]
    Bypass(harrier_bypass::BypassCommand),
    /// Falco 0.44.1's command line (the binary answers to it when called as `falco`).
    #[command(disable_help_flag = true)]
    Falco {
        /// Falco's options, e.g. -c falco.yaml -r rules.yaml -o json_output=true
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Write man pages and shell completions (used by packaging).
    #[command(hide = true)]
    GenDocs(gendocs::GenDocsArgs),
}

fn main() -> ExitCode {
    if falco::called_as_falco() {
        return falco::main(std::env::args_os().collect());
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version are not errors; clap prints and exits as usual.
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        // Usage errors get the same one-line form as every other error, so
        // scripts and logs see "harrier: error: ..." whatever went wrong;
        // clap's usage and tip lines are left out. Exit code 2, as clap's.
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            say!("harrier: error: {}", first.strip_prefix("error: ").unwrap_or(first));
            return ExitCode::from(2);
        }
    };
    if matches!(cli.command, Command::Read(_) | Command::Inspect(_) | Command::Convert(_)) {
        // Printers end quietly when their reader goes (`harrier read F | head`), as
        // Unix tools do. Not for the sensors: an HTTP output's closed socket must
        // stay an error, not a signal.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Rules(cmd) => rules_cmd::run(cmd),
        Command::Capture(args) => capture::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Read(args) => read_cmd::read(args),
        Command::Inspect(args) => read_cmd::inspect(args),
        Command::Export(args) => export::export(args),
        Command::Fswatch(args) => fswatch::run(args),
        Command::Bypass(cmd) => harrier_bypass::run(cmd),
        Command::GenDocs(args) => gendocs::run(args),
        Command::Falco { args } => {
            return falco::main(std::iter::once("falco".into()).chain(args).collect());
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("harrier: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
