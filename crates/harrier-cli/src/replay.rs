//! `harrier run --replay FILE`: the loaded rules over a capture file, with
//! the state rebuilt from its snapshot; alerts as the live run printed them.

use crate::capread::Capture;
use anyhow::{Context, Result};
use harrier_capfile::Item;
use harrier_engine::drops::DropMonitor;
use harrier_engine::Engine;
use harrier_state::{Snapshot, State};

/// Feeds every event of `path` to `engine` (with the drop monitor, if any, checked at each
/// event's time: a file has no drops, but simulated ones); returns (events, foreign
/// skipped) or an error when the monitor's exit action fired.
pub fn replay(path: &str, engine: &mut Engine, mut drops: Option<&mut DropMonitor>) -> Result<(u64, u64)> {
    let mut cap = Capture::open(path)?;
    let info = &cap.r.info;
    engine.state.tables = State::from_snapshot(&Snapshot::default());
    let start = info.epoch_offset + info.settings.get("start_mono_ns").and_then(|v| v.as_u64()).unwrap_or(0);
    // FALCO_HOSTNAME names the host for Falco's users, as Falco reads it.
    let host =
        std::env::var("FALCO_HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| info.host.clone());
    engine.set_clock(&host, info.epoch_offset, start);
    let (mut events, mut foreign) = (0u64, 0u64);
    cap.items(|item| {
        match item {
            Item::Snapshot(s) => engine.state.tables.restore(&s),
            Item::Event(b) => {
                engine.on_event(b);
                events += 1;
                if let (Some(m), Some(h)) = (drops.as_deref_mut(), harrier_schema::wire::Header::parse(b)) {
                    if !engine.check_drops(m, h.ts, events, 0) {
                        anyhow::bail!("syscall event drops: the exit action stopped the replay");
                    }
                }
                // Exited threads are freed a batch later, as in a live run.
                if events & 4095 == 0 {
                    engine.end_batch();
                }
            }
            Item::Foreign(_) => foreign += 1,
        }
        Ok(true)
    })?;
    engine.end_batch();
    Ok((events, foreign))
}

/// Replays a Harrier capture file or a legacy .scap (every block version): the legacy one is
/// converted first, by `harrier convert`'s code, into a temporary file that goes at the end.
pub fn replay_any(path: &str, engine: &mut Engine, drops: Option<&mut DropMonitor>) -> Result<(u64, u64)> {
    let mut magic = [0u8; 8];
    let n = std::io::Read::read(
        &mut std::fs::File::open(path).with_context(|| format!("opening {path}"))?,
        &mut magic,
    )
    .with_context(|| format!("reading {path}"))?;
    if n == magic.len() && magic == harrier_capfile::format::MAGIC {
        return replay(path, engine, drops);
    }
    struct Temp(std::path::PathBuf);
    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let tmp = Temp(std::env::temp_dir().join(format!("harrier-replay-{}.hrcap", std::process::id())));
    crate::convert_file::write(std::path::Path::new(path), &tmp.0, None, true)?;
    replay(&tmp.0.display().to_string(), engine, drops)
        .map_err(|e| anyhow::anyhow!("{path} (converted): {e:#}"))
}
