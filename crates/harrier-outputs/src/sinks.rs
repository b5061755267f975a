//! Where alerts go. Each sink runs on its own worker thread (see lib.rs), so
//! a slow disk or a dead HTTP receiver only ever fills its own queue.

use crate::alert::{Alert, JsonShape};
use anyhow::{anyhow, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::time::Duration;

/// One destination. `send` may block (it runs on the sink's own thread).
pub trait Sink: Send {
    fn send(&mut self, alert: &Alert) -> Result<()>;
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Text or JSON lines on stdout.
pub struct Stdout {
    pub json: Option<JsonShape>,
    out: BufWriter<std::io::Stdout>,
}

impl Stdout {
    pub fn new(json: Option<JsonShape>) -> Stdout {
        Stdout { json, out: BufWriter::new(std::io::stdout()) }
    }
}

fn line(alert: &Alert, json: Option<JsonShape>) -> String {
    match json {
        Some(shape) => alert.json(shape).to_string(),
        None => alert.text(),
    }
}

impl Sink for Stdout {
    fn send(&mut self, alert: &Alert) -> Result<()> {
        writeln!(self.out, "{}", line(alert, self.json)).context("writing to stdout")?;
        // One alert is one line a reader waits for: flush now, not at 8 KiB.
        self.out.flush().context("writing to stdout")
    }
}

/// Appends lines to a file (Falco's file_output).
pub struct FileSink {
    json: Option<JsonShape>,
    path: String,
    out: BufWriter<File>,
}

impl FileSink {
    /// Opens (creates) the file at once, so a bad path is a start-up error.
    pub fn open(path: &str, json: Option<JsonShape>) -> Result<FileSink> {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {path}"))?;
        Ok(FileSink { json, path: path.to_string(), out: BufWriter::new(f) })
    }
}

impl Sink for FileSink {
    fn send(&mut self, alert: &Alert) -> Result<()> {
        writeln!(self.out, "{}", line(alert, self.json)).with_context(|| format!("writing {}", self.path))?;
        self.out.flush().with_context(|| format!("writing {}", self.path))
    }
}

/// One JSON alert per POST (Falco's http_output; what Falcosidekick and
/// event-generator receive). Retries with exponential backoff.
pub struct Http {
    url: String,
    agent: ureq::Agent,
    shape: JsonShape,
    pub retries: u32,
    pub backoff: Duration,
}

impl Http {
    pub fn new(url: &str, shape: JsonShape) -> Result<Http> {
        if !url.starts_with("http://") {
            return Err(anyhow!("http output url '{url}' must start with http:// (TLS is not built in)"));
        }
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(5)).build();
        Ok(Http { url: url.to_string(), agent, shape, retries: 3, backoff: Duration::from_millis(100) })
    }
}

impl Sink for Http {
    fn send(&mut self, alert: &Alert) -> Result<()> {
        let body = alert.json(self.shape).to_string();
        let mut wait = self.backoff;
        let mut attempt = 0;
        loop {
            let r = self.agent.post(&self.url).set("Content-Type", "application/json").send_string(&body);
            match r {
                Ok(_) => return Ok(()),
                // A 4xx will not get better by retrying (e.g. a rejected alert).
                Err(ureq::Error::Status(code, _)) if (400..500).contains(&code) => {
                    return Err(anyhow!("{} answered {code}", self.url))
                }
                Err(e) if attempt >= self.retries => return Err(anyhow!("posting to {}: {e}", self.url)),
                Err(_) => {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_secs(5));
                    attempt += 1;
                }
            }
        }
    }
}
