//! One JSON alert per POST (Falco's http_output; what Falcosidekick and
//! event-generator receive), over kept-alive connections, several requests
//! in flight: [`Http::lanes`] gives one sink per lane, sharing a pool.

use crate::alert::{Alert, JsonShape};
use crate::lane::Lane;
use crate::queue::Queued;
use crate::sinks::{Sink, MAX_BACKOFF};
use crate::LineFormat;
use anyhow::{anyhow, Result};
use std::time::Duration;

/// Requests in flight per HTTP output (one connection each).
pub const IN_FLIGHT: usize = 4;

#[derive(Clone)]
pub struct Http {
    url: String,
    agent: ureq::Agent,
    shape: JsonShape,
    body: Vec<u8>,
    /// Retries of an alert the receiver answered 5xx (a receiver that is down
    /// altogether is retried until it is back or the exit deadline passes).
    pub retries: u32,
    /// The first retry's wait, doubled each time up to 1 s.
    pub backoff: Duration,
}

enum Failure {
    /// The receiver refused this alert (4xx): retrying will not help.
    Refused(anyhow::Error),
    /// The receiver failed on it (5xx).
    Server(anyhow::Error),
    /// No answer: the receiver is down or unreachable.
    Down(anyhow::Error),
}

impl Http {
    pub fn new(url: &str, shape: JsonShape) -> Result<Http> {
        if !url.starts_with("http://") {
            return Err(anyhow!("http output url '{url}' must start with http:// (TLS is not built in)"));
        }
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(5))
            .max_idle_connections_per_host(IN_FLIGHT * 2)
            .build();
        Ok(Http {
            url: url.to_string(),
            agent,
            shape,
            body: Vec::with_capacity(4096),
            retries: 3,
            backoff: Duration::from_millis(50),
        })
    }

    /// `n` sinks sharing this one's connection pool: `n` requests in flight.
    pub fn lanes(self, n: usize) -> Vec<Box<dyn Sink>> {
        (0..n.max(1)).map(|_| Box::new(self.clone()) as Box<dyn Sink>).collect()
    }

    /// POSTs `line` (JSON) without its newline: that ends a line in a file, not a body.
    fn post(&self, line: &[u8]) -> Result<(), Failure> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let r = self.agent.post(&self.url).set("Content-Type", "application/json").send_bytes(body);
        let (code, resp) = match r {
            Ok(resp) => (200, resp),
            Err(ureq::Error::Status(code, resp)) => (code, resp),
            // ureq names the url in its errors.
            Err(e) => return Err(Failure::Down(anyhow!("{e}"))),
        };
        // Read the answer to its end: only then does the connection go back to the pool.
        let _ = std::io::copy(&mut resp.into_reader(), &mut std::io::sink());
        match code {
            200..=399 => Ok(()),
            400..=499 => Err(Failure::Refused(anyhow!("{} answered {code}", self.url))),
            _ => Err(Failure::Server(anyhow!("{} answered {code}", self.url))),
        }
    }
}

impl Sink for Http {
    fn lines(&self) -> Option<LineFormat> {
        Some(Some(self.shape))
    }

    fn send(&mut self, alert: &Alert) -> Result<()> {
        self.body.clear();
        alert.write_json(self.shape, &mut self.body);
        match self.post(&self.body) {
            Ok(()) => Ok(()),
            Err(Failure::Refused(e) | Failure::Server(e) | Failure::Down(e)) => Err(e),
        }
    }

    fn send_batch(&mut self, batch: &[Queued], lane: &mut Lane) -> usize {
        for (i, a) in batch.iter().enumerate() {
            let line = match a.alert() {
                Some(alert) => {
                    let mut body = std::mem::take(&mut self.body);
                    body.clear();
                    alert.write_json(self.shape, &mut body);
                    self.body = body;
                    &self.body[..]
                }
                None => a.line().unwrap_or_default(),
            };
            let (mut wait, mut server_errors) = (self.backoff, 0);
            loop {
                match self.post(line) {
                    Ok(()) => break,
                    Err(Failure::Refused(e)) => {
                        lane.reject(a, &e);
                        break;
                    }
                    Err(Failure::Server(e)) if server_errors >= self.retries => {
                        lane.reject(a, &e);
                        break;
                    }
                    Err(Failure::Server(e)) => {
                        server_errors += 1;
                        lane.trouble(&e);
                    }
                    Err(Failure::Down(e)) => lane.trouble(&e),
                }
                if !lane.pause(wait) {
                    return i;
                }
                wait = (wait * 2).min(MAX_BACKOFF);
            }
        }
        batch.len()
    }
}
