//! `harrier export FILE --format parquet -o OUT`: a capture file as Parquet
//! (arrow-rs), one row per syscall (and foreign) event, for DuckDB, Spark,
//! Trino... Typed columns for what every query needs, the common parameters
//! as their own columns, the rest as one JSON text column.

use crate::capread::{Capture, Ev};
use crate::read_cmd::Replayed;
use anyhow::{bail, Context, Result};
use arrow_array::builder::{
    BooleanBuilder, Int64Builder, StringBuilder, TimestampNanosecondBuilder, UInt32Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use harrier_schema::decode::{decode, Event};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::{Map, Value as Json};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct ExportArgs {
    /// A capture file.
    file: String,
    /// Output format (parquet).
    #[arg(long, default_value = "parquet")]
    format: String,
    /// Where to write.
    #[arg(long, short = 'o')]
    output: String,
}

/// Rows per record batch (and row group granularity).
const BATCH: usize = 65536;

/// Parameters with their own column; the rest go to `params` (JSON).
const INT_COLS: [&str; 4] = ["fd", "flags", "mode", "size"];
const TEXT_COLS: [&str; 2] = ["path", "addr"];

fn schema() -> Arc<Schema> {
    let mut f = vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), false),
        Field::new("host", DataType::Utf8, false),
        Field::new("pid", DataType::UInt32, false),
        Field::new("tid", DataType::UInt32, false),
        Field::new("comm", DataType::Utf8, false),
        Field::new("exe", DataType::Utf8, false),
        Field::new("syscall", DataType::Utf8, false),
        Field::new("ret", DataType::Int64, true),
    ];
    f.extend(INT_COLS.iter().map(|c| Field::new(*c, DataType::Int64, true)));
    f.extend(TEXT_COLS.iter().map(|c| Field::new(*c, DataType::Utf8, true)));
    f.push(Field::new("foreign", DataType::Boolean, false));
    f.push(Field::new("params", DataType::Utf8, false));
    Arc::new(Schema::new(f))
}

struct Cols {
    ts: TimestampNanosecondBuilder,
    host: StringBuilder,
    pid: UInt32Builder,
    tid: UInt32Builder,
    comm: StringBuilder,
    exe: StringBuilder,
    syscall: StringBuilder,
    ret: Int64Builder,
    ints: [Int64Builder; 4],
    texts: [StringBuilder; 2],
    foreign: BooleanBuilder,
    params: StringBuilder,
    rows: usize,
}

impl Cols {
    fn new() -> Cols {
        Cols {
            ts: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            host: StringBuilder::new(),
            pid: UInt32Builder::new(),
            tid: UInt32Builder::new(),
            comm: StringBuilder::new(),
            exe: StringBuilder::new(),
            syscall: StringBuilder::new(),
            ret: Int64Builder::new(),
            ints: std::array::from_fn(|_| Int64Builder::new()),
            texts: std::array::from_fn(|_| StringBuilder::new()),
            foreign: BooleanBuilder::new(),
            params: StringBuilder::new(),
            rows: 0,
        }
    }

    fn batch(&mut self, schema: &Arc<Schema>) -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.host.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.comm.finish()),
            Arc::new(self.exe.finish()),
            Arc::new(self.syscall.finish()),
            Arc::new(self.ret.finish()),
        ];
        cols.extend(self.ints.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        cols.extend(self.texts.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        cols.push(Arc::new(self.foreign.finish()));
        cols.push(Arc::new(self.params.finish()));
        self.rows = 0;
        Ok(RecordBatch::try_new(schema.clone(), cols)?)
    }
}

/// Splits an event's JSON object (as `read --json` prints it) into the columns.
fn row(c: &mut Cols, host: &str, exe: &str, mut obj: Map<String, Json>, ret: Option<i64>, foreign: bool) {
    let ts = obj.remove("ts").and_then(|v| v.as_u64()).unwrap_or(0);
    c.ts.append_value(ts as i64);
    c.host.append_value(host);
    c.pid.append_value(obj.remove("pid").and_then(|v| v.as_u64()).unwrap_or(0) as u32);
    c.tid.append_value(obj.remove("tid").and_then(|v| v.as_u64()).unwrap_or(0) as u32);
    c.comm.append_value(obj.remove("comm").as_ref().and_then(Json::as_str).unwrap_or(""));
    c.exe.append_value(exe);
    c.syscall.append_value(obj.remove("syscall").as_ref().and_then(Json::as_str).unwrap_or(""));
    obj.remove("ret");
    obj.remove("foreign");
    c.ret.append_option(ret);
    for (i, name) in INT_COLS.iter().enumerate() {
        let v = obj.get(*name).and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())));
        if v.is_some() {
            obj.remove(*name);
        }
        c.ints[i].append_option(v);
    }
    // path: the kernel-resolved path when there is one, else the caller's.
    let path = ["fullpath", "path", "filename", "pathname"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Json::as_str).filter(|s| !s.is_empty()).map(String::from));
    c.texts[0].append_option(path);
    let addr = ["addr", "peer"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Json::as_str).filter(|s| !s.is_empty()).map(String::from));
    c.texts[1].append_option(addr);
    c.foreign.append_value(foreign);
    c.params.append_value(Json::Object(obj).to_string());
    c.rows += 1;
}

pub fn export(a: ExportArgs) -> Result<()> {
    if a.format != "parquet" {
        bail!("unknown export format '{}' (parquet is the one there is)", a.format);
    }
    let mut cap = Capture::open(&a.file)?;
    let out = std::fs::File::create(&a.output).with_context(|| format!("creating {}", a.output))?;
    let props =
        WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?)).build();
    let schema = schema();
    let mut w = ArrowWriter::try_new(out, schema.clone(), Some(props))?;
    let (host, off) = (cap.r.info.host.clone(), cap.r.info.epoch_offset);
    let mut st = Replayed::default();
    let mut c = Cols::new();
    let mut rows = 0u64;
    cap.events(&mut st, |st, ev| {
        match ev {
            Ev::Syscall { v, bytes, .. } => {
                let (pid, comm) = st.who(v.header.tid);
                let exe = st.state.tables.process(v.header.tid).map_or("", |p| &p.exe);
                if let Ok(Event::Syscall(e)) = decode(bytes) {
                    if let Json::Object(obj) = e.to_json(pid, comm, off) {
                        row(&mut c, &host, exe, obj, (!e.header.no_ret).then_some(e.ret), false);
                    }
                }
            }
            Ev::Foreign { f, .. } => {
                let (pid, comm) = st.who(f.tid);
                let exe = st.state.tables.process(f.tid).map_or("", |p| &p.exe);
                let ret = f.param("res").and_then(|s| s.parse().ok());
                if let Json::Object(obj) = crate::text::foreign_json(f, pid, comm, off) {
                    row(&mut c, &host, exe, obj, ret, true);
                }
            }
        }
        if c.rows >= BATCH {
            rows += c.rows as u64;
            w.write(&c.batch(&schema)?)?;
        }
        Ok(true)
    })?;
    rows += c.rows as u64;
    w.write(&c.batch(&schema)?)?;
    w.close().with_context(|| format!("writing {}", a.output))?;
    say!("harrier: exported {rows} events to {}", a.output);
    Ok(())
}
