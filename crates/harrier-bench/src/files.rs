//! `harrier-bench files` (`make bench-files`): capture-file write and read
//! throughput on one core, compressed and not, packed (the default event
//! block encoding) and not, and bytes per event, over a synthetic stream
//! shaped like the redis workload of bench-capture (epoll_wait, a read of
//! the request, a write of the reply, per request; now and then an
//! openat/close).

use anyhow::{Context, Result};
use harrier_capfile::{FileInfo, Item, Options, Reader, Writer};
use harrier_state::testing::{syscall, P};
use std::fmt::Write as _;
use std::io::BufWriter;
use std::path::Path;
use std::time::Instant;

/// The stream: one flat buffer of records (built before timing).
fn stream(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 80);
    let mut ts = 1_000_000_000u64;
    let mut i = 0;
    // Jittered times and keys (an LCG): a repeating stream would flatter zstd.
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        rng >> 33
    };
    while i < n {
        let tid = 2000 + (i as u32 / 3) % 4;
        let key = format!("*3\r\n$3\r\nSET\r\n$16\r\nkey:{:012}\r\n$3\r\nxxx\r\n", next() % 1_000_000);
        let recs = [
            syscall(
                ts,
                tid,
                "epoll_wait",
                1,
                &[("epfd", P::I(5)), ("maxevents", P::I(1024)), ("timeout", P::I(100))],
            ),
            syscall(
                ts + 900,
                tid,
                "read",
                key.len() as i64,
                &[("fd", P::I(8)), ("size", P::I(16384)), ("data", P::B(key.as_bytes()))],
            ),
            syscall(
                ts + 2100,
                tid,
                "write",
                5,
                &[("fd", P::I(8)), ("size", P::I(5)), ("data", P::B(b"+OK\r\n"))],
            ),
        ];
        for r in recs {
            out.extend_from_slice(&r);
        }
        i += 3;
        if i % 300 == 0 {
            let p = P::B(b"/var/lib/redis/dump.rdb");
            out.extend_from_slice(&syscall(
                ts + 2500,
                tid,
                "openat",
                9,
                &[("dirfd", P::I(-100)), ("path", p)],
            ));
            out.extend_from_slice(&syscall(ts + 2600, tid, "close", 0, &[("fd", P::I(9))]));
            i += 2;
        }
        ts += 2000 + next() % 2000;
    }
    out
}

/// This thread's CPU time, seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

struct Row {
    label: String,
    events: u64,
    write_cpu: f64,
    write_wall: f64,
    read_cpu: f64,
    read_wall: f64,
    bytes: u64,
}

fn one(label: &str, records: &[u8], n: u64, opts: Options, path: &Path) -> Result<Row> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let (c0, t0) = (thread_cpu(), Instant::now());
    let mut w = Writer::new(BufWriter::with_capacity(1 << 20, f), &FileInfo::default(), opts)?;
    let mut i = 0;
    while i < records.len() {
        let len = u16::from_le_bytes([records[i + 14], records[i + 15]]) as usize;
        w.event(&records[i..i + len])?;
        i += len;
    }
    let (_, summary) = w.finish()?;
    let (write_cpu, write_wall) = (thread_cpu() - c0, t0.elapsed().as_secs_f64());
    assert_eq!(summary.records, n);
    let (c0, t0) = (thread_cpu(), Instant::now());
    let mut r = Reader::open(path)?.map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut got = 0u64;
    let mut sum = 0u64;
    while let Some(item) = r.next().map_err(|e| anyhow::anyhow!("{e}"))? {
        if let Item::Event(b) = item {
            got += 1;
            sum = sum.wrapping_add(b[0] as u64);
        }
    }
    let (read_cpu, read_wall) = (thread_cpu() - c0, t0.elapsed().as_secs_f64());
    assert_eq!(got, n, "checksum {sum}");
    let bytes = std::fs::metadata(path)?.len();
    std::fs::remove_file(path)?;
    Ok(Row { label: label.into(), events: n, write_cpu, write_wall, read_cpu, read_wall, bytes })
}

/// Captures redis-server under `redis-benchmark -n requests` (every typed
/// syscall, dispatcher attach, pid filter, snaplen 80 as the libs'): the
/// sensor's wire records, as a capture file would hold them.
fn capture_redis(requests: u32) -> Result<Vec<u8>> {
    use harrier_capture::{AttachMode, Config, Session};
    use std::sync::{Arc, Mutex};
    let redis = crate::capture::Redis::start()?;
    let typed: Vec<_> = harrier_schema::SYSCALLS.iter().filter(|s| s.params.is_some()).collect();
    let mut cfg = Config::new(typed);
    cfg.skip_missing = true;
    cfg.attach = AttachMode::Dispatcher;
    cfg.pid = Some(redis.pid());
    cfg.buffer_size = 64 << 20;
    // The legacy side's default snaplen, so data buffers are cut alike.
    cfg.snaplen = 80;
    let records = Arc::new(Mutex::new(Vec::<u8>::with_capacity(256 << 20)));
    let sink = records.clone();
    let mut session = Session::start(&cfg, Box::new(move |b| sink.lock().unwrap().extend_from_slice(b)))?;
    let port = crate::capture::REDIS_PORT.to_string();
    let n = requests.to_string();
    let mut child = std::process::Command::new("redis-benchmark")
        .args(["-p", &port, "-t", crate::capture::REDIS_TESTS, "-q", "-n", &n])
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("running redis-benchmark (make deps installs it)")?;
    // Drained as `harrier capture` paces it, so the rings never fill.
    let status = loop {
        session.drain()?;
        if let Some(st) = child.try_wait()? {
            break st;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    anyhow::ensure!(status.success(), "redis-benchmark failed");
    session.drain()?;
    let stats = session.stop()?;
    anyhow::ensure!(stats.total_drops() == 0, "the capture dropped {} events", stats.total_drops());
    drop(redis);
    let v = std::mem::take(&mut *records.lock().unwrap());
    Ok(v)
}

/// Per syscall type of a redis capture: legacy bytes per enter+exit pair
/// against Harrier's bytes per event; then whole files, compressed or not.
fn legacy_table(requests: u32, scap_dir: &Path) -> Result<String> {
    let records = capture_redis(requests)?;
    // Another bench's redis-server on the port answers for ours, unseen by the pid filter.
    anyhow::ensure!(
        !records.is_empty(),
        "the redis capture holds no events: is another redis-server using port {} (another bench running)?",
        crate::capture::REDIS_PORT
    );
    let mut legacy = crate::legacy_size::Legacy::learn(scap_dir);
    let (per, untyped) = crate::legacy_size::tally(&mut legacy, &records);
    let mut rows: Vec<_> = per.into_iter().collect();
    rows.sort_by(|a, b| b.1.events.cmp(&a.1.events).then(a.0.cmp(b.0)));
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nBytes per syscall, redis-server under redis-benchmark -n {requests} (tests {}), every typed syscall captured at snaplen 80; legacy = sysdig/Falco enter+exit events for the same calls (integer widths learned from {} (event, parameter) pairs of {}, {} guessed 8 bytes; data cut at snaplen 80)\n",
        crate::capture::REDIS_TESTS,
        legacy.learned(),
        scap_dir.display(),
        legacy.guessed
    );
    let _ = writeln!(
        t,
        "| syscall | events | legacy B/pair | Harrier wire B/event | wire / legacy | Harrier packed B/event | packed / legacy |"
    );
    let _ = writeln!(t, "|---|---|---|---|---|---|---|");
    let row = |t: &mut String, name: &str, events: u64, r: &crate::legacy_size::PerSyscall| {
        let per = |b: u64| b as f64 / events.max(1) as f64;
        let (l, w, p) = (per(r.legacy), per(r.wire), per(r.packed));
        let _ = writeln!(
            t,
            "| {name} | {events} | {l:.1} | {w:.1} | {:.0}% | {p:.1} | {:.0}% |",
            100.0 * w / l,
            100.0 * p / l
        );
    };
    for (name, r) in &rows {
        row(&mut t, name, r.events, r);
    }
    let all = rows.iter().fold(crate::legacy_size::PerSyscall::default(), |a, (_, r)| {
        crate::legacy_size::PerSyscall {
            events: a.events + r.events,
            wire: a.wire + r.wire,
            packed: a.packed + r.packed,
            legacy: a.legacy + r.legacy,
        }
    });
    row(&mut t, "**all**", all.events, &all);
    let (events, leg) = (all.events, all.legacy);
    let per_ev = |b: u64| b as f64 / events.max(1) as f64;
    // Whole files: the same records written zstd 3 and uncompressed.
    let path = std::env::temp_dir().join(format!("harrier-bench-redis-{}.hrcap", std::process::id()));
    let total: u64 = {
        let mut n = 0u64;
        let mut i = 0;
        while i + 16 <= records.len() {
            i += u16::from_le_bytes([records[i + 14], records[i + 15]]) as usize;
            n += 1;
        }
        n
    };
    for (label, compression, packed) in [
        ("zstd 3", Some(3), true),
        ("none", None, true),
        ("zstd 3, unpacked", Some(3), false),
        ("none, unpacked", None, false),
    ] {
        let opts = Options { compression, packed, ..Options::default() };
        let r = one(label, &records, total, opts, &path)?;
        let b = r.bytes as f64 / total as f64;
        let pct = 100.0 * b / per_ev(leg);
        let cells = if packed {
            format!("| | | {b:.1} | {pct:.0}% |")
        } else {
            format!("| {b:.1} | {pct:.0}% | | |")
        };
        let _ = writeln!(t, "| file, {label} | {total} | {:.1} {cells}", per_ev(leg));
    }
    if untyped > 0 {
        let _ = writeln!(t, "\n({untyped} events of syscalls the legacy table has no typed pair for are left out of the rows.)");
    }
    let _ = writeln!(t, "\nTarget: at most 40% of the legacy bytes (issue #10), uncompressed. Wire = the sensor's records as they are (block encoding 0, format version 1's only form); packed = as the writer's default event blocks hold them (docs/capture-format.md). The file rows compare a whole Harrier file (header, snapshot, blocks, index) with the legacy events' raw bytes.");
    Ok(t)
}

pub fn run(events: usize, rounds: usize, out_dir: &Path) -> Result<()> {
    let records = stream(events);
    let mut n = 0u64;
    let mut i = 0;
    while i < records.len() {
        i += u16::from_le_bytes([records[i + 14], records[i + 15]]) as usize;
        n += 1;
    }
    let raw_per_event = records.len() as f64 / n as f64;
    let path = std::env::temp_dir().join(format!("harrier-bench-files-{}.hrcap", std::process::id()));
    let mut rows: Vec<Row> = Vec::new();
    for (label, compression, packed) in [
        ("zstd 3", Some(3), true),
        ("zstd 1", Some(1), true),
        ("none", None, true),
        ("zstd 3, unpacked", Some(3), false),
        ("none, unpacked", None, false),
    ] {
        let opts = Options { compression, packed, ..Options::default() };
        // Best of the rounds: the machine is shared, the best is the least disturbed.
        let mut best: Option<Row> = None;
        for _ in 0..rounds {
            let r = one(label, &records, n, opts, &path)?;
            best = Some(match best {
                Some(b) if b.write_cpu + b.read_cpu <= r.write_cpu + r.read_cpu => b,
                _ => r,
            });
        }
        rows.push(best.unwrap());
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{n} events ({raw_per_event:.1} bytes each on the wire), best of {rounds} rounds, one thread"
    );
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "| compression | write Mev/s (CPU) | write Mev/s (wall) | read Mev/s (CPU) | read Mev/s (wall) | bytes/event | file MB |"
    );
    let _ = writeln!(t, "|---|---|---|---|---|---|---|");
    for r in &rows {
        let m = |s: f64| r.events as f64 / s / 1e6;
        let _ = writeln!(
            t,
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |",
            r.label,
            m(r.write_cpu),
            m(r.write_wall),
            m(r.read_cpu),
            m(r.read_wall),
            r.bytes as f64 / r.events as f64,
            r.bytes as f64 / 1e6
        );
    }
    print!("{t}");
    std::fs::create_dir_all(out_dir)?;
    std::fs::write(out_dir.join("files.md"), &t)?;
    Ok(())
}

/// The bytes-per-syscall table against the legacy format (appended to files.md).
pub fn run_legacy(requests: u32, scap_dir: &Path, out_dir: &Path) -> Result<()> {
    let t = legacy_table(requests, scap_dir)?;
    print!("{t}");
    std::fs::create_dir_all(out_dir)?;
    let p = out_dir.join("files.md");
    let mut md = std::fs::read_to_string(&p).unwrap_or_default();
    md.push_str(&t);
    std::fs::write(p, md)?;
    Ok(())
}
