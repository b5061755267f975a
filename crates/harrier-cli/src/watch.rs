//! watch_config_files: config and rule files polled once a second; a change raises the same
//! flag SIGHUP does, so the run loop reloads in place (nothing detached, no state lost).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What identifies a file's content cheaply: modification time and length (None: absent).
fn stamp(p: &PathBuf) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Files of `paths`, a directory contributing its entries (a rules folder).
fn expand(paths: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        let path = PathBuf::from(p);
        match std::fs::read_dir(&path) {
            Ok(d) => out.extend(d.filter_map(|e| e.ok().map(|e| e.path()))),
            Err(_) => out.push(path),
        }
    }
    out.sort();
    out
}

/// Polls `paths` on a thread of its own until `stop`; sets `hup` on a change made after this
/// returns (the first look is taken here, not on the thread).
pub fn spawn(paths: Vec<String>, hup: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
    let snapshot = move || expand(&paths).into_iter().map(|p| (stamp(&p), p)).collect::<Vec<_>>();
    let mut last = snapshot();
    std::thread::Builder::new()
        .name("config-watch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                let now = snapshot();
                if now != last {
                    say!("harrier: a watched config or rules file changed: reloading");
                    hup.store(true, Ordering::Relaxed);
                    last = now;
                }
            }
        })
        .expect("spawning the config watch thread");
}
