//! `harrier-bench convert`: legacy .scap conversion throughput, and bytes per
//! syscall in the legacy format (enter + exit blocks) against Harrier's
//! exit-only wire records.

use anyhow::{Context, Result};
use harrier_scap::event::{is_event_block, LegacyEvent};
use harrier_scap::source::BlockReader;
use harrier_scap::{Converted, Converter};
use harrier_schema::decode::{decode, Event};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The captures: the .scap files of `dir`, sorted.
fn captures(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| dir.display().to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "scap"))
        .collect();
    v.sort();
    Ok(v)
}

/// The capture decompressed in memory, so that timing leaves gzip and disk out.
fn raw(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path)?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_end(&mut out)?;
        Ok(out)
    } else {
        Ok(bytes)
    }
}

#[derive(Default)]
struct Bytes {
    legacy: u64,
    legacy_events: u64,
    harrier: u64,
    harrier_events: u64,
}

/// Legacy bytes (whole event blocks) per syscall name, for the events that
/// report a syscall.
fn legacy_bytes(raw: &[u8], per: &mut BTreeMap<String, Bytes>) -> Result<()> {
    let mut r = BlockReader::detect(std::io::Cursor::new(raw.to_vec()), Some(raw.len() as u64))?;
    while let Some(b) = r.next_block()? {
        if !is_event_block(b.kind) {
            continue;
        }
        let ev = LegacyEvent::parse(&b)?;
        let name = if ev.kind <= 1 {
            ev.int("nativeID").and_then(|n| harrier_schema::syscall_by_nr(n as u32)).map(|s| s.name)
        } else {
            ev.info.and_then(|i| harrier_schema::syscall_by_name(i.syscall)).map(|s| s.name)
        };
        if let Some(n) = name {
            let e = per.entry(n.to_string()).or_default();
            e.legacy += b.body.len() as u64 + 12;
            e.legacy_events += 1;
        }
    }
    Ok(())
}

pub fn run(dir: &Path, rounds: usize) -> Result<()> {
    let files = captures(dir)?;
    anyhow::ensure!(!files.is_empty(), "no .scap files in {}", dir.display());
    println!(
        "{:<28} {:>9} {:>9} {:>13} {:>13} {:>12} {:>12} {:>6}",
        "capture", "legacy ev", "harrier", "legacy ev/s", "records/s", "legacy B/sc", "harrier B/ev", "ratio"
    );
    let mut per: BTreeMap<String, Bytes> = BTreeMap::new();
    for path in &files {
        let raw = raw(path)?;
        // Median of the rounds' times.
        let mut times = Vec::new();
        let mut records = 0u64;
        let mut rec_bytes = 0u64;
        let mut legacy_events = 0;
        for _ in 0..rounds.max(1) {
            let (mut n, mut b) = (0u64, 0u64);
            let c = Converter::from_reader(std::io::Cursor::new(raw.clone()), Some(raw.len() as u64))?;
            let t = Instant::now();
            let stats = c.run(|item| {
                if let Converted::Event(e) = item {
                    n += 1;
                    b += e.len() as u64;
                }
                Ok(())
            });
            times.push(t.elapsed().as_secs_f64());
            let stats = stats.with_context(|| path.display().to_string())?;
            (records, rec_bytes, legacy_events) = (n, b, stats.legacy_events);
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let mut file_per = BTreeMap::new();
        legacy_bytes(&raw, &mut file_per)?;
        let legacy_sc: u64 = file_per.values().map(|b| b.legacy).sum();
        // Harrier bytes per syscall type, from the records.
        let c = Converter::from_reader(std::io::Cursor::new(raw.clone()), Some(raw.len() as u64))?;
        c.run(|item| {
            if let Converted::Event(e) = item {
                if let Ok(Event::Syscall(s)) = decode(e) {
                    let x = file_per.entry(s.syscall.name.to_string()).or_default();
                    x.harrier += e.len() as u64;
                    x.harrier_events += 1;
                }
            }
            Ok(())
        })?;
        for (k, v) in file_per {
            let e = per.entry(k).or_default();
            e.legacy += v.legacy;
            e.legacy_events += v.legacy_events;
            e.harrier += v.harrier;
            e.harrier_events += v.harrier_events;
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        println!(
            "{:<28} {:>9} {:>9} {:>13.0} {:>13.0} {:>12.1} {:>12.1} {:>5.0}%",
            name,
            legacy_events,
            records,
            legacy_events as f64 / t,
            records as f64 / t,
            legacy_sc as f64 / records.max(1) as f64,
            rec_bytes as f64 / records.max(1) as f64,
            rec_bytes as f64 * 100.0 / legacy_sc.max(1) as f64
        );
    }
    steady(&files, rounds)?;
    println!();
    println!(
        "{:<18} {:>8} {:>14} {:>9} {:>12} {:>6}",
        "syscall", "legacy", "legacy B/call", "harrier", "harrier B/ev", "ratio"
    );
    for (k, b) in &per {
        if b.harrier_events == 0 {
            continue;
        }
        println!(
            "{:<18} {:>8} {:>14.1} {:>9} {:>12.1} {:>5.0}%",
            k,
            b.legacy_events,
            b.legacy as f64 / b.harrier_events as f64,
            b.harrier_events,
            b.harrier as f64 / b.harrier_events as f64,
            b.harrier as f64 * 100.0 / b.legacy.max(1) as f64
        );
    }
    Ok(())
}

/// Steady state: each capture's event blocks repeated to about a million
/// legacy events after its metadata, so one-time work (process lists,
/// fd lists) does not dominate.
fn steady(files: &[PathBuf], rounds: usize) -> Result<()> {
    println!();
    println!(
        "{:<28} {:>10} {:>10} {:>13} {:>13}",
        "steady state (repeated)", "legacy ev", "records", "legacy ev/s", "records/s"
    );
    for path in files {
        let raw = raw(path)?;
        let (mut head, mut events) = (Vec::new(), Vec::new());
        let mut n_events = 0u64;
        let mut r = BlockReader::detect(std::io::Cursor::new(raw.clone()), Some(raw.len() as u64))?;
        let mut at = 0usize;
        while let Some(b) = r.next_block()? {
            let len = b.body.len() + 12;
            if is_event_block(b.kind) {
                events.extend_from_slice(&raw[at..at + len]);
                n_events += 1;
            } else if events.is_empty() {
                head.extend_from_slice(&raw[at..at + len]);
            }
            at += len;
        }
        if n_events == 0 {
            continue;
        }
        let times_rep = (1_000_000 / n_events).max(1);
        let mut big = head;
        for _ in 0..times_rep {
            big.extend_from_slice(&events);
        }
        let mut times = Vec::new();
        let (mut legacy, mut records) = (0, 0);
        for _ in 0..rounds.max(1) {
            let c = Converter::from_reader(std::io::Cursor::new(big.clone()), Some(big.len() as u64))?;
            let mut n = 0u64;
            let t = Instant::now();
            let stats = c.run(|item| {
                if let Converted::Event(_) = item {
                    n += 1;
                }
                Ok(())
            })?;
            times.push(t.elapsed().as_secs_f64());
            (legacy, records) = (stats.legacy_events, n);
        }
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        println!(
            "{:<28} {:>10} {:>10} {:>13.0} {:>13.0}",
            name,
            legacy,
            records,
            legacy as f64 / t,
            records as f64 / t
        );
    }
    Ok(())
}
