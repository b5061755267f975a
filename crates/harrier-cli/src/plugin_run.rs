//! Plugin sources in `harrier run` and `falco`: a thread per enabled plugin source, each
//! with its own plugin states and rule set, sharing the outputs. A source that fails, or
//! whose stream ends, ends the run (as in Falco); one whose plugin hangs is reported and
//! left behind while the others, the syscall source among them, keep running.

use crate::rules_load;
use anyhow::{bail, Result};
use harrier_engine::plugins::{SourceRun, SourceStats};
use harrier_falco::config::RunConfig;
use harrier_outputs::Outputs;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A plugin call that has not returned in this long is reported as hung (tests shorten it
/// with HARRIER_PLUGIN_HANG_MS).
fn hang() -> Duration {
    let ms = std::env::var("HARRIER_PLUGIN_HANG_MS").ok().and_then(|v| v.parse().ok());
    Duration::from_millis(ms.unwrap_or(10_000))
}

struct Running {
    source: String,
    plugin: String,
    stats: Arc<SourceStats>,
    thread: Option<JoinHandle<Result<()>>>,
    hang_said: bool,
}

pub struct Sources {
    running: Vec<Running>,
    stop: Arc<AtomicBool>,
    hang: Duration,
}

/// Starts every enabled plugin source of `c` (none: nothing runs).
pub fn start(c: &RunConfig, outputs: Weak<Outputs>) -> Result<Sources> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut running = Vec::new();
    for src in &c.plugin_sources_enabled {
        let origin = c
            .plugins
            .iter()
            .position(|l| l.lib.source.as_deref() == Some(src.as_str()))
            .expect("an enabled plugin source has its plugin");
        let rules = rules_load::load_for(c, src)?;
        let plugin = c.plugins[origin].lib.name.clone();
        say!("harrier: source {src} (plugin {plugin}): {} rules evaluated", rules.check_report().active());
        let stats = Arc::new(SourceStats::default());
        let run = SourceRun {
            source: src.clone(),
            plugins: c.plugins.clone(),
            origin,
            rules,
            outputs: outputs.clone(),
            host: harrier_outputs::hostname(),
            stop: stop.clone(),
            stats: stats.clone(),
        };
        let thread = std::thread::Builder::new().name(format!("src-{src}")).spawn(move || run.run())?;
        running.push(Running { source: src.clone(), plugin, stats, thread: Some(thread), hang_said: false });
    }
    Ok(Sources { running, stop, hang: hang() })
}

impl Sources {
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Per source: (name, [events, alerts, extraction errors]) for the metrics.
    pub fn sample(&self) -> Vec<(String, [u64; 3])> {
        let c = |r: &Running| {
            let s = &r.stats;
            [s.events.load(Relaxed), s.alerts.load(Relaxed), s.extract_errors.load(Relaxed)]
        };
        self.running.iter().map(|r| (r.source.clone(), c(r))).collect()
    }

    /// Whether a source has ended (its stream's end or a failure): the run ends then.
    pub fn any_done(&self) -> bool {
        self.running.iter().any(|r| r.stats.done.load(Relaxed))
    }

    /// Says, once per source, that its plugin's next_batch has not returned for [`hang`].
    pub fn watch(&mut self) {
        let now = harrier_engine::monotonic_now();
        let limit = self.hang;
        for r in self.running.iter_mut().filter(|r| !r.hang_said) {
            let since = r.stats.in_call_ns.load(Relaxed);
            if since != 0 && now.saturating_sub(since) >= limit.as_nanos() as u64 {
                say!(
                    "harrier: plugin {} (source {}): next_batch has not returned for {:.1} s; the other sources keep running",
                    r.plugin,
                    r.source,
                    limit.as_secs_f64()
                );
                r.hang_said = true;
            }
        }
    }

    /// Stops the sources and waits for them (a hung one is left behind, said); the first
    /// failure is the error.
    pub fn finish(mut self, wait: Duration) -> Result<()> {
        self.stop.store(true, Relaxed);
        let end = Instant::now() + wait;
        let mut first_err = None;
        for r in &mut self.running {
            while !r.thread.as_ref().is_some_and(|t| t.is_finished()) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            let s = &r.stats;
            say!(
                "harrier: source {}: {} events, {} alerts, {} extraction errors",
                r.source,
                s.events.load(Relaxed),
                s.alerts.load(Relaxed),
                s.extract_errors.load(Relaxed)
            );
            match r.thread.take() {
                Some(t) if t.is_finished() => {
                    let res = t
                        .join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("plugin {}: its thread panicked", r.plugin)));
                    if let (Err(e), None) = (res, &first_err) {
                        first_err = Some(e);
                    }
                }
                _ => say!(
                    "harrier: plugin {} (source {}): still in a call at exit; left behind",
                    r.plugin,
                    r.source
                ),
            }
        }
        match first_err {
            Some(e) => bail!("{e:#}"),
            None => Ok(()),
        }
    }
}

/// The run when syscall is not an enabled source: the plugin sources alone, until their
/// streams end, a signal, or the duration.
pub fn run_alone(c: &RunConfig, duration: Option<f64>, stop: Arc<AtomicBool>) -> Result<()> {
    let outputs = Arc::new(crate::run_outputs::outputs(c)?);
    let mut sources = start(c, Arc::downgrade(&outputs))?;
    if sources.is_empty() {
        bail!("Must enable at least one event source");
    }
    let metrics = Arc::new(std::sync::Mutex::new(harrier_engine::metrics::Metrics::new()));
    if let Some(addr) = &c.metrics_addr {
        harrier_engine::metrics::serve_with(&crate::run_outputs::webserver(c, addr)?, metrics.clone())?;
    }
    let deadline = duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut last_metrics = Instant::now();
    while !sources.any_done() && !stop.load(Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        sources.watch();
        if c.metrics_addr.is_some() && last_metrics.elapsed() >= Duration::from_secs(1) {
            let (_, rss_bytes) = harrier_engine::metrics::self_usage();
            let sample = harrier_engine::metrics::Sample {
                plugin_sources: sources.sample(),
                outputs: outputs.stats(),
                rss_bytes,
                ..Default::default()
            };
            if let Ok(mut m) = metrics.lock() {
                m.update(sample);
            }
            last_metrics = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let result = sources.finish(Duration::from_secs(2));
    let outputs = harrier_engine::plugins::unshare(outputs);
    for o in outputs.close(crate::run_outputs::STOP_BUDGET).iter().filter(|o| o.lost() > 0) {
        say!("{}", crate::run_outputs::summary(o));
    }
    result
}
