//! Domain names in conditions (`fd.sip.name = "kubernetes.default.svc.cluster.local"`),
//! with Falco's semantics: a name is resolved to its addresses off the hot path, at
//! load time and then periodically, and the comparison asks whether the fd's address
//! is among them. Evaluation reads a resolved address list under a read lock and
//! never allocates or resolves.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::time::Duration;

/// How often `harrier run` resolves the names again (Falco refreshes its DNS cache
/// on a timer too; names in rules are few, so a minute costs nothing).
pub const REFRESH_PERIOD: Duration = Duration::from_secs(60);

/// The names of one comparison and the union of their addresses.
#[derive(Debug)]
pub struct NameSet {
    names: Box<[Arc<str>]>,
    addrs: RwLock<Box<[IpAddr]>>,
    /// A round has run: before that neither `=` nor `!=` holds (nothing is known).
    ready: std::sync::atomic::AtomicBool,
}

impl NameSet {
    /// `=` (or `in`, `negate` false) and `!=` (`negate` true): false both ways until
    /// the names were looked up once.
    pub fn matches(&self, ip: IpAddr, negate: bool) -> bool {
        self.ready.load(Ordering::Acquire) && self.contains(ip) != negate
    }

    /// Is `ip` an address of one of the names (IPv4-mapped IPv6 counts as IPv4)?
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.addrs.read().unwrap_or_else(|e| e.into_inner()).contains(&ip)
    }

    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// The addresses as last resolved (for reports and tests).
    pub fn addrs(&self) -> Vec<IpAddr> {
        self.addrs.read().unwrap_or_else(|e| e.into_inner()).to_vec()
    }
}

/// Counters of the resolutions (never silent: a name that does not resolve is counted
/// each round, and its comparisons keep the addresses of its last success, if any).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DnsStats {
    /// Rounds completed (every name tried once per round).
    pub rounds: u64,
    pub lookups: u64,
    pub failures: u64,
}

/// Every name the rules of one rule set compare addresses with.
#[derive(Debug, Default)]
pub struct Resolver {
    sets: Mutex<Vec<Arc<NameSet>>>,
    /// name → its addresses at the last successful lookup.
    known: Mutex<HashMap<Arc<str>, Vec<IpAddr>>>,
    rounds: AtomicU64,
    lookups: AtomicU64,
    failures: AtomicU64,
    /// Signalled at the end of each round (see `wait_rounds`).
    round_done: Condvar,
    round_lock: Mutex<()>,
    /// The last failure, "name: error", for the user.
    last_error: Mutex<Option<String>>,
    /// Told every address of every set after each round (the kernel filter's
    /// copy of them: `on_round`).
    on_round: Mutex<Option<Hook>>,
}

/// What [`Resolver::on_round`] calls with the addresses of all names.
pub type RoundHook = Box<dyn Fn(&[IpAddr]) + Send>;

struct Hook(RoundHook);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl Resolver {
    /// A comparison's name set, empty until the first round resolves it.
    pub fn register(&self, names: &[&str]) -> Arc<NameSet> {
        let mut uniq: Vec<Arc<str>> = Vec::new();
        for n in names {
            if !uniq.iter().any(|u| &**u == *n) {
                uniq.push(Arc::from(*n));
            }
        }
        let set =
            Arc::new(NameSet { names: uniq.into(), addrs: RwLock::new(Box::new([])), ready: false.into() });
        self.sets.lock().unwrap_or_else(|e| e.into_inner()).push(set.clone());
        set
    }

    /// True if no rule compares with a name (nothing to resolve).
    pub fn is_empty(&self) -> bool {
        self.sets.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// Every distinct name, in first-use order.
    pub fn names(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = Vec::new();
        for s in self.sets.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            for n in s.names.iter() {
                if !out.contains(n) {
                    out.push(n.clone());
                }
            }
        }
        out
    }

    /// The first name (in first-use order) whose last addresses include `ip`: what
    /// Falco prints for fd.sip.name. No lookup: only the rules' names are known.
    pub fn name_of(&self, ip: IpAddr) -> Option<Arc<str>> {
        let ip = ip.to_canonical();
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        sets.iter()
            .flat_map(|s| s.names.iter())
            .find(|n| known.get(*n).is_some_and(|a| a.contains(&ip)))
            .cloned()
    }

    pub fn stats(&self) -> DnsStats {
        DnsStats {
            rounds: self.rounds.load(Ordering::Relaxed),
            lookups: self.lookups.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One round: every name resolved with the system's resolver (getaddrinfo: /etc/hosts,
    /// DNS... as nsswitch.conf says), then every comparison's addresses replaced. Blocks
    /// for as long as the lookups take: call it from a thread of its own.
    pub fn refresh(&self) {
        for name in self.names() {
            self.lookups.fetch_add(1, Ordering::Relaxed);
            match resolve(&name) {
                Ok(addrs) => {
                    self.known.lock().unwrap_or_else(|e| e.into_inner()).insert(name, addrs);
                }
                Err(e) => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{name}: {e}"));
                }
            }
        }
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for s in self.sets.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let mut all: Vec<IpAddr> =
                s.names.iter().filter_map(|n| known.get(n)).flatten().copied().collect();
            all.sort();
            all.dedup();
            *s.addrs.write().unwrap_or_else(|e| e.into_inner()) = all.into();
            s.ready.store(true, Ordering::Release);
        }
        self.tell_hook();
        let _g = self.round_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.round_done.notify_all();
    }

    /// Every address of every set, as the sets now hold them.
    pub fn all_addrs(&self) -> Vec<IpAddr> {
        let mut all: Vec<IpAddr> =
            self.sets.lock().unwrap_or_else(|e| e.into_inner()).iter().flat_map(|s| s.addrs()).collect();
        all.sort();
        all.dedup();
        all
    }

    /// Calls `hook` with [`Resolver::all_addrs`] now and after each round: a
    /// copy kept elsewhere (the kernel filter's) follows the sets.
    pub fn on_round(&self, hook: RoundHook) {
        *self.on_round.lock().unwrap_or_else(|e| e.into_inner()) = Some(Hook(hook));
        self.tell_hook();
    }

    fn tell_hook(&self) {
        if let Some(h) = self.on_round.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            (h.0)(&self.all_addrs());
        }
    }

    /// Waits until at least `n` rounds have completed, or `timeout` passed; true if they had.
    pub fn wait_rounds(&self, n: u64, timeout: Duration) -> bool {
        let g = self.round_lock.lock().unwrap_or_else(|e| e.into_inner());
        let (_g, res) = self
            .round_done
            .wait_timeout_while(g, timeout, |_| self.rounds.load(Ordering::Relaxed) < n)
            .unwrap_or_else(|e| e.into_inner());
        !res.timed_out() || self.rounds.load(Ordering::Relaxed) >= n
    }

    /// Resolves now and then every `period`, on a thread of its own that ends once the
    /// resolver is dropped (the rule set it belongs to was replaced). Nothing is started
    /// when no rule uses a name.
    pub fn spawn_refresher(self: &Arc<Self>, period: Duration) -> Option<std::thread::JoinHandle<()>> {
        if self.is_empty() {
            return None;
        }
        let weak: Weak<Resolver> = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("harrier-dns".into())
            .spawn(move || loop {
                let Some(r) = weak.upgrade() else { return };
                r.refresh();
                drop(r);
                // Sleep in short steps so that a dropped resolver ends the thread soon.
                let mut left = period;
                while !left.is_zero() {
                    let step = left.min(Duration::from_millis(500));
                    std::thread::sleep(step);
                    left -= step;
                    if weak.strong_count() == 0 {
                        return;
                    }
                }
            })
            .ok()
    }
}

/// The addresses of `name` (a literal address is its own).
fn resolve(name: &str) -> std::io::Result<Vec<IpAddr>> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Ok(vec![ip.to_canonical()]);
    }
    let mut v: Vec<IpAddr> = (name, 0u16).to_socket_addrs()?.map(|a| a.ip().to_canonical()).collect();
    v.sort();
    v.dedup();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_the_addresses_of_its_names_after_a_round() {
        let r = Resolver::default();
        let s = r.register(&["localhost", "192.0.2.7", "localhost"]);
        assert_eq!(s.names().len(), 2, "duplicates merged");
        assert!(!s.contains("127.0.0.1".parse().unwrap()), "nothing before the first round");
        r.refresh();
        assert!(s.contains("127.0.0.1".parse().unwrap()), "{:?}", s.addrs());
        assert!(s.contains("::ffff:192.0.2.7".parse().unwrap()), "a mapped address is the IPv4 one");
        assert!(!s.contains("127.0.0.2".parse().unwrap()));
        assert_eq!(r.stats(), DnsStats { rounds: 1, lookups: 2, failures: 0 });
        assert_eq!(r.name_of("127.0.0.1".parse().unwrap()).as_deref(), Some("localhost"));
        assert_eq!(r.name_of("192.0.2.8".parse().unwrap()), None);
    }

    #[test]
    fn the_round_hook_hears_every_address_now_and_after_each_round() {
        let r = Resolver::default();
        r.register(&["192.0.2.7"]);
        r.register(&["192.0.2.9", "192.0.2.7"]);
        let heard = Arc::new(Mutex::new(Vec::new()));
        let h = heard.clone();
        r.on_round(Box::new(move |a| h.lock().unwrap().push(a.to_vec())));
        r.refresh();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let want = vec![ip("192.0.2.7"), ip("192.0.2.9")];
        assert_eq!(*heard.lock().unwrap(), vec![vec![], want], "empty before the first round");
    }

    #[test]
    fn a_name_that_does_not_resolve_is_counted_and_matches_nothing() {
        let r = Resolver::default();
        // .invalid never resolves (RFC 6761).
        let s = r.register(&["harrier-test.invalid"]);
        r.refresh();
        assert_eq!(r.stats().failures, 1);
        assert!(r.last_error().unwrap().starts_with("harrier-test.invalid: "));
        assert!(s.addrs().is_empty());
    }

    #[test]
    fn the_refresher_resolves_at_once_and_ends_with_its_resolver() {
        let r = Arc::new(Resolver::default());
        let s = r.register(&["127.0.0.9"]);
        let h = r.spawn_refresher(Duration::from_secs(3600)).expect("a name to resolve");
        assert!(r.wait_rounds(1, Duration::from_secs(30)), "the first round ran");
        assert!(s.contains("127.0.0.9".parse().unwrap()));
        drop(r);
        h.join().unwrap();
        assert!(Arc::new(Resolver::default()).spawn_refresher(Duration::from_secs(1)).is_none());
    }
}
