//! `harrier-bypass ...`: the same as `harrier bypass ...`, without the rest of
//! the CLI (used by bypass/tests and scripts/bench-bypass.sh).
use clap::Parser;

#[derive(Parser)]
#[command(name = "harrier-bypass", about = "Syscall bypass for getpid() & co.")]
struct Cli {
    #[command(subcommand)]
    cmd: harrier_bypass::BypassCommand,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = harrier_bypass::run(cli.cmd) {
        eprintln!("harrier bypass: {e:#}");
        std::process::exit(1);
    }
}
