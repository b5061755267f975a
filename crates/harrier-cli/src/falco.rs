//! `falco ARGS` (the binary called as falco) and `harrier falco ARGS`: Falco 0.44.1's command
//! line over Harrier's sensor. Steps run in Falco's order: help and schemas, the config
//! (-c, config_files, -o), version and lists, -V, the rules, -L/-l, --dry-run, then events
//! (live, or replay of a capture file). Errors end as Falco's do: "Error: ..." and exit 1.

use crate::rules_load;
use crate::run::{run_with, RunArgs};
use anyhow::{bail, Result};
use clap::Parser;
use harrier_falco::cli::{FalcoArgs, Format};
use harrier_falco::config::RunConfig;
use harrier_falco::doc::{ConfigDoc, DEFAULT_CONFIG};
use std::ffi::OsString;
use std::process::ExitCode;

/// The Falco version whose command line and outputs this follows.
pub const FALCO_VERSION: &str = "0.44.1";

/// `harrier run`'s options at their defaults, for the fields Falco's options set.
#[derive(Parser)]
struct Defaults {
    #[command(flatten)]
    run: RunArgs,
}

pub fn main(args: Vec<OsString>) -> ExitCode {
    let a = match FalcoArgs::try_parse_from(args) {
        Ok(a) => a,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp) => e.exit(),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            return fail(first.strip_prefix("error: ").unwrap_or(first));
        }
    };
    match run(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("{e:#}")),
    }
}

fn fail(msg: &str) -> ExitCode {
    say!("Error: {msg}");
    ExitCode::FAILURE
}

fn run(a: FalcoArgs) -> Result<()> {
    let format = a.output_format().map_err(anyhow::Error::msg)?;
    if a.config_schema || a.rule_schema {
        println!("{}", harrier_falco::lists::schema(a.rule_schema));
        return Ok(());
    }
    if a.gvisor_generate_config.is_some() {
        bail!("--gvisor-generate-config: harrier has no gVisor engine (its sensor is eBPF)");
    }
    if a.ignored_events {
        print!("{}", harrier_falco::lists::ignored_events());
        return Ok(());
    }
    if a.list_events {
        return list_events(format);
    }
    let path = match &a.config {
        Some(p) if !std::path::Path::new(p).exists() => bail!("Could not find configuration file at {p}"),
        Some(p) => Some(p.as_str()),
        None => std::path::Path::new(DEFAULT_CONFIG).exists().then_some(DEFAULT_CONFIG),
    };
    let doc = ConfigDoc::load(path, &a.options)?;
    let mut c = RunConfig::from_doc(&doc)?;
    c.as_falco = true;
    if a.version {
        return version(&c);
    }
    if a.page_size {
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        println!("Your system page size is: {size} bytes");
        return Ok(());
    }
    let needs_config = a.validate.is_empty() && a.list.is_none();
    if path.is_none() && needs_config && !a.list_plugins && a.plugin_info.is_none() {
        bail!("You must create a config file at {DEFAULT_CONFIG} or by passing -c");
    }
    // The plugins load_plugins names (container is built in): opened for every step below.
    c.open_plugins()?;
    if let Some(p) = &a.plugin_info {
        return plugin_info(&c, p);
    }
    if a.list_plugins {
        let n = c.plugins.len() + usize::from(c.container_plugin);
        println!("{n} Plugins Loaded:\n");
        for l in &c.plugins {
            println!("{}", harrier_falco::lists::plugin(&l.lib, None));
        }
        if c.container_plugin {
            print!("{}", harrier_falco::lists::container_plugin(false));
        }
        return Ok(());
    }
    if let Some(source) = &a.list {
        return list_fields(&c, source, a.names_only, format);
    }
    for w in &c.warnings {
        say!("Warning: {w}");
    }
    let known = |s: &str| s == "syscall" || c.plugin_sources.iter().any(|p| p.source == s);
    for s in a.enable_source.iter().chain(&a.disable_source) {
        if !known(s) {
            bail!("Attempted enabling/disabling an unknown event source: {s}");
        }
    }
    if !a.enable_source.is_empty() && !a.disable_source.is_empty() {
        bail!("You can not mix --enable-source and --disable-source");
    }
    let enabled = |s: &str| match a.enable_source.is_empty() {
        true => !a.disable_source.iter().any(|d| d == s),
        false => a.enable_source.iter().any(|e| e == s),
    };
    c.syscall_source = enabled("syscall");
    c.plugin_sources_enabled.retain(|s| enabled(s));
    if !a.validate.is_empty() {
        return validate(&a.validate, &c, a.verbose);
    }
    if !a.rules.is_empty() {
        c.rules_files = a.rules.clone();
    } else {
        // Falco loads the config's rules paths that exist and skips the others.
        c.rules_files.retain(|f| std::path::Path::new(f).exists());
    }
    if c.rules_files.is_empty() {
        bail!(
            "You must specify at least one rules file/directory via -r or a rules_file entry in falco.yaml"
        );
    }
    if a.describe_all || a.describe_rule.is_some() {
        // Loaded first: what Falco refuses fails here, with its errors.
        let rules = rules_load::load(&c)?;
        let only = a.describe_rule.as_deref();
        let out = match c.json_output {
            true => {
                let plugins: Vec<String> = c.plugins.iter().map(|l| l.lib.name.clone()).collect();
                harrier_falco::describe::json(&rules_load::files(&c)?, &c.load_options(), &plugins, only)?
            }
            false => harrier_falco::lists::describe(&rules, only)?,
        };
        println!("{out}");
        return Ok(());
    }
    if a.support {
        let rules = rules_load::load(&c)?;
        drop(rules);
        println!("{}", support(&a, &doc, &c)?);
        return Ok(());
    }
    if !c.syscall_source && c.plugin_sources_enabled.is_empty() {
        bail!("Must enable at least one event source");
    }
    // Falco's first log line: its version, after the time in the configured format.
    say!(
        "{}: Falco version: {FALCO_VERSION} (harrier {})",
        log_time(c.time_format_iso_8601),
        env!("CARGO_PKG_VERSION")
    );
    if let Some(p) = &a.print {
        let entry = harrier_rules::ruleset::AppendOutput { extra_output: p.clone(), ..Default::default() };
        c.append_output.push(entry.clone());
        c.print_output = Some(entry);
    }
    c.falco_source = Some(harrier_falco::config::FalcoSource {
        path: path.map(String::from),
        options: a.options.clone(),
        rules: a.rules.clone(),
    });
    if a.dry_run {
        rules_load::load(&c)?;
        say!("Running in dry-run mode: no events are processed");
        return Ok(());
    }
    if let Some(p) = &a.pidfile {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| anyhow::anyhow!("writing {p}: {e}"))?;
    }
    let mut r = Defaults::parse_from(["falco"]).run;
    if a.duration > 0 {
        r.duration = Some(a.duration as f64);
    }
    run_with(r, c)
}

fn version(c: &RunConfig) -> Result<()> {
    // Falco's fields, Harrier's values: semver-shaped, as scripts that parse them expect.
    let harrier = env!("CARGO_PKG_VERSION");
    let falco = format!("{FALCO_VERSION}+harrier.{harrier}");
    let libs = format!("{harrier}+harrier");
    let schema = format!("{}.0.0", harrier_schema::SCHEMA_VERSION);
    let engine = harrier_rules::ENGINE_VERSION;
    if c.json_output {
        let v = serde_json::json!({
            "falco_version": falco,
            "libs_version": libs,
            "plugin_api_version": "0.0.0",
            "driver_api_version": schema,
            "driver_schema_version": schema,
            "default_driver_version": libs,
            "engine_version": engine.split('.').nth(1).unwrap_or("0"),
            "engine_version_semver": engine,
        });
        println!("{v}");
    } else {
        println!("Falco version: {falco}");
        println!("Libs version:  {libs}");
        println!("Plugin API:    0.0.0");
        println!("Engine:        {engine}");
        println!("Driver:");
        println!("  API version:    {schema}");
        println!("  Schema version: {schema}");
        println!("  Default driver: {libs}");
    }
    Ok(())
}

fn support(a: &FalcoArgs, doc: &ConfigDoc, c: &RunConfig) -> Result<serde_json::Value> {
    let uname = rustix_uname();
    let files: Vec<serde_json::Value> = c
        .rules_files
        .iter()
        .map(|f| serde_json::json!({"name": f, "content": std::fs::read_to_string(f).unwrap_or_default()}))
        .collect();
    Ok(serde_json::json!({
        "version": FALCO_VERSION,
        "engine_info": {"engine_version": harrier_rules::ENGINE_VERSION},
        "system_info": uname,
        "cmdline": std::env::args().collect::<Vec<_>>().join(" "),
        "config": std::fs::read_to_string(&doc.main).unwrap_or_default(),
        "config_files": doc.files,
        "rules_files": files,
        "options": a.options,
    }))
}

fn rustix_uname() -> serde_json::Value {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut u) };
    let s =
        |f: &[libc::c_char]| unsafe { std::ffi::CStr::from_ptr(f.as_ptr()) }.to_string_lossy().into_owned();
    serde_json::json!({
        "sysname": s(&u.sysname), "nodename": s(&u.nodename), "release": s(&u.release),
        "version": s(&u.version), "machine": s(&u.machine),
    })
}

fn validate(files: &[String], c: &RunConfig, verbose: bool) -> Result<()> {
    let mut contents = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).map_err(|e| anyhow::anyhow!("Could not read rules file {f}: {e}"))?;
        contents.push((f.clone(), text));
    }
    let results = harrier_falco::validate::validate(&contents, &c.load_options());
    let ok = results.iter().all(|r| r.successful);
    if c.json_output {
        println!("{}", harrier_falco::validate::json(&results, &contents));
    } else {
        println!("{}", harrier_falco::validate::summary(&results, &contents));
    }
    if verbose {
        for r in results.iter().filter(|r| r.successful && !r.warnings.is_empty()) {
            say!("{}", harrier_falco::validate::verbose(r, &contents));
        }
    }
    if !ok {
        // Falco's exit: the summary again as the error.
        bail!("{}", harrier_falco::validate::summary(&results, &contents));
    }
    Ok(())
}

fn list_fields(c: &RunConfig, source: &str, names_only: bool, format: Format) -> Result<()> {
    if source.is_empty() || source == "syscall" {
        print!("{}", harrier_falco::lists::fields(names_only, format));
    }
    let libs: Vec<&harrier_plugin::Library> = c.plugins.iter().map(|l| &*l.lib).collect();
    for f in c.plugin_sources.iter().filter(|f| source.is_empty() || f.source == source) {
        print!("{}", harrier_falco::lists::plugin_fields(&f.source, &libs, f, names_only));
    }
    if !source.is_empty() && source != "syscall" && !c.plugin_sources.iter().any(|f| f.source == source) {
        bail!("Unknown event source: {source}");
    }
    Ok(())
}

/// --plugin-info NAME (or its library's path): what it declares, its init schema and
/// suggested open params.
fn plugin_info(c: &RunConfig, p: &str) -> Result<()> {
    let names = |l: &harrier_engine::plugins::Loaded| {
        l.lib.name == p
            || l.lib.path == p
            || std::path::Path::new(&l.lib.path).file_name().is_some_and(|f| f == p)
    };
    if let Some(l) = c.plugins.iter().find(|l| names(l)) {
        let params = harrier_plugin::Plugin::init(l.lib.clone(), &l.init_config)
            .ok()
            .and_then(|mut s| s.list_open_params());
        print!("{}", harrier_falco::lists::plugin(&l.lib, Some(params)));
        return Ok(());
    }
    let container = matches!(p, "container" | "libcontainer.so") || p.ends_with("/libcontainer.so");
    if c.container_plugin && container {
        print!("{}", harrier_falco::lists::container_plugin(true));
        return Ok(());
    }
    bail!("plugin '{p}' is not loaded (load_plugins names the plugins to load)")
}

fn list_events(format: Format) -> Result<()> {
    print!("{}", harrier_falco::lists::events(format));
    Ok(())
}

/// Whether the binary was started under the name `falco` (a link or a copy).
pub fn called_as_falco() -> bool {
    std::env::args_os()
        .next()
        .and_then(|a| std::path::Path::new(&a).file_name().map(|n| n == "falco"))
        .unwrap_or(false)
}

/// The time at the start of Falco's log lines: ISO 8601 in UTC, or ctime's form.
fn log_time(iso: bool) -> String {
    let now = chrono::Utc::now();
    match iso {
        true => now.format("%Y-%m-%dT%H:%M:%S+0000").to_string(),
        false => now.format("%a %b %e %H:%M:%S %Y").to_string(),
    }
}
