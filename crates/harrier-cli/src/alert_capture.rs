//! Falco's capture on alert (`capture:` in falco.yaml, `capture: true` on rules): from an
//! alert that asks for one, the events of the next `capture_duration` go to a capture file of
//! their own, `<path_prefix>_<wall ns>_<event>.hrcap`, through the same writer as `-w`
//! (file_out.rs). One file at a time: an alert during a capture extends it.

use crate::file_out::{self, FileOut, WriteArgs};
use harrier_schema::wire::Header;
use harrier_state::Snapshot;

pub struct AlertCapture {
    prefix: String,
    epoch_offset: u64,
    /// The file being written and the event time (monotonic ns) it ends at.
    open: Option<(FileOut, u64)>,
    events: u64,
    pub files: u64,
}

impl AlertCapture {
    pub fn new(prefix: &str, epoch_offset: u64) -> AlertCapture {
        AlertCapture { prefix: prefix.to_string(), epoch_offset, open: None, events: 0, files: 0 }
    }

    /// After the engine has seen `ev`: `asked` is the capture its alerts asked for (event
    /// time, duration); `snapshot` gives the state a new file starts from.
    pub fn on_event(&mut self, ev: &[u8], asked: Option<(u64, u64)>, snapshot: impl FnOnce() -> Snapshot) {
        self.events += 1;
        let Some(h) = Header::parse(ev) else { return };
        if self.open.as_ref().is_some_and(|(_, end)| h.ts > *end) {
            self.close();
        }
        if let Some((ts, dur)) = asked {
            match &mut self.open {
                Some((_, end)) => *end = (*end).max(ts + dur),
                None => self.start(ts, dur, snapshot()),
            }
        }
        if let Some((f, _)) = &mut self.open {
            f.event(ev);
        }
    }

    fn start(&mut self, ts: u64, dur: u64, snap: Snapshot) {
        let path = format!("{}_{}_{}.hrcap", self.prefix, ts + self.epoch_offset, self.events);
        let args =
            WriteArgs { write: Some(path.clone()), no_compress: false, compress_level: 3, no_pack: false };
        let settings = serde_json::json!({"command": "run", "capture_on_alert": true, "duration_ns": dur});
        match FileOut::create(&args, &file_out::live_info(self.epoch_offset, settings)) {
            Ok(Some(mut f)) => {
                f.snapshot(snap);
                say!("harrier: capture on alert: writing {path}");
                self.open = Some((f, ts + dur));
                self.files += 1;
            }
            Ok(None) => {}
            Err(e) => say!("harrier: capture on alert: {e:#}"),
        }
    }

    /// Hands the open file's batch to its writer (once per drain, as `-w` does).
    pub fn drained(&mut self) {
        if let Some((f, _)) = &mut self.open {
            f.send();
        }
    }

    /// Ends the open capture, if any, and says what it wrote.
    pub fn close(&mut self) {
        if let Some((f, _)) = self.open.take() {
            let path = f.path().to_string();
            say!("{}", file_out::report(&path, &f.finish()));
        }
    }
}
