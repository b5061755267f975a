//! `harrier read` and `harrier inspect`: a capture file's events as text or
//! JSON (optionally filtered), or a summary of it.

use crate::capread::{Capture, Ev};
use crate::filter::{Clock, Filter};
use anyhow::{bail, Result};
use harrier_capfile::{Item, Stop};
use harrier_engine::state::EngineState;
use harrier_schema::view::SyscallView;
use harrier_state::{Snapshot, State};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};

#[derive(clap::Args)]
pub struct ReadArgs {
    /// A capture file (harrier capture -w, harrier convert).
    file: String,
    /// Only events matching this condition (the rule language: evt.type, proc.name, fd.name...).
    #[arg(long)]
    filter: Option<String>,
    /// One JSON object per event, as `harrier capture --json` prints them.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct InspectArgs {
    /// A capture file.
    file: String,
    /// The summary as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Events applied to the state tables as the live engine applies them; the
/// tables start empty (no /proc reads) and take the file's snapshots.
pub struct Replayed {
    pub state: EngineState,
    applied: u64,
    close_nr: u32,
}

impl Default for Replayed {
    fn default() -> Self {
        let mut state = EngineState::new();
        state.tables = State::from_snapshot(&Snapshot::default());
        let close_nr = harrier_schema::syscall_by_name("close").map_or(u32::MAX, |s| s.nr);
        Replayed { state, applied: 0, close_nr }
    }
}

impl Replayed {
    pub fn snapshot(&mut self, s: &Snapshot) {
        self.state.tables.restore(s);
    }

    /// A life-cycle event: applied. Exited threads are freed in batches as
    /// in a live run (every 4096 events here).
    pub fn meta(&mut self, bytes: &[u8]) {
        self.state.apply_meta(bytes);
        self.tick();
    }

    /// Before looking at a syscall event (close is applied after, so that
    /// its fd is still named while it is looked at, as the engine does).
    pub fn before(&mut self, v: &SyscallView) {
        if v.syscall.nr != self.close_nr {
            self.state.apply(v);
        }
        self.tick();
    }

    pub fn after(&mut self, v: &SyscallView) {
        if v.syscall.nr == self.close_nr {
            self.state.apply(v);
        }
    }

    fn tick(&mut self) {
        self.applied += 1;
        if self.applied & 4095 == 0 {
            self.state.end_batch();
        }
    }

    /// (pid, comm) of a thread, (0, "") when unknown.
    pub fn who(&self, tid: u32) -> (u32, &str) {
        self.state.tables.process(tid).map_or((0, ""), |p| (p.pid, p.name()))
    }
}

pub fn read(a: ReadArgs) -> Result<()> {
    let filter = a.filter.as_deref().map(Filter::compile).transpose()?;
    let mut cap = Capture::open(&a.file)?;
    let r = &cap.r;
    // Older schemas are rewritten into the current layout by the reader; a
    // newer one cannot be.
    if r.schema_version > harrier_capfile::SCHEMA_VERSION {
        say!(
            "harrier: note: {} was written with event schema v{}, this build decodes v{}: layouts that changed may show wrong values",
            a.file, r.schema_version, harrier_capfile::SCHEMA_VERSION
        );
    }
    let (epoch_offset, host) = (r.info.epoch_offset, r.info.host.clone());
    let clock = Clock { epoch_offset, capture_start_ns: epoch_offset, host: &host };
    let mut st = Replayed::default();
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout());
    let mut line = String::with_capacity(512);
    let res = cap.events(&mut st, |st, ev| {
        line.clear();
        match ev {
            Ev::Syscall { num, v, bytes } => {
                if filter.as_ref().is_none_or(|f| f.matches(v, &st.state, num, &clock)) {
                    let (pid, comm) = st.who(v.header.tid);
                    if a.json {
                        if let Ok(harrier_schema::decode::Event::Syscall(e)) =
                            harrier_schema::decode::decode(bytes)
                        {
                            line.push_str(&e.to_json(pid, comm, epoch_offset).to_string());
                        }
                    } else {
                        crate::text::syscall_line(&mut line, num, v.header.ts + epoch_offset, comm, v);
                    }
                }
            }
            Ev::Foreign { num, f } => {
                if filter.as_ref().is_none_or(|flt| flt.matches_foreign(f, &st.state, num, &clock)) {
                    let (pid, comm) = st.who(f.tid);
                    if a.json {
                        line.push_str(&crate::text::foreign_json(f, pid, comm, epoch_offset).to_string());
                    } else {
                        crate::text::foreign_line(&mut line, num, f.ts + epoch_offset, comm, f);
                    }
                }
            }
        }
        if !line.is_empty() {
            line.push('\n');
            // A closed stdout (| head) ends the read quietly.
            return Ok(out.write_all(line.as_bytes()).is_ok());
        }
        Ok(true)
    });
    let _ = out.flush();
    res
}

pub fn inspect(a: InspectArgs) -> Result<()> {
    let mut r = Capture::open(&a.file)?.r;
    let mut per: BTreeMap<String, u64> = BTreeMap::new();
    let (mut meta, mut snapshots, mut procs) = (0u64, 0u64, 0usize);
    let mut error = None;
    loop {
        match r.next() {
            Ok(Some(Item::Event(b))) => match harrier_schema::wire::Header::parse(b) {
                Some(h) if h.is_meta() => meta += 1,
                Some(h) => {
                    let name = harrier_schema::syscall_by_nr(h.kind as u32).map_or("?", |s| s.name);
                    *per.entry(name.to_string()).or_default() += 1;
                }
                None => {}
            },
            Ok(Some(Item::Foreign(f))) => *per.entry(format!("{} (foreign)", f.name)).or_default() += 1,
            Ok(Some(Item::Snapshot(s))) => {
                snapshots += 1;
                procs += s.processes.len();
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let s = *r.stats();
    let span = s.first_ts.map(|f| (f + r.info.epoch_offset, s.last_ts + r.info.epoch_offset));
    let ended = match (r.stop(), &error) {
        (_, Some(e)) => format!("corrupt: {e}"),
        (Some(Stop::Complete), _) => "complete".to_string(),
        (Some(Stop::Truncated { offset, reason }), _) => format!("cut off at byte {offset}: {reason}"),
        (None, _) => "?".into(),
    };
    let syscall_events: u64 = per.values().sum();
    if a.json {
        let j = serde_json::json!({
            "file": a.file,
            "format_version": r.format_version,
            "schema_version": r.schema_version,
            "host": r.info.host,
            "kernel": r.info.kernel,
            "writer": r.info.writer,
            "settings": r.info.settings,
            "first_ns": span.map(|s| s.0),
            "last_ns": span.map(|s| s.1),
            "events": syscall_events,
            "lifecycle_events": meta,
            "per_syscall": per,
            "drops": s.drops,
            "lost": s.lost,
            "bytes": r.file_len(),
            "raw_bytes": s.raw_bytes,
            "wire_bytes": s.wire_bytes,
            "blocks": s.event_blocks,
            "packed_blocks": s.packed_blocks,
            "snapshot_processes": procs,
            "end": ended,
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        println!("file:       {}", a.file);
        println!("format:     v{}, event schema v{}", r.format_version, r.schema_version);
        println!("host:       {} (kernel {})", r.info.host, r.info.kernel);
        println!("writer:     {}", r.info.writer);
        println!("settings:   {}", r.info.settings);
        match span {
            Some((f, l)) => {
                let mut t = String::new();
                crate::text::time_of_day(&mut t, f);
                t.push_str(" - ");
                crate::text::time_of_day(&mut t, l);
                println!("time span:  {t} UTC ({:.3} s)", (l - f) as f64 / 1e9);
            }
            None => println!("time span:  no events"),
        }
        println!("snapshot:   {snapshots} ({procs} processes)");
        println!(
            "events:     {syscall_events} syscall events, {meta} life-cycle events, in {} blocks ({} packed)",
            s.event_blocks, s.packed_blocks
        );
        println!("drops:      {} in the kernel, {} before the writer", s.drops, s.lost);
        let ratio = if s.stored_bytes > 0 { s.raw_bytes as f64 / s.stored_bytes as f64 } else { 1.0 };
        println!(
            "bytes:      {} on disk, {} uncompressed payload ({ratio:.2}x), {} as wire records",
            r.file_len(),
            s.raw_bytes,
            s.wire_bytes
        );
        if syscall_events > 0 {
            println!("bytes/event: {:.1}", r.file_len() as f64 / (syscall_events + meta) as f64);
        }
        println!("end:        {ended}");
        println!("per syscall:");
        let mut rows: Vec<_> = per.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (name, n) in rows {
            println!("  {n:>12}  {name}");
        }
    }
    if let Some(e) = error {
        bail!("{}: {e}", a.file);
    }
    Ok(())
}
