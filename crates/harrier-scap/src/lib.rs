//! Falco/sysdig legacy `.scap` captures: a hardened reader of every
//! historical block version, and their conversion into Harrier's exit-only
//! events.
//!
//! ```no_run
//! use harrier_scap::{Converted, Converter};
//! let stats = Converter::open("in.scap".as_ref())?.run(|item| {
//!     match item {
//!         Converted::Event(bytes) => { /* a Harrier wire record */ }
//!         Converted::Foreign(f) => { /* procexit, signaldeliver, ... */ }
//!         Converted::Snapshot(s) => { /* processes, fds, users, ... */ }
//!     }
//!     Ok(())
//! })?;
//! print!("{}", stats.table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What the file format is and how each piece maps onto Harrier's is in
//! docs/legacy-scap.md.

mod convert;
mod error;
pub mod event;
mod lifecycle;
pub mod meta;
pub mod snapshot;
pub mod source;
mod stats;
pub mod table;
pub mod testing;
pub mod values;

pub use convert::{ConvertError, Converted, Converter, ForeignEvent, SinkError};
pub use error::{Error, Result};
pub use snapshot::*;
pub use stats::{Stats, TypeStats};
