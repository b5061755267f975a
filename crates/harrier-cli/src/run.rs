//! `harrier run`: live capture → state → Falco's rules → alerts.

use crate::alert_capture::AlertCapture;
use crate::file_out::{self, FileOut};
use crate::rules_load;
use crate::run_outputs::{self, outputs};
use anyhow::{bail, Context, Result};
use harrier_capture::{parse_size, AttachMode, Config, Session};
use harrier_engine::drops::DropMonitor;
use harrier_engine::kfilter::KernelDrop;
use harrier_engine::metrics::{self, Metrics, RuleLabels, Sample};
use harrier_engine::state::EngineState;
use harrier_engine::statsfile::StatsFile;
use harrier_engine::Engine;
use harrier_falco::config::RunConfig;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct RunArgs {
    /// A falco.yaml-style config (rules_files, priority, json_output, outputs...).
    #[arg(long, short = 'c')]
    pub(crate) config: Option<String>,
    /// Rule file or directory (repeatable; replaces rules_files; default: the embedded rules).
    #[arg(long = "rules", short = 'r')]
    pub(crate) rules: Vec<String>,
    /// Least severe priority evaluated (e.g. warning).
    #[arg(long)]
    pub(crate) priority: Option<String>,
    /// Alerts as JSON (Falco's shape) instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Report every matching rule per event, not only the first.
    #[arg(long)]
    pub(crate) all_matches: bool,
    /// Also append alerts to this file.
    #[arg(long)]
    pub(crate) file_output: Option<String>,
    /// Also POST each alert as JSON to this URL (Falcosidekick, event-generator).
    #[arg(long)]
    pub(crate) http_output: Option<String>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:8765).
    #[arg(long)]
    pub(crate) metrics_addr: Option<String>,
    /// Write Falco-style stats lines (JSON) to this file.
    #[arg(long)]
    pub(crate) stats_file: Option<String>,
    /// Interval of the stats lines, ms.
    #[arg(long, default_value_t = 1000)]
    pub(crate) stats_interval: u64,
    /// Stop after this many seconds.
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// auto, per-syscall or dispatcher (see `harrier capture --help`).
    #[arg(long, default_value = "auto")]
    pub(crate) attach: AttachMode,
    /// Per-program BPF run-time stats (costs every BPF program on the machine ~57 ns per run).
    #[arg(long)]
    pub(crate) bpf_stats: bool,
    /// Walk every path to the root: no path cache (benchmarks; it is on
    /// where the kernel has the hooks that keep it exact).
    #[arg(long)]
    pub(crate) no_dir_cache: bool,
    /// Ring size per CPU (default 8M, or the config's engine buf_size_preset).
    #[arg(long)]
    pub(crate) buffer_size: Option<String>,
    /// Benchmarks: an empty program of the same type wherever a program
    /// would be linked (the attach plan's floor); no event reaches the rules.
    #[arg(long, hide = true)]
    pub(crate) empty_programs: bool,
    /// Benchmarks: the entry programs copy pointer arguments as usual, every
    /// other program returns once it has the task (the least a sensor with
    /// entry copies costs here); no event reaches the rules.
    #[arg(long, hide = true, conflicts_with_all = ["empty_programs", "no_entry_copies"])]
    pub(crate) entry_copies_only: bool,
    /// Benchmarks: entry copies read user memory by the helper, never by
    /// the page-table walk (harrier_capture::uread).
    #[arg(long, hide = true)]
    pub(crate) entry_copies_by_helper: bool,
    /// Benchmarks: the programs learn the current task by the helper, never
    /// from its per-CPU slot (harrier_capture::current).
    #[arg(long, hide = true)]
    pub(crate) current_by_helper: bool,
    /// Read open's and connect's pointer arguments at syscall exit, with no
    /// entry program (the config's entry_copies: false; see harrier.yaml).
    #[arg(long)]
    pub(crate) no_entry_copies: bool,
    /// Send every captured event to user space (no filtering derived from the rules).
    #[arg(long)]
    pub(crate) no_kernel_filter: bool,
    /// Do not send these events (repeatable; adds to the config's kernel_drop),
    /// e.g. "proc.name = redis-server and evt.type in (read, write)".
    #[arg(long = "kernel-drop", value_name = "CONDITION")]
    pub(crate) kernel_drop: Vec<String>,
    /// Act on the process that breaks this rule (repeatable; adds to the
    /// config's enforce): RULE=kill kills it, RULE or RULE=dry-run reports
    /// what would be done.
    #[arg(long = "enforce", value_name = "RULE[=kill|dry-run]")]
    pub(crate) enforce: Vec<String>,
    /// Evaluate the rules on a capture file instead of live events (no root needed).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["write", "duration", "metrics_addr"])]
    pub(crate) replay: Option<String>,
    #[command(flatten)]
    pub(crate) write: crate::file_out::WriteArgs,
}

fn settings(a: &RunArgs) -> Result<RunConfig> {
    let mut c = match &a.config {
        Some(path) => RunConfig::load(path)?,
        None => RunConfig::default(),
    };
    for w in &c.warnings {
        say!("harrier: warning: {w}");
    }
    if !a.rules.is_empty() {
        c.rules_files = a.rules.clone();
    }
    if let Some(p) = &a.priority {
        c.priority =
            harrier_rules::loader::Priority::parse(p).with_context(|| format!("unknown priority '{p}'"))?;
    }
    if a.json {
        c.json_output = true;
    }
    if a.all_matches {
        c.rule_matching = harrier_rules::ruleset::RuleMatching::All;
    }
    if a.file_output.is_some() {
        c.file_output = a.file_output.clone();
    }
    if a.http_output.is_some() {
        c.http_output = a.http_output.clone();
    }
    if a.metrics_addr.is_some() {
        c.metrics_addr = a.metrics_addr.clone();
    }
    if a.no_entry_copies {
        c.entry_copies = false;
    }
    for e in &a.enforce {
        c.enforce.push(harrier_falco::config::EnforceEntry::parse_arg(e)?);
    }
    Ok(c)
}

/// SIGHUP: the rule files again, the same state tables. Syscalls the new
/// rules need beyond those attached are named (a restart captures them).
/// The configuration read again as it was first read (`falco`'s way, or `harrier run`'s
/// flags over the config file).
fn reread(c: &RunConfig, a: &RunArgs) -> Result<RunConfig> {
    match &c.falco_source {
        Some(src) => c.reread_falco(src),
        None => settings(a),
    }
}

/// SIGHUP or a watched file's change: the configuration and the rule files again, the same
/// state tables; keys that only a restart applies are named. Returns the configuration now
/// in force.
fn reload(
    old: &RunConfig,
    a: &RunArgs,
    drops: &[KernelDrop],
    e: &mut Engine,
    s: &mut Session,
) -> Option<RunConfig> {
    let fresh = match reread(old, a) {
        Ok(f) => f,
        Err(err) => {
            say!("harrier: reload failed, the old configuration and rules stay: {err:#}");
            return None;
        }
    };
    let c = &fresh;
    let rules = match rules_load::load(c) {
        Ok(r) => r,
        Err(err) => {
            say!("harrier: reload failed, the old rules stay: {err:#}");
            return None;
        }
    };
    let interest = harrier_engine::interest::interest(&rules);
    let attached = s.syscalls().to_vec();
    let missing: Vec<&str> =
        interest.syscalls.iter().filter(|x| !attached.iter().any(|y| y.nr == x.nr)).map(|x| x.name).collect();
    if !a.no_kernel_filter || !drops.is_empty() {
        let rules_part = if a.no_kernel_filter { None } else { Some(&rules) };
        let f = harrier_engine::kfilter::derive_with(rules_part, &attached, drops);
        if let Err(err) = s.replace_kernel_filter(&f) {
            say!("harrier: reload failed, the old rules stay: kernel filter: {err:#}");
            return None;
        }
    }
    let needed = harrier_engine::collect::collect(&rules, &attached, harrier_engine::needs_env(&rules));
    let uncollected = s.collect().lacks(&needed);
    s.set_priority_syscalls(&harrier_engine::interest::priority_syscalls(&rules, c.outputs_queue.keep_rank));
    let n = rules.check_report().active();
    if let Err(err) = watch_names(s, &rules) {
        say!("harrier: reload failed, the old rules stay: kernel filter: {err:#}");
        return None;
    }
    e.replace_rules(rules);
    say!("harrier: reloaded: {n} rules evaluated");
    if !missing.is_empty() {
        say!(
            "harrier: note: the new rules also need {}: restart harrier run to capture them",
            missing.join(", ")
        );
    }
    if !uncollected.is_empty() {
        say!(
            "harrier: note: the new rules also read {}: restart harrier run to collect them",
            uncollected.join(", ")
        );
    }
    let restart = old.needs_restart(&fresh);
    if !restart.is_empty() {
        say!(
            "harrier: note: changed in the configuration, applied at the next start: {}",
            restart.join(", ")
        );
    }
    Some(fresh)
}

pub fn run(a: RunArgs) -> Result<()> {
    let c = settings(&a)?;
    run_with(a, c)
}

/// `harrier run` with its settings resolved (by `settings`, or by `falco`'s command line).
/// The stop flag (SIGINT, SIGTERM) and the reload flag (SIGHUP, or a watched file's change).
type Flag = Arc<AtomicBool>;
fn signals(c: &RunConfig) -> Result<(Flag, Flag)> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing signal handlers")?;
    if c.watch_config_files {
        crate::watch::spawn(watched(c), hup.clone(), stop.clone());
    }
    Ok((stop, hup))
}

/// The files watch_config_files watches: the config files and the rules paths.
fn watched(c: &RunConfig) -> Vec<String> {
    c.config_files.iter().chain(&c.rules_files).cloned().collect()
}

pub fn run_with(a: RunArgs, c: RunConfig) -> Result<()> {
    let rules = rules_load::load(&c)?;
    // No syscall source (disabled, or engine.kind nodriver): the plugin sources alone.
    if !c.plugin_sources_enabled.is_empty() && (!c.syscall_source || c.no_driver) {
        let (stop, _) = signals(&c)?;
        return crate::plugin_run::run_alone(&c, a.duration, stop);
    }
    if c.no_driver {
        return no_driver(&c, rules, a.duration);
    }
    let (total, active) = (rules.check_report().total(), rules.check_report().active());
    if let Some(path) = a.replay.as_ref().or(c.replay_file.as_ref()) {
        return replay(path, rules, &c, total, active);
    }
    let interest = harrier_engine::interest::interest(&rules);
    let duration = match a.duration {
        Some(d) if !(d > 0.0 && d < 1e9) => bail!("duration must be a positive number of seconds, not {d}"),
        d => d.map(Duration::from_secs_f64),
    };
    let mut cfg = Config::new(interest.syscalls.clone());
    cfg.attach = a.attach;
    cfg.run_time_stats = a.bpf_stats;
    cfg.dir_cache = !a.no_dir_cache;
    cfg.empty_programs = a.empty_programs;
    cfg.entry_copies_only = a.entry_copies_only;
    cfg.user_reads = !a.entry_copies_by_helper;
    cfg.current_reads = !a.current_by_helper;
    cfg.buffer_size = match (&a.buffer_size, c.buffer_size) {
        (Some(s), _) => parse_size(s)?,
        (None, Some(preset)) => preset as usize,
        (None, None) => 8 << 20,
    };
    cfg.skip_missing = true;
    cfg.validate()?;
    let user_drops = c
        .kernel_drop
        .iter()
        .chain(&a.kernel_drop)
        .map(|t| harrier_engine::kfilter::parse_kernel_drop(t).with_context(|| format!("kernel_drop '{t}'")))
        .collect::<Result<Vec<_>>>()?;
    if !a.no_kernel_filter || !user_drops.is_empty() {
        let rules_part = if a.no_kernel_filter { None } else { Some(&rules) };
        let f = harrier_engine::kfilter::derive_with(rules_part, &interest.syscalls, &user_drops);
        say!("harrier: kernel filter: {}", harrier_engine::kfilter::summary(&f));
        cfg.kernel_filter = Some(f);
    }
    let enforce = crate::enforce::setup(&rules, &c, &interest.syscalls)?;
    if let Some(e) = &enforce {
        for line in crate::enforce::summary(&e.enforced, &e.enforcer.decisions) {
            say!("harrier: {line}");
        }
        cfg.guard = e.guard.clone();
    }
    // A capture file (-w, or capture on alert) keeps every parameter;
    // otherwise what the rules read.
    if a.write.write.is_none() && c.capture.is_none() {
        let env = harrier_engine::needs_env(&rules);
        cfg.collect = harrier_engine::collect::collect(&rules, &interest.syscalls, env);
    }
    if !c.entry_copies {
        harrier_engine::collect::without_entry_copies(&mut cfg.collect, &interest.syscalls);
    }
    if a.write.write.is_none() || !c.entry_copies {
        say!("harrier: collected: {}", cfg.collect.summary());
    }
    // An eighth of each ring is kept for the events the most severe rules
    // (and the process table) need: a flood cannot blind them. Rings under
    // 256 KiB (tests, tiny hosts) have no room to spare for it.
    cfg.ring_reserve = if cfg.buffer_size >= 256 << 10 { cfg.buffer_size / 8 } else { 0 };
    cfg.priority_syscalls = harrier_engine::interest::priority_syscalls(&rules, c.outputs_queue.keep_rank);
    if unsafe { libc::geteuid() } != 0 {
        bail!("harrier run needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)");
    }
    let mut stats_file = match &a.stats_file {
        Some(p) => Some(std::fs::File::create(p).with_context(|| format!("creating {p}"))?),
        None => None,
    };
    let metrics = Arc::new(Mutex::new(Metrics::new()));
    if let Some(addr) = &c.metrics_addr {
        metrics::serve_with(&run_outputs::webserver(&c, addr)?, metrics.clone())?;
    }
    let mut snapshots = run_outputs::snapshots(&c)?;
    let (stop, hup) = signals(&c)?;

    let engine = Rc::new(RefCell::new(Engine::new(rules, EngineState::new(), outputs(&c)?, c.rule_matching)));
    let mut sources = crate::plugin_run::start(&c, engine.borrow().shared_outputs())?;
    let (offset, start) = (engine.borrow().epoch_offset(), engine.borrow().capture_start_ns());
    let file_settings = serde_json::json!({
        "command": "run",
        "syscalls": cfg.syscalls.iter().map(|s| s.name).collect::<Vec<_>>(),
        "rules_files": c.rules_files,
        "buffer_size": cfg.buffer_size,
        "attach": a.attach.to_string(),
        "start_mono_ns": start.saturating_sub(offset),
    });
    let file = FileOut::create(&a.write, &file_out::live_info(offset, file_settings))?
        .map(|f| Rc::new(RefCell::new(f)));
    let captures = c.capture.as_ref().map(|(policy, prefix)| {
        engine.borrow_mut().set_capture(*policy);
        Rc::new(RefCell::new(AlertCapture::new(prefix, offset)))
    });
    let (sink, file_sink, capture_sink) = (engine.clone(), file.clone(), captures.clone());
    let mut session = Session::start(
        &cfg,
        Box::new(move |ev| {
            let mut e = sink.borrow_mut();
            e.on_event(ev);
            if let Some(f) = &file_sink {
                f.borrow_mut().event(ev);
            }
            if let Some(cap) = &capture_sink {
                let asked = e.take_capture_request();
                cap.borrow_mut().on_event(ev, asked, || e.state.tables.snapshot());
            }
        }),
    )?;
    let holds = cfg.guard.as_ref().is_some_and(|g| g.hold);
    if let Some(e) = enforce {
        let mut en = e.enforcer;
        if cfg.guard.is_some() {
            en.set_kernel_log(Box::new(session.guard_log_reader()?));
            session.add_host_cgroups(&crate::enforce::host_cgroups())?;
        }
        if holds {
            session.start_guardian()?;
        }
        engine.borrow_mut().set_enforcer(en);
    }
    if let Some(untold) = session.untold_fds()? {
        engine.borrow_mut().state.watch_untold(untold);
    }
    watch_names(&session, engine.borrow().rules())?;
    engine.borrow_mut().state.scan_proc();
    if let Some(f) = &file {
        let snap = engine.borrow_mut().state.tables.snapshot();
        f.borrow_mut().snapshot(snap);
    }
    let choice = session.attach_choice();
    say!(
        "harrier: {} rules loaded, {} evaluated; {}; {} attach ({})",
        total,
        active,
        interest.summary(),
        choice.mode,
        choice.reason
    );
    say!("harrier: {}", session.dir_cache().describe());
    say!("harrier: {}", session.user_reads().describe());
    say!("harrier: {}", session.current_reads().describe());
    if a.empty_programs {
        say!("harrier: --empty-programs: empty programs at every attach point, no events");
    }
    if a.entry_copies_only {
        say!(
            "harrier: --entry-copies-only: entry copies made, every other program returns at once, no events"
        );
    }
    for r in &interest.unbounded_rules {
        say!("harrier: note: rule '{r}' has no evt.type: it sees typed syscalls only");
    }

    let tsc_per_ns = harrier_engine::tsc_per_ns(Duration::from_millis(20));
    let started = Instant::now();
    let deadline = duration.map(|d| started + d);
    let mut stats_line = StatsFile::default();
    let mut last_stats = Instant::now();
    let mut last_metrics = Instant::now();
    let mut last_cpu = (metrics::self_usage().0, Instant::now());
    let mut kernel_drops = 0;
    let mut file_failed_said = false;
    let mut drop_monitor = DropMonitor::new(c.drops.clone());
    let mut drop_exit = false;
    // The configuration a reload reads again and replaces (the run keeps its start-time one).
    let mut current = c.clone();
    session.run_with(|s| {
        let mut e = engine.borrow_mut();
        e.end_batch();
        if holds {
            crate::enforce::resolve_held(s, &mut e);
        }
        if let Some(cap) = &captures {
            cap.borrow_mut().drained();
        }
        if let Some(f) = &file {
            let mut f = f.borrow_mut();
            kernel_drops = crate::capture::pass_drops(s, &mut f, kernel_drops);
            f.send();
            if f.failed() && !file_failed_said {
                say!("harrier: the rules keep running without the capture file");
                file_failed_said = true;
            }
        }
        if hup.swap(false, Ordering::Relaxed) {
            say!("harrier: SIGHUP received, restarting... (the rules reload in place: nothing detached, no state lost)");
            if let Some(fresh) = reload(&current, &a, &user_drops, &mut e, s) {
                current = fresh;
            }
        }
        let kernel = s.kernel_stats().ok();
        let (events, drops, filtered) = kernel.map_or((0, 0, 0), |k| {
            let sum = |f: fn(&harrier_schema::wire::CpuStats) -> u64| k.iter().map(f).sum::<u64>();
            (sum(|c| c.events), sum(|c| c.dropped()), sum(|c| c.filtered))
        });
        // A full backlog's shedding is a drop as the kernel's are.
        let drops = drops + s.user_counters().backlog_shed;
        if !e.check_drops(&mut drop_monitor, harrier_engine::monotonic_now(), events, drops) {
            drop_exit = true;
        }
        stats_line.reloads = e.counters.reloads;
        if let Some(f) = stats_file.as_mut() {
            if last_stats.elapsed() >= Duration::from_millis(a.stats_interval) {
                let _ = stats_line.write(f, events, drops, &e.outputs().stats());
                last_stats = Instant::now();
            }
        }
        if c.metrics_addr.is_some() && last_metrics.elapsed() >= Duration::from_secs(1) {
            let (cpu, rss) = metrics::self_usage();
            let ratio = (cpu - last_cpu.0) / last_cpu.1.elapsed().as_secs_f64().max(1e-3);
            last_cpu = (cpu, Instant::now());
            let rules = e
                .active_rules()
                .map(|(r, k)| {
                    let labels = RuleLabels {
                        rule_name: r.name.clone(),
                        priority: r.priority.as_str().to_string(),
                        source: r.source.clone(),
                        tags: r.tags.join(","),
                    };
                    (labels, k.matches, k.evaluations, k.cycles as f64 / tsc_per_ns / 1e9)
                })
                .collect();
            if let Ok(mut m) = metrics.lock() {
                m.update(Sample {
                    events,
                    drops,
                    filtered,
                    rules,
                    outputs: e.outputs().stats(),
                    reloads: e.counters.reloads,
                    cpu_ratio: ratio,
                    rss_bytes: rss,
                    enforce: e.enforcer_mut().map_or_else(Vec::new, |en| en.sample()),
                    plugin_sources: sources.sample(),
                });
            }
            last_metrics = Instant::now();
        }
        if let Some(snap) = snapshots.as_mut().filter(|s| s.due(Instant::now())) {
            let figures = snapshot_figures(&e, events, drops);
            if let Some(alert) = snap.take(&figures) {
                e.outputs().emit(Arc::new(alert));
            }
        }
        sources.watch();
        drop_exit
            || sources.any_done()
            || stop.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| Instant::now() >= d)
    })?;
    let plugins_result = sources.finish(Duration::from_secs(2));
    let stopped = Instant::now();
    // Final figures now; the links are detached (a grace period per
    // tracepoint) once everything is reported, when `_links` goes.
    let (stats, _links) = session.finish()?;
    if let Some(cap) = &captures {
        cap.borrow_mut().close();
    }
    let engine = Rc::try_unwrap(engine).ok().expect("the session released the engine").into_inner();
    let file = file.map(|f| Rc::try_unwrap(f).ok().expect("the session released the sink").into_inner());
    let file_outcome = file.map(|mut f| {
        f.add_drops(stats.total_drops().saturating_sub(kernel_drops));
        let path = f.path().to_string();
        (path, f.finish())
    });
    let counters = engine.counters.clone();
    let dns = engine.rules().dns().clone();
    let out_stats = engine.into_outputs().close(run_outputs::deadline(stopped));
    if let Some(f) = stats_file.as_mut() {
        let k = stats.kernel_total();
        let _ = stats_line.write(f, k.events, stats.total_drops(), &out_stats);
    }
    say!(
        "harrier: {} events, {} kept back by the kernel filter, {} dropped in the kernel, {} shed by a full backlog, {} alerts, {} events with no candidate rule",
        counters.events,
        stats.kernel_total().filtered,
        stats.total_drops() - stats.user.backlog_shed,
        stats.user.backlog_shed,
        counters.alerts,
        counters.events_without_rules
    );
    if counters.reloads > 0 {
        say!("harrier: rules reloaded {} time(s) in place", counters.reloads);
    }
    if !dns.is_empty() {
        let d = dns.stats();
        let last = dns.last_error().map(|e| format!(" (last: {e})")).unwrap_or_default();
        say!(
            "harrier: dns: {} names in conditions, {} lookups, {} failed{last}",
            dns.names().len(),
            d.lookups,
            d.failures
        );
    }
    for o in &out_stats {
        say!("{}", run_outputs::summary(o));
    }
    if c.as_falco {
        say!("{}", drop_monitor.report());
    }
    if drop_exit {
        bail!("syscall event drops: the exit action stopped the sensor");
    }
    plugins_result?;
    if let Some((path, o)) = file_outcome {
        say!("{}", file_out::report(&path, &o));
        if let Some(e) = o.error {
            bail!("{e}");
        }
    }
    Ok(())
}

/// What a metrics snapshot reads of the engine and the kernel's counters.
fn snapshot_figures(e: &Engine, events: u64, drops: u64) -> harrier_engine::snapshot::Figures {
    let rules = e.active_rules().map(|(r, k)| (r.name.clone(), k.matches)).collect();
    harrier_engine::snapshot::Figures {
        num_evts: e.counters.events,
        scap_n_evts: events,
        scap_n_drops: drops,
        outputs_drops: e.outputs().stats().iter().map(|o| o.lost()).sum(),
        rules,
    }
}

/// `--replay FILE`: the same engine over a capture file's events.
fn replay(
    path: &str,
    rules: harrier_rules::RuleSet,
    c: &RunConfig,
    total: usize,
    active: usize,
) -> Result<()> {
    // A missing file is said at once, before any wait for names.
    std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
    let mut engine = Engine::new(rules, EngineState::new(), outputs(c)?, c.rule_matching);
    // A file replays faster than names resolve: the first round first.
    let dns = engine.rules().dns().clone();
    if !dns.is_empty() && !dns.wait_rounds(1, Duration::from_secs(60)) {
        say!("harrier: warning: names in conditions not resolved after 60 s; their comparisons stay false until they are");
    }
    say!("harrier: {total} rules loaded, {active} evaluated; replaying {path}");
    let mut drops = DropMonitor::new(c.drops.clone());
    let replayed = crate::replay::replay_any(path, &mut engine, Some(&mut drops));
    if c.as_falco {
        say!("{}", drops.report());
    }
    let (events, foreign) = replayed?;
    let counters = engine.counters.clone();
    let out_stats = engine.into_outputs().close(Duration::from_secs(5));
    say!(
        "harrier: replayed {events} events ({foreign} foreign events not evaluated), {} alerts, {} decode errors",
        counters.alerts,
        counters.decode_errors
    );
    for o in out_stats.iter().filter(|o| o.lost() > 0) {
        say!("{}", run_outputs::summary(o));
    }
    Ok(())
}

/// engine.kind nodriver: no syscall source. The rules stay loaded and reload on SIGHUP or a
/// watched file's change, the webserver serves, until the duration or a signal.
fn no_driver(c: &RunConfig, rules: harrier_rules::RuleSet, duration: Option<f64>) -> Result<()> {
    let (stop, hup) = signals(c)?;
    if let Some(addr) = &c.metrics_addr {
        metrics::serve_with(&run_outputs::webserver(c, addr)?, Arc::new(Mutex::new(Metrics::new())))?;
    }
    // The outputs start as in a live run (a bad one is an error here too), and the metrics
    // snapshots go out through them (no events: the rules' counters stay at zero).
    let mut snapshots = run_outputs::snapshots(c)?;
    let engine = Engine::new(rules, EngineState::new(), outputs(c)?, c.rule_matching);
    say!("harrier: engine.kind nodriver: no syscall source; rules loaded, waiting");
    let deadline = duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    while !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(snap) = snapshots.as_mut().filter(|s| s.due(Instant::now())) {
            if let Some(alert) = snap.take(&snapshot_figures(&engine, 0, 0)) {
                engine.outputs().emit(Arc::new(alert));
            }
        }
        if hup.swap(false, Ordering::Relaxed) {
            say!("harrier: SIGHUP received, restarting... (the rules reload in place)");
            match rules_load::load(c) {
                Ok(r) => say!("harrier: reloaded: {} rules evaluated", r.check_report().active()),
                Err(e) => say!("harrier: reload failed, the old rules stay: {e:#}"),
            }
        }
    }
    for o in engine.into_outputs().close(run_outputs::STOP_BUDGET).iter().filter(|o| o.lost() > 0) {
        say!("{}", run_outputs::summary(o));
    }
    Ok(())
}

/// Keeps the kernel filter's copy of the addresses of the rules' names
/// (connect's `peer_named` clauses) as the rules' resolver finds them.
fn watch_names(session: &Session, rules: &harrier_rules::ruleset::RuleSet) -> Result<()> {
    if let Some(peers) = session.named_peers()? {
        rules.dns().on_round(Box::new(move |addrs| {
            if let Err(err) = peers.set(addrs) {
                eprintln!("harrier: the rules' names in the kernel filter: {err:#}");
            }
        }));
    }
    Ok(())
}
