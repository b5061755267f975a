//! `harrier run --replay FILE`: the loaded rules over a capture file, with
//! the state rebuilt from its snapshot; alerts as the live run printed them.

use crate::read_cmd::{open, say_stop};
use anyhow::{bail, Result};
use harrier_capfile::Item;
use harrier_engine::Engine;
use harrier_state::{Snapshot, State};

/// Feeds every event of `path` to `engine`; returns (events, foreign skipped).
pub fn replay(path: &str, engine: &mut Engine) -> Result<(u64, u64)> {
    let mut r = open(path)?;
    engine.state.tables = State::from_snapshot(&Snapshot::default());
    let start =
        r.info.epoch_offset + r.info.settings.get("start_mono_ns").and_then(|v| v.as_u64()).unwrap_or(0);
    engine.set_clock(&r.info.host, r.info.epoch_offset, start);
    let (mut events, mut foreign) = (0u64, 0u64);
    loop {
        match r.next() {
            Ok(Some(Item::Snapshot(s))) => engine.state.tables.restore(&s),
            Ok(Some(Item::Event(b))) => {
                engine.on_event(b);
                events += 1;
                // Exited threads are freed a batch later, as in a live run.
                if events & 4095 == 0 {
                    engine.end_batch();
                }
            }
            Ok(Some(Item::Foreign(_))) => foreign += 1,
            Ok(None) => break,
            Err(e) => bail!("{path}: {e} (after {events} events)"),
        }
    }
    engine.end_batch();
    say_stop(path, &r);
    Ok((events, foreign))
}
