//! `harrier convert`: legacy Falco/sysdig .scap captures into Harrier's
//! exit-only events (crates/harrier-scap): a Harrier capture file, the
//! per-type table (`--stats`), or the converted stream as JSON lines (`--json`).

use anyhow::{bail, Context};
use harrier_scap::{Converted, Converter, Snapshot};
use harrier_schema::decode::{decode, Event, Value};
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The legacy capture (.scap, gzip-compressed or not).
    input: PathBuf,
    /// Write the converted capture here, as a Harrier capture file (`harrier read`, `run --replay`).
    output: Option<PathBuf>,
    /// zstd level of the written file.
    #[arg(long, default_value_t = 3)]
    compress_level: i32,
    /// Write the file uncompressed.
    #[arg(long)]
    no_compress: bool,
    /// Store the events as wire records (block encoding 0), not packed.
    #[arg(long)]
    no_pack: bool,
    /// Print what was done per event type (merged, generic, foreign, skipped and why).
    #[arg(long)]
    stats: bool,
    /// Print the converted stream as JSON lines: syscall events as `capture --json`
    /// prints them, foreign events and snapshots tagged by kind.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ConvertArgs) -> anyhow::Result<()> {
    if let Some(out) = &args.output {
        if args.json {
            bail!("--json prints the stream; with an output file give --stats only");
        }
        let level = (!args.no_compress).then_some(args.compress_level);
        let stats = crate::convert_file::write(&args.input, out, level, !args.no_pack)?;
        if args.stats {
            print!("{}", stats.table());
        }
        return Ok(());
    }
    if !args.stats && !args.json {
        bail!("nothing to do: give an output file, --stats or --json");
    }
    let conv = Converter::open(&args.input).with_context(|| args.input.display().to_string())?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    // tid → (pid, comm), from the process list and exec events, for the JSON lines.
    let mut threads: HashMap<u32, (u32, String)> = HashMap::new();
    let json_on = args.json;
    let stats = conv
        .run(|item| {
            if !json_on {
                return Ok(());
            }
            let line = match item {
                Converted::Event(b) => match decode(b).map_err(|e| e.to_string())? {
                    Event::Syscall(e) => {
                        if e.syscall.name == "execve" && e.ret == 0 {
                            // The new image's name, as the kernel's comm (argv[0]'s base name, 15 bytes).
                            if let Some(Value::Bytes(argv)) = e.param("argv") {
                                let arg0 = argv.split(|&c| c == 0).next().unwrap_or_default();
                                let base = arg0.rsplit(|&c| c == b'/').next().unwrap_or_default();
                                let comm = String::from_utf8_lossy(&base[..base.len().min(15)]).into_owned();
                                let pid = threads.get(&e.header.tid).map_or(e.header.tid, |t| t.0);
                                threads.insert(e.header.tid, (pid, comm));
                            }
                        }
                        let (pid, comm) =
                            threads.get(&e.header.tid).cloned().unwrap_or((e.header.tid, String::new()));
                        // ts is already wall-clock (the legacy capture's).
                        e.to_json(pid, &comm, 0)
                    }
                    Event::Meta(..) => return Ok(()),
                },
                Converted::Foreign(f) => {
                    let params: serde_json::Map<String, serde_json::Value> =
                        f.params.into_iter().map(|(k, v)| (k, json!(v))).collect();
                    json!({"foreign": f.name, "ts": f.ts, "tid": f.tid, "params": params})
                }
                Converted::Snapshot(s) => {
                    if let Snapshot::Process(p) = &s {
                        threads.insert(p.tid as u32, (p.pid as u32, p.comm.clone()));
                    }
                    json!({"snapshot": format!("{s:?}")})
                }
            };
            writeln!(out, "{line}")?;
            Ok(())
        })
        .with_context(|| args.input.display().to_string())?;
    out.flush()?;
    drop(out);
    if args.stats {
        // With --json on stdout the table goes to stderr, so the JSON stays clean.
        if args.json {
            eprint!("{}", stats.table());
        } else {
            print!("{}", stats.table());
        }
    }
    Ok(())
}
