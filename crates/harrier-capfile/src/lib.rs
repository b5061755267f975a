//! Harrier's capture file: a versioned, block-based file of exit-only events.
//!
//! ```text
//! file header (magic, format version, schema version, JSON info: host, kernel, settings)
//! snapshot block (the state tables at capture start, JSON)
//! event blocks  (wire records as the rings deliver them, and foreign records,
//!                packed as varints by default; zstd by default; each counts
//!                the drops seen while it filled)
//! index block   (totals, one entry per event block: offset and time span)
//! trailer       (index offset, end magic)
//! ```
//!
//! docs/capture-format.md gives every byte. Writing:
//!
//! ```
//! use harrier_capfile::{FileInfo, ForeignEvent, Options, Writer, Reader, Item};
//! let mut w = Writer::new(Vec::new(), &FileInfo::default(), Options::default())?;
//! w.snapshot(&harrier_state::Snapshot::default())?;
//! w.foreign(&ForeignEvent { ts: 1, tid: 2, name: "mmap".into(), params: vec![] })?;
//! let (bytes, summary) = w.finish()?;
//! assert_eq!(summary.records, 1);
//! let mut r = Reader::new(std::io::Cursor::new(bytes)).unwrap();
//! assert!(matches!(r.next().unwrap(), Some(Item::Snapshot(_))));
//! assert!(matches!(r.next().unwrap(), Some(Item::Foreign(f)) if f.name == "mmap"));
//! assert!(r.next().unwrap().is_none());
//! assert_eq!(r.stop(), Some(&harrier_capfile::Stop::Complete));
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod foreign;
pub mod format;
pub mod pack;
pub mod reader;
mod unpack;
mod upgrade;
pub mod writer;

pub use foreign::{Foreign, ForeignEvent};
pub use format::{FileInfo, IndexEntry, Totals, FORMAT_VERSION};
pub use reader::{Error, Item, ReadStats, Reader, Stop};
pub use writer::{Options, Summary, Writer};

/// The event schema version this build writes (schema/events.tbl).
pub const SCHEMA_VERSION: u16 = harrier_schema::SCHEMA_VERSION as u16;
