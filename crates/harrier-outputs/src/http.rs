//! One JSON alert per POST (Falco's http_output; what Falcosidekick and
//! event-generator receive), several requests in flight: [`Http::lanes`] gives
//! one sink per lane, sharing a pool. http:// or https:// (rustls; Falco's
//! trust options, mTLS, insecure), optionally gzip bodies, kept-alive
//! connections or one per alert, the receiver's answers echoed to stdout.

use crate::alert::{Alert, JsonShape};
use crate::lane::Lane;
use crate::queue::Queued;
use crate::sinks::{Sink, MAX_BACKOFF};
use crate::tls::ClientTls;
use crate::LineFormat;
use anyhow::{anyhow, Result};
use std::io::Write;
use std::time::Duration;

/// Requests in flight per HTTP output (one connection each).
pub const IN_FLIGHT: usize = 4;

/// Falco's http_output options (and the request timeout, Harrier's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The User-Agent header (Falco's default: falcosecurity/falco).
    pub user_agent: String,
    /// https:// trust anchors, mTLS, insecure.
    pub tls: ClientTls,
    /// Bodies gzip-compressed, sent with Content-Encoding: gzip.
    pub compress_uploads: bool,
    /// Connections kept and reused; false: a new connection per alert
    /// (`Connection: close`).
    pub keep_alive: bool,
    /// Each answer's body written to stdout.
    pub echo: bool,
    /// Timeouts of one alert's request tolerated in a row before it fails
    /// (Falco's: the alert is tried at most this many times more).
    pub max_consecutive_timeouts: u32,
    /// A request unanswered this long has timed out.
    pub timeout: Duration,
}

impl Default for HttpOptions {
    /// Falco's defaults, except that connections are kept alive (what
    /// `--http-output` and the benchmarks use; falco.yaml's default false is
    /// applied by the config reader).
    fn default() -> HttpOptions {
        HttpOptions {
            user_agent: "falcosecurity/falco".into(),
            tls: ClientTls::default(),
            compress_uploads: false,
            keep_alive: true,
            echo: false,
            max_consecutive_timeouts: 5,
            timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Clone)]
pub struct Http {
    url: String,
    agent: ureq::Agent,
    shape: JsonShape,
    opts: HttpOptions,
    body: Vec<u8>,
    gz: Vec<u8>,
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
    /// It took the request and did not answer in time.
    Timeout(anyhow::Error),
    /// No answer: the receiver is down or unreachable.
    Down(anyhow::Error),
}

/// Whether a transport error is a timeout (somewhere in its chain of causes).
fn timed_out(e: &ureq::Transport) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

impl Http {
    pub fn new(url: &str, shape: JsonShape) -> Result<Http> {
        Http::with_options(url, shape, HttpOptions::default())
    }

    /// An https:// url reads its TLS files here: a missing or unreadable one is
    /// an error naming its key and file.
    pub fn with_options(url: &str, shape: JsonShape, opts: HttpOptions) -> Result<Http> {
        let https = url.starts_with("https://");
        if !https && !url.starts_with("http://") {
            return Err(anyhow!("http_output.url '{url}' must start with http:// or https://"));
        }
        let mut b = ureq::AgentBuilder::new().timeout(opts.timeout).user_agent(&opts.user_agent);
        b = if opts.keep_alive {
            b.max_idle_connections_per_host(IN_FLIGHT * 2)
        } else {
            b.max_idle_connections(0).max_idle_connections_per_host(0)
        };
        if https {
            b = b.tls_config(opts.tls.config()?);
        }
        Ok(Http {
            url: url.to_string(),
            agent: b.build(),
            shape,
            opts,
            body: Vec::with_capacity(4096),
            gz: Vec::new(),
            retries: 3,
            backoff: Duration::from_millis(50),
        })
    }

    /// `n` sinks sharing this one's connection pool: `n` requests in flight.
    pub fn lanes(self, n: usize) -> Vec<Box<dyn Sink>> {
        (0..n.max(1)).map(|_| Box::new(self.clone()) as Box<dyn Sink>).collect()
    }

    /// POSTs `line` (JSON) without its newline: that ends a line in a file, not a body.
    fn post(&mut self, line: &[u8]) -> Result<(), Failure> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let mut req = self.agent.post(&self.url).set("Content-Type", "application/json");
        if !self.opts.keep_alive {
            req = req.set("Connection", "close");
        }
        let r = if self.opts.compress_uploads {
            self.gz.clear();
            let mut enc =
                flate2::write::GzEncoder::new(std::mem::take(&mut self.gz), flate2::Compression::fast());
            let _ = enc.write_all(body);
            self.gz = enc.finish().unwrap_or_default();
            req.set("Content-Encoding", "gzip").send_bytes(&self.gz)
        } else {
            req.send_bytes(body)
        };
        let (code, resp) = match r {
            Ok(resp) => (200, resp),
            Err(ureq::Error::Status(code, resp)) => (code, resp),
            // ureq names the url in its errors.
            Err(ureq::Error::Transport(t)) if timed_out(&t) => return Err(Failure::Timeout(anyhow!("{t}"))),
            Err(e) => return Err(Failure::Down(anyhow!("{e}"))),
        };
        // Read the answer to its end: only then does the connection go back to the pool.
        if self.opts.echo {
            let mut answer = Vec::new();
            let _ = std::io::copy(&mut resp.into_reader(), &mut answer);
            if !answer.is_empty() {
                if !answer.ends_with(b"\n") {
                    answer.push(b'\n');
                }
                let _ = std::io::stdout().lock().write_all(&answer);
            }
        } else {
            let _ = std::io::copy(&mut resp.into_reader(), &mut std::io::sink());
        }
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
        let body = std::mem::take(&mut self.body);
        let r = self.post(&body);
        self.body = body;
        match r {
            Ok(()) => Ok(()),
            Err(Failure::Refused(e) | Failure::Server(e) | Failure::Timeout(e) | Failure::Down(e)) => Err(e),
        }
    }

    fn send_batch(&mut self, batch: &[Queued], lane: &mut Lane) -> usize {
        for (i, a) in batch.iter().enumerate() {
            let mut body = std::mem::take(&mut self.body);
            let line = match a.alert() {
                Some(alert) => {
                    body.clear();
                    alert.write_json(self.shape, &mut body);
                    &body[..]
                }
                None => a.line().unwrap_or_default(),
            };
            let (mut wait, mut server_errors, mut timeouts) = (self.backoff, 0, 0);
            let done = loop {
                match self.post(line) {
                    Ok(()) => break true,
                    Err(Failure::Refused(e)) => {
                        lane.reject(a, &e);
                        break true;
                    }
                    Err(Failure::Server(e)) if server_errors >= self.retries => {
                        lane.reject(a, &e);
                        break true;
                    }
                    Err(Failure::Timeout(e)) if timeouts >= self.opts.max_consecutive_timeouts => {
                        lane.reject(a, &anyhow!("{e} ({} timeouts in a row)", timeouts + 1));
                        break true;
                    }
                    Err(Failure::Timeout(e)) => {
                        timeouts += 1;
                        lane.trouble(&e);
                        // A timeout has waited already: try again at once.
                        continue;
                    }
                    Err(Failure::Server(e)) => {
                        server_errors += 1;
                        lane.trouble(&e);
                    }
                    Err(Failure::Down(e)) => lane.trouble(&e),
                }
                if !lane.pause(wait) {
                    break false;
                }
                wait = (wait * 2).min(MAX_BACKOFF);
            };
            self.body = body;
            if !done {
                return i;
            }
        }
        batch.len()
    }
}
