//! `harrier bypass`: placeholder until the bypass lands.

/// Subcommands of `harrier bypass`.
#[derive(Debug, clap::Subcommand)]
pub enum BypassCommand {
    /// Load and pin the bypass programs and maps, then exit.
    Start,
    /// Invalidate every slot, then remove the pins.
    Stop,
    /// Show slots in use, registrations and fallbacks.
    Status,
}

pub fn run(cmd: BypassCommand) -> anyhow::Result<()> {
    anyhow::bail!("harrier bypass {cmd:?}: not implemented yet")
}
