//! `harrier gen-docs DIR` (hidden): man pages and shell completions made from
//! the same clap definition the binary parses, so they cannot drift from it.
//! The packaging (packaging/install.mk, cargo-deb) installs what this writes.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct GenDocsArgs {
    /// Output directory: man pages go to DIR/man, completions to DIR/completions.
    dir: PathBuf,
}

/// Shells and the file name each one's completion loader looks for.
const SHELLS: [(Shell, &str); 3] =
    [(Shell::Bash, "harrier"), (Shell::Zsh, "_harrier"), (Shell::Fish, "harrier.fish")];

pub fn run(args: GenDocsArgs) -> Result<()> {
    let cmd = crate::Cli::command();
    let man = args.dir.join("man");
    let comp = args.dir.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    // One page per (visible) command: harrier.1, harrier-capture.1, harrier-bypass-start.1, ...
    clap_mangen::generate_to(cmd.clone(), &man)
        .with_context(|| format!("writing man pages to {}", man.display()))?;
    // `harrier falco` takes Falco's options: its page lists those, not one catch-all argument.
    let falco = <harrier_falco::cli::FalcoArgs as clap::CommandFactory>::command().name("harrier-falco");
    let mut page = Vec::new();
    clap_mangen::Man::new(falco).render(&mut page).context("rendering harrier-falco.1")?;
    let path = man.join("harrier-falco.1");
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    let visible = without_hidden(&cmd);
    for (shell, name) in SHELLS {
        write_completion(visible.clone(), shell, &comp.join(name))?;
    }
    Ok(())
}

/// The command tree minus hidden subcommands (this one): clap_complete would
/// otherwise offer them, while clap_mangen already leaves them out.
fn without_hidden(full: &clap::Command) -> clap::Command {
    let mut cmd = clap::Command::new("harrier").version(env!("CARGO_PKG_VERSION"));
    for a in full.get_arguments() {
        cmd = cmd.arg(a.clone());
    }
    for s in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        cmd = cmd.subcommand(s.clone());
    }
    cmd
}

fn write_completion(mut cmd: clap::Command, shell: Shell, path: &Path) -> Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "harrier", &mut out);
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}
