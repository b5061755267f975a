//! A live `harrier run` for the CLI tests: started with its output read
//! line by line, killed and reaped on drop.

use harrier_capture::testing::slack;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

pub const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

/// Killed and reaped on drop, so a failing assertion leaves no sensor behind.
pub struct Reaped(pub Child);
impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `harrier run ARGS`, with its stdout and stderr lines as they come.
#[allow(dead_code)] // plugins_cli starts other subcommands only
pub fn harrier_run(args: &[&str]) -> (Reaped, Receiver<String>, Receiver<String>) {
    harrier("run", args)
}

/// `harrier falco ARGS` (Falco's command line), with its lines as they come.
#[allow(dead_code)] // not every test binary runs it
pub fn harrier_falco(args: &[&str]) -> (Reaped, Receiver<String>, Receiver<String>) {
    harrier("falco", args)
}

fn harrier(command: &str, args: &[&str]) -> (Reaped, Receiver<String>, Receiver<String>) {
    let mut child = Command::new(HARRIER)
        .arg(command)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = (lines(child.stdout.take().unwrap()), lines(child.stderr.take().unwrap()));
    (Reaped(child), out, err)
}

fn lines(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line containing `what` (lines before it are passed over).
#[allow(dead_code)] // not every test binary waits on a line
pub fn wait_for(rx: &Receiver<String>, what: &str) -> String {
    loop {
        match rx.recv_timeout(slack(Duration::from_secs(60))) {
            Ok(l) if l.contains(what) => return l,
            Ok(_) => {}
            Err(_) => panic!("no line containing '{what}'"),
        }
    }
}
