//! The reader's wake-up (bpf/include/fswatch/doorbell.h): a one-page BPF
//! ringbuf a CPU writes one record to when one of its rings passes a quarter
//! full. The reader sleeps on it (epoll, through libbpf's ring_buffer) with
//! its timer as the timeout.

use anyhow::{bail, Result};
use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why `Watcher::wait` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// A ring passed its wake level: drain now.
    Doorbell,
    /// The timeout passed (or a signal came) with every ring below its wake level.
    Timeout,
}

pub(crate) struct Doorbell {
    rb: RingBuffer<'static>,
    /// Doorbell records consumed (the callback's count).
    rung: Arc<AtomicU64>,
}

impl Doorbell {
    pub fn new(map: &dyn MapCore) -> Result<Doorbell> {
        let rung = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&rung);
        let mut b = RingBufferBuilder::new();
        b.add(map, move |_| {
            count.fetch_add(1, Ordering::Relaxed);
            0
        })?;
        Ok(Doorbell { rb: b.build()?, rung })
    }

    /// Sleeps until a doorbell record is there or `timeout` passes
    /// (rounded up to whole milliseconds, epoll's unit); consumes the records.
    pub fn wait(&self, timeout: Duration) -> Result<Woke> {
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128 - 1) as u64;
        let before = self.rung.load(Ordering::Relaxed);
        let n = self.rb.poll_raw(Duration::from_millis(ms));
        if n < 0 && n != -libc::EINTR {
            bail!("waiting on the doorbell: {}", std::io::Error::from_raw_os_error(-n));
        }
        Ok(if self.rung.load(Ordering::Relaxed) > before { Woke::Doorbell } else { Woke::Timeout })
    }
}
