//! The legacy event table (legacy_events.tbl), parsed once.

use std::sync::OnceLock;

/// How a legacy parameter's bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PKind {
    /// Signed integer, as wide as its stored length (1, 2, 4 or 8 bytes).
    Int,
    UInt,
    Str,
    Bytes,
    Sockaddr,
    Socktuple,
    FdList,
    Strings,
    IpAddr,
}

#[derive(Debug)]
pub struct EventInfo {
    /// The event's name ("open", "procexit").
    pub name: &'static str,
    /// The x86_64 syscall it reports, by name (differs from `name` for a few).
    pub syscall: &'static str,
    /// Parameter lengths are u32 instead of u16.
    pub large: bool,
    pub params: Vec<(&'static str, PKind)>,
}

static TABLE_TEXT: &str = include_str!("legacy_events.tbl");

/// Event info by number; None for unused or unknown numbers.
pub fn event_info(nr: u16) -> Option<&'static EventInfo> {
    static TABLE: OnceLock<Vec<Option<EventInfo>>> = OnceLock::new();
    TABLE.get_or_init(|| parse(TABLE_TEXT)).get(nr as usize).and_then(|e| e.as_ref())
}

fn parse(text: &'static str) -> Vec<Option<EventInfo>> {
    let mut out: Vec<Option<EventInfo>> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let nr: usize = words
            .next()
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("legacy_events.tbl:{}: no number", i + 1));
        let name_word = words.next().unwrap_or_else(|| panic!("legacy_events.tbl:{}: no name", i + 1));
        let (name, syscall) = name_word.split_once('=').unwrap_or((name_word, name_word));
        let mut info = EventInfo { name, syscall, large: false, params: Vec::new() };
        for w in words {
            if w == "L" {
                info.large = true;
                continue;
            }
            let (p, k) =
                w.split_once(':').unwrap_or_else(|| panic!("legacy_events.tbl:{}: bad parameter {w}", i + 1));
            let kind = match k {
                "i" => PKind::Int,
                "u" => PKind::UInt,
                "s" => PKind::Str,
                "b" => PKind::Bytes,
                "a" => PKind::Sockaddr,
                "t" => PKind::Socktuple,
                "f" => PKind::FdList,
                "v" => PKind::Strings,
                "n" => PKind::IpAddr,
                _ => panic!("legacy_events.tbl:{}: unknown kind {k}", i + 1),
            };
            info.params.push((p, kind));
        }
        if out.len() <= nr {
            out.resize_with(nr + 1, || None);
        }
        out[nr] = Some(info);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_and_knows_the_common_events() {
        assert_eq!(event_info(0).unwrap().name, "syscall");
        let o = event_info(3).unwrap();
        assert_eq!((o.name, o.params[0], o.params[1].0), ("open", ("fd", PKind::Int), "name"));
        assert_eq!(event_info(57).unwrap().syscall, "accept4");
        assert!(event_info(324).unwrap().large);
        assert!(event_info(17).is_none(), "unused slot");
        assert!(event_info(9999).is_none());
    }
}
