//! What sysdig/Falco's legacy format would spend on the same syscall: the
//! enter event plus the exit event, computed per Harrier event from the
//! legacy event table (crates/harrier-scap/src/legacy_events.tbl) and the
//! event's own values.
//!
//! A legacy event is a 26-byte header (ts u64, tid u64, len u32, type u16,
//! nparams u32), one length per parameter (u16, u32 for "large" events),
//! then the parameters. Integers are as wide as the libs write them: learned
//! from the real captures in shared/data/scap (each (event, parameter)'s
//! stored length; else the same parameter of another version of the event;
//! else a parameter of that name elsewhere), 8 bytes where none was seen
//! (counted as guessed). Strings count
//! their NUL, byte buffers are cut at the libs' default snaplen (80), socket
//! addresses and tuples take the libs' packed sizes.

use harrier_scap::table::{event_info, PKind};
use harrier_schema::decode::{Event, SyscallEvent, Value};
use std::collections::HashMap;
use std::path::Path;

/// The legacy header: ts, tid, len, type, nparams.
const HEADER: u64 = 26;
/// The libs' default snaplen for data buffers.
const SNAPLEN: u64 = 80;

pub struct Legacy {
    /// (event number, parameter index) → stored integer width.
    widths: HashMap<(u16, usize), u64>,
    /// (syscall, parameter name) → width, from any version of the event;
    /// then parameter name alone (fd, res, size... keep their width across events).
    by_name: HashMap<(&'static str, &'static str), u64>,
    by_param: HashMap<&'static str, u64>,
    /// syscall name → (enter, exit) event numbers (the newest pair).
    pairs: HashMap<&'static str, (u16, u16)>,
    /// Integer parameters whose width no capture showed (assumed 8).
    pub guessed: u64,
}

impl Legacy {
    /// Widths learned from every .scap file in `dir` (unreadable ones are skipped).
    pub fn learn(dir: &Path) -> Legacy {
        let mut widths = HashMap::new();
        let mut by_name = HashMap::new();
        let mut by_param = HashMap::new();
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|x| x == "scap"));
        files.sort();
        for f in files {
            let Ok(mut r) = harrier_scap::source::open(&f) else { continue };
            while let Ok(Some(b)) = r.next_block() {
                if !harrier_scap::event::is_event_block(b.kind) {
                    continue;
                }
                let Ok(ev) = harrier_scap::event::LegacyEvent::parse(&b) else { continue };
                let Some(info) = ev.info else { continue };
                for i in 0..ev.nparams() {
                    let int = matches!(info.params.get(i), Some((_, PKind::Int | PKind::UInt)));
                    if let (true, Some(raw)) = (int, ev.raw(i)) {
                        if !raw.is_empty() {
                            let (w, name) = (raw.len() as u64, info.params[i].0);
                            widths.insert((ev.kind, i), w);
                            by_name.insert((info.syscall, name), w);
                            by_param.insert(name, w);
                        }
                    }
                }
            }
        }
        let mut pairs: HashMap<&'static str, (u16, u16)> = HashMap::new();
        for nr in (1..2000u16).step_by(2) {
            let (Some(enter), Some(exit)) = (event_info(nr - 1), event_info(nr)) else { continue };
            if enter.syscall == exit.syscall && exit.name != "syscall" {
                pairs.insert(exit.syscall, (nr - 1, nr)); // later numbers replace older versions
            }
        }
        Legacy { widths, by_name, by_param, pairs, guessed: 0 }
    }

    /// How many (event, parameter) integer widths the captures showed.
    pub fn learned(&self) -> usize {
        self.widths.len()
    }

    /// Bytes of the legacy enter+exit pair for this event; None when the
    /// legacy table has no typed pair for its syscall.
    pub fn pair_bytes(&mut self, e: &SyscallEvent) -> Option<u64> {
        let &(enter, exit) = self.pairs.get(e.syscall.name)?;
        Some(self.event_bytes(enter, e) + self.event_bytes(exit, e))
    }

    fn event_bytes(&mut self, nr: u16, e: &SyscallEvent) -> u64 {
        let Some(info) = event_info(nr) else { return HEADER };
        let len_size = if info.large { 4 } else { 2 };
        let mut total = HEADER;
        for (i, &(name, kind)) in info.params.iter().enumerate() {
            total += len_size + self.param_bytes(nr, i, name, kind, e);
        }
        total
    }

    fn param_bytes(&mut self, nr: u16, i: usize, name: &'static str, kind: PKind, e: &SyscallEvent) -> u64 {
        let bytes = |names: &[&str]| {
            names.iter().find_map(|n| match e.param(n) {
                Some(Value::Bytes(b)) => Some(*b),
                _ => None,
            })
        };
        match kind {
            PKind::Int | PKind::UInt => {
                let syscall = event_info(nr).map_or("", |e| e.syscall);
                let w = self.widths.get(&(nr, i)).or_else(|| self.by_name.get(&(syscall, name)));
                match w.or_else(|| self.by_param.get(name)) {
                    Some(&w) => w,
                    None => {
                        self.guessed += 1;
                        8
                    }
                }
            }
            PKind::Str => {
                let b = bytes(&[name, "path", "fullpath", "filename", "pathname"]).unwrap_or(b"");
                b.len() as u64 + 1
            }
            PKind::Bytes | PKind::Strings => {
                let b = bytes(&[name, "data"]).unwrap_or(b"");
                (b.len() as u64).min(if kind == PKind::Bytes { SNAPLEN } else { u64::MAX })
            }
            PKind::Sockaddr => sockaddr_len(bytes(&[name, "addr", "peer"]).unwrap_or(b"")),
            PKind::Socktuple => tuple_len(bytes(&["peer", "addr", "local"]).unwrap_or(b"")),
            PKind::FdList => 2,
            PKind::IpAddr => 4,
        }
    }
}

/// The libs' packed sockaddr: family byte + address + port (unix: the path and its NUL).
fn sockaddr_len(a: &[u8]) -> u64 {
    match a.first().copied().map(u16::from) {
        Some(2) => 1 + 4 + 2,
        Some(10) => 1 + 16 + 2,
        Some(1) => 1 + a.len().saturating_sub(2) as u64 + 1,
        Some(_) => 1,
        None => 0,
    }
}

/// The libs' packed socket tuple: family + both addresses and ports (unix:
/// family + two 8-byte pointers + the path and its NUL).
fn tuple_len(a: &[u8]) -> u64 {
    match a.first().copied().map(u16::from) {
        Some(2) => 1 + 4 + 2 + 4 + 2,
        Some(10) => 1 + 16 + 2 + 16 + 2,
        Some(1) => 1 + 8 + 8 + a.len().saturating_sub(2) as u64 + 1,
        Some(_) => 1,
        None => 0,
    }
}

/// Per syscall: Harrier events, Harrier bytes (wire records, and packed as
/// the capture file's event blocks hold them), legacy pair bytes.
#[derive(Default, Clone, Copy)]
pub struct PerSyscall {
    pub events: u64,
    pub wire: u64,
    pub packed: u64,
    pub legacy: u64,
}

/// Tallies wire records (Harrier's own bytes) against their legacy pairs.
/// Packed sizes are the writer's: records packed in blocks of its default
/// size (each block defines its layouts and restarts the ts deltas).
pub fn tally(legacy: &mut Legacy, records: &[u8]) -> (HashMap<&'static str, PerSyscall>, u64) {
    let mut out: HashMap<&'static str, PerSyscall> = HashMap::new();
    let mut untyped = 0;
    let mut i = 0;
    let mut packer = harrier_capfile::pack::Packer::new();
    let mut block = 0;
    while i + 16 <= records.len() {
        let len = u16::from_le_bytes([records[i + 14], records[i + 15]]) as usize;
        let rec = &records[i..i + len];
        i += len;
        if block + len > harrier_capfile::format::DEFAULT_BLOCK_LEN {
            packer.reset();
            block = 0;
        }
        block += len;
        let packed = packer.packed_size(rec).unwrap_or(len);
        if let Ok(Event::Syscall(e)) = harrier_schema::decode::decode(rec) {
            match legacy.pair_bytes(&e) {
                Some(l) => {
                    let s = out.entry(e.syscall.name).or_default();
                    s.events += 1;
                    s.wire += rec.len() as u64;
                    s.packed += packed as u64;
                    s.legacy += l;
                }
                None => untyped += 1,
            }
        }
    }
    (out, untyped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harrier_state::testing::{syscall, P};

    #[test]
    fn a_read_pair_counts_both_headers_lengths_and_the_cut_data() {
        let mut l = Legacy::learn(Path::new("/nonexistent"));
        let rec =
            syscall(1, 2, "read", 100, &[("fd", P::I(3)), ("size", P::I(4096)), ("data", P::B(&[7; 100]))]);
        let Ok(Event::Syscall(e)) = harrier_schema::decode::decode(&rec) else { panic!() };
        // enter: fd, size; exit: res, data, fd, size (libs' newest read_x): all
        // integers guessed 8 wide, data cut at 80.
        let enter = HEADER + 2 * 2 + 8 + 8;
        let exit = HEADER + 4 * 2 + 8 + 80 + 8 + 8;
        assert_eq!(l.pair_bytes(&e), Some(enter + exit));
        assert_eq!(l.guessed, 5);
    }
}
