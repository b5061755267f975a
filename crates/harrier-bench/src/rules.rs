//! `harrier-bench rules-cost`: user-space ns per event of `harrier run`'s
//! engine (state tables + rules), on events recorded from a live workload
//! and replayed, so every variant sees the same events.

use anyhow::{Context, Result};
use harrier_capfile::Item;
use harrier_capture::{AttachMode, Config, Session};
use harrier_engine::state::EngineState;
use harrier_engine::Engine;
use harrier_outputs::Outputs;
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet};
use harrier_state::snapshot::Snapshot;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

fn load(files: &[(String, String)]) -> Result<RuleSet> {
    let opts = LoadOptions { supported: Arc::new(harrier_engine::source::supported), ..Default::default() };
    RuleSet::load(files, &opts)
        .map_err(|d| anyhow::anyhow!("{}", d.last().map(|d| d.to_string()).unwrap_or_default()))
}

/// Opens/closes, connects and execs: the event types Falco's rules capture.
fn workload() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("harrier-rules-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    for i in 0..20_000 {
        std::fs::write(dir.join(format!("f{}", i % 64)), b"x")?;
        let _ = std::fs::read(dir.join(format!("f{}", (i * 7) % 64)));
        if i % 10 == 0 {
            let _c = std::net::TcpStream::connect(addr)?;
            let _ = listener.accept()?;
        }
        if i % 40 == 0 {
            std::process::Command::new("/bin/true").status()?;
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Records the workload with the union of what the rule sets attach.
fn record(sets: &[(String, Vec<(String, String)>)]) -> Result<Vec<Vec<u8>>> {
    let mut syscalls = Vec::new();
    for (_, files) in sets {
        for s in harrier_engine::interest::interest(&load(files)?).syscalls {
            if !syscalls.iter().any(|x: &&harrier_schema::SyscallInfo| x.nr == s.nr) {
                syscalls.push(s);
            }
        }
    }
    let mut cfg = Config::new(syscalls);
    cfg.attach = AttachMode::Dispatcher;
    cfg.buffer_size = 64 << 20;
    cfg.skip_missing = true;
    let events = Rc::new(RefCell::new(Vec::<Vec<u8>>::new()));
    let sink = events.clone();
    let mut session = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec())))?;
    eprintln!("rules-cost: recording a workload of opens, connects and execs");
    workload()?;
    session.drain()?;
    let stats = session.stop()?;
    anyhow::ensure!(stats.total_drops() == 0, "events were dropped while recording");
    Ok(Rc::try_unwrap(events).unwrap().into_inner())
}

/// A capture file's start snapshot (if it has one) and its event records.
type Capture = (Option<Box<Snapshot>>, Vec<Vec<u8>>);

/// The start snapshot and event records of a capture file (`harrier capture -w`).
fn read_events(path: &Path) -> Result<Capture> {
    let mut r = harrier_capfile::Reader::open(path)
        .with_context(|| format!("opening {}", path.display()))?
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let (mut snapshot, mut events) = (None, Vec::new());
    while let Some(item) = r.next().map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))? {
        match item {
            Item::Event(b) => events.push(b.to_vec()),
            Item::Snapshot(s) => snapshot = snapshot.or(Some(s)),
            Item::Foreign(_) => {}
        }
    }
    Ok((snapshot, events))
}

/// Rows: (rule set, events, alerts, median ns per event).
pub fn measure(
    stable_rules: &str,
    rounds: usize,
    events_file: Option<&Path>,
) -> Result<Vec<(String, usize, u64, f64)>> {
    let stable = std::fs::read_to_string(stable_rules).with_context(|| format!("reading {stable_rules}"))?;
    let sets: Vec<(String, Vec<(String, String)>)> = vec![
        ("Falco stable rules".into(), vec![(stable_rules.to_string(), stable)]),
        (
            "Harrier default rules".into(),
            vec![("harrier_rules.yaml".into(), harrier_rules::DEFAULT_RULES.into())],
        ),
    ];
    let (snapshot, events) = match events_file {
        Some(f) => read_events(f)?,
        None => (None, record(&sets)?),
    };
    let mut rows = Vec::new();
    for (label, files) in &sets {
        let mut ns = Vec::new();
        let mut alerts = 0;
        for r in 0..rounds {
            eprintln!("rules-cost: round {}/{rounds}: {label}", r + 1);
            let mut state = EngineState::new();
            match &snapshot {
                // The recorded processes are gone: their state comes from the file.
                Some(s) => state.tables.restore(s),
                None => state.scan_proc(),
            }
            let mut engine =
                Engine::new(load(files)?, state, Outputs::new(Default::default()), RuleMatching::First);
            let t0 = thread_cpu_ns();
            for (i, e) in events.iter().enumerate() {
                engine.on_event(e);
                if i % 4096 == 4095 {
                    engine.end_batch();
                }
            }
            ns.push((thread_cpu_ns() - t0) as f64 / events.len() as f64);
            alerts = engine.counters.alerts;
        }
        rows.push((label.clone(), events.len(), alerts, crate::workload::median(&mut ns)));
    }
    Ok(rows)
}
