//! Reading a capture file, shared by `read`, `export` and `run --replay`:
//! open it, hand over its items in order, end with the reader's error (naming
//! the byte and how many events came before) or a note for a cut-off file.
//! `events` adds the state replay the printers need: snapshots restored,
//! life-cycle records applied, each syscall event seen with its thread's state.

use crate::read_cmd::Replayed;
use anyhow::{bail, Context, Result};
use harrier_capfile::{Foreign, Item, Reader, Stop};
use harrier_schema::view::SyscallView;
use std::fs::File;
use std::io::BufReader;

pub struct Capture {
    pub path: String,
    pub r: Reader<BufReader<File>>,
}

/// One event as `events` hands it over, with its number in the file (syscall
/// and foreign events counted, from 1), and its raw record for syscalls.
pub enum Ev<'a> {
    Syscall { num: u64, v: &'a SyscallView<'a>, bytes: &'a [u8] },
    Foreign { num: u64, f: &'a Foreign<'a> },
}

/// Whether the caller wants more (false: stop quietly, e.g. stdout closed).
pub type More = bool;

impl Capture {
    pub fn open(path: &str) -> Result<Capture> {
        let r = match Reader::open(path).with_context(|| format!("opening {path}"))? {
            Ok(r) => r,
            Err(e) => bail!("{path}: {e}"),
        };
        Ok(Capture { path: path.to_string(), r })
    }

    /// Every item to `f` until the end, an error, or `f` says stop. A reader
    /// error ends it as "FILE: error (after N events)".
    pub fn items(&mut self, mut f: impl FnMut(Item<'_>) -> Result<More>) -> Result<()> {
        let mut n = 0u64;
        loop {
            let item = match self.r.next() {
                Ok(Some(i)) => i,
                Ok(None) => break,
                Err(e) => bail!("{}: {e} (after {n} events)", self.path),
            };
            n += u64::from(!matches!(item, Item::Snapshot(_)));
            if !f(item)? {
                return Ok(());
            }
        }
        self.say_stop();
        Ok(())
    }

    /// Syscall and foreign events with the state replayed around them (see
    /// `Replayed`); records of unknown type or layout are counted, said once
    /// at the end, and skipped.
    pub fn events(
        &mut self,
        st: &mut Replayed,
        mut f: impl FnMut(&Replayed, Ev<'_>) -> Result<More>,
    ) -> Result<()> {
        let (mut num, mut bad) = (0u64, 0u64);
        self.items(|item| {
            match item {
                Item::Snapshot(s) => st.snapshot(&s),
                Item::Event(bytes) => {
                    let v = match SyscallView::new(bytes) {
                        Ok(Some(v)) => v,
                        Ok(None) => {
                            st.meta(bytes);
                            return Ok(true);
                        }
                        Err(_) => {
                            bad += 1;
                            return Ok(true);
                        }
                    };
                    num += 1;
                    st.before(&v);
                    let more = f(st, Ev::Syscall { num, v: &v, bytes })?;
                    st.after(&v);
                    return Ok(more);
                }
                Item::Foreign(fe) => {
                    num += 1;
                    return f(st, Ev::Foreign { num, f: &fe });
                }
            }
            Ok(true)
        })?;
        if bad > 0 {
            say!("harrier: note: {bad} events of unknown type or layout skipped");
        }
        Ok(())
    }

    /// The reader's end: a note for a cut-off file.
    fn say_stop(&self) {
        if let Some(Stop::Truncated { offset, reason }) = self.r.stop() {
            say!(
                "harrier: note: {} is cut off at byte {offset}: {reason}; read up to there ({} events)",
                self.path,
                self.r.stats().records
            );
        }
    }
}
