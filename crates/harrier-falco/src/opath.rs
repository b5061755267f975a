//! Falco's `-o key=value`: a key path (dots, `[n]` indexes, `[]` appends, `\` escapes, as
//! yaml_helper::get_node reads it) and a value (a scalar, or a `{...}` flow mapping),
//! applied onto the configuration tree before it is read.

use anyhow::{anyhow, bail, Result};
use harrier_rules::yaml::{self, Node, Pos, Style};

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
    /// `[]`: a new item at the end of the list.
    Append,
}

/// Splits a key path as Falco does; errors name the key and the position.
pub fn parse_path(key: &str) -> Result<Vec<Step>> {
    let err = |m: String| anyhow!("Config error at key \"{key}\": Parsing error: {m}");
    let chars: Vec<(usize, char)> = key.char_indices().collect();
    let (mut steps, mut cur, mut i) = (Vec::new(), String::new(), 0);
    // A component starts at the beginning or after a '.', never right after a ']'.
    let mut after_dot = true;
    while i < chars.len() {
        let (at, c) = chars[i];
        match c {
            '\\' => {
                let next = chars.get(i + 1).map(|x| x.1);
                match next {
                    Some(n @ ('.' | '[' | ']' | '\\')) => cur.push(n),
                    Some(n) => return Err(err(format!("invalid escape sequence '\\{n}' at pos {at}"))),
                    None => return Err(err(format!("trailing backslash at pos {at}"))),
                }
                i += 2;
            }
            '.' => {
                if cur.is_empty() {
                    return Err(err(format!("unexpected character at pos {at}")));
                }
                steps.push(Step::Key(std::mem::take(&mut cur)));
                after_dot = true;
                i += 1;
            }
            '[' => {
                if !cur.is_empty() {
                    steps.push(Step::Key(std::mem::take(&mut cur)));
                } else if steps.is_empty() {
                    return Err(err(format!("unexpected character at pos {at}")));
                }
                let close = key[at..].find(']').map(|c| at + c).ok_or_else(|| err("missing ']'".into()))?;
                let idx = &key[at + 1..close];
                steps.push(if idx.is_empty() {
                    Step::Append
                } else {
                    Step::Index(
                        idx.parse().map_err(|_| err(format!("expected a numeric index, found '{idx}'")))?,
                    )
                });
                i = chars.iter().position(|x| x.0 > close).unwrap_or(chars.len());
                after_dot = false;
                if chars.get(i).map(|x| x.1) == Some('.') {
                    i += 1;
                    after_dot = true;
                }
            }
            c => {
                if cur.is_empty() && !after_dot {
                    return Err(err(format!("expected '.' character at pos {}", at - 1)));
                }
                cur.push(c);
                i += 1;
            }
        }
    }
    if !cur.is_empty() {
        steps.push(Step::Key(cur));
    }
    if steps.is_empty() {
        return Err(err("empty key".into()));
    }
    Ok(steps)
}

/// Where a value given on the command line sits: line 0 says "not in a file".
pub const CMDLINE: Pos = Pos { line: 0, col: 0, index: 0 };

fn scalar(v: &str) -> Node {
    Node::Scalar { value: v.to_string(), style: Style::Plain, pos: CMDLINE }
}

fn null() -> Node {
    Node::Scalar { value: String::new(), style: Style::Plain, pos: CMDLINE }
}

/// The node a value string stands for: `{...}` is parsed as a flow mapping.
pub fn value_node(v: &str) -> Result<Node> {
    if v.len() >= 2 && v.starts_with('{') && v.ends_with('}') {
        let docs = yaml::parse(v).map_err(|e| anyhow!("bad value '{v}': {}", e.msg))?;
        let mut n = docs.into_iter().next().unwrap_or_else(null);
        strip_pos(&mut n);
        return Ok(n);
    }
    Ok(scalar(v))
}

fn strip_pos(n: &mut Node) {
    match n {
        Node::Scalar { pos, .. } => *pos = CMDLINE,
        Node::Seq { items, pos } => {
            *pos = CMDLINE;
            items.iter_mut().for_each(strip_pos);
        }
        Node::Map { entries, pos } => {
            *pos = CMDLINE;
            for (k, v) in entries {
                strip_pos(k);
                strip_pos(v);
            }
        }
    }
}

/// Splits `key=value` at the first '=' (Falco's message when there is none).
pub fn split_option(opt: &str) -> Result<(&str, &str)> {
    match opt.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k, v)),
        _ => bail!("Error parsing config option \"{opt}\". Must be of the form key=val or key.subkey=val"),
    }
}

/// Sets `path` in `root` to `value`, creating mappings and list items on the way as
/// yaml-cpp does (an index one past the end appends; a scalar in the way is replaced).
pub fn set(root: &mut Node, path: &[Step], value: Node) -> Result<()> {
    let mut cur = root;
    for step in path {
        cur = child(cur, step)?;
    }
    *cur = value;
    Ok(())
}

fn child<'a>(n: &'a mut Node, step: &Step) -> Result<&'a mut Node> {
    match step {
        Step::Key(k) => {
            // yaml-cpp turns a list indexed by a key into a mapping of its indexes.
            if let Node::Seq { items, pos } = n {
                let entries =
                    std::mem::take(items).into_iter().enumerate().map(|(i, v)| (scalar(&i.to_string()), v));
                *n = Node::Map { entries: entries.collect(), pos: *pos };
            }
            if !matches!(n, Node::Map { .. }) {
                *n = Node::Map { entries: Vec::new(), pos: CMDLINE };
            }
            let Node::Map { entries, .. } = n else { unreachable!() };
            let i = match entries.iter().position(|(ek, _)| ek.as_str() == Some(k)) {
                Some(i) => i,
                None => {
                    entries.push((scalar(k), null()));
                    entries.len() - 1
                }
            };
            Ok(&mut entries[i].1)
        }
        Step::Index(_) | Step::Append => {
            if !matches!(n, Node::Seq { .. }) {
                if !n.is_null() {
                    bail!("{} is not a list", n.kind());
                }
                *n = Node::Seq { items: Vec::new(), pos: CMDLINE };
            }
            let Node::Seq { items, .. } = n else { unreachable!() };
            let i = match step {
                Step::Index(i) => *i,
                _ => items.len(),
            };
            if i > items.len() {
                bail!("index {i} is past the end of a list of {}", items.len());
            }
            if i == items.len() {
                items.push(null());
            }
            Ok(&mut items[i])
        }
    }
}

/// Applies one `-o key=value`.
pub fn apply(root: &mut Node, opt: &str) -> Result<()> {
    let (k, v) = split_option(opt)?;
    let path = parse_path(k)?;
    set(root, &path, value_node(v)?).map_err(|e| anyhow!("Config error at key \"{k}\": {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(k: &str) -> Vec<Step> {
        parse_path(k).unwrap()
    }

    fn key(s: &str) -> Step {
        Step::Key(s.into())
    }

    #[test]
    fn paths_split_as_falco_splits_them() {
        assert_eq!(steps("json_output"), [key("json_output")]);
        assert_eq!(steps("engine.replay.capture_file"), [key("engine"), key("replay"), key("capture_file")]);
        assert_eq!(steps("rules[].disable.rule"), [key("rules"), Step::Append, key("disable"), key("rule")]);
        assert_eq!(steps("load_plugins[0]"), [key("load_plugins"), Step::Index(0)]);
        assert_eq!(steps("m[1][3]"), [key("m"), Step::Index(1), Step::Index(3)]);
        assert_eq!(steps(r"a.kubernetes\.io/role"), [key("a"), key("kubernetes.io/role")]);
        assert_eq!(steps(r"a.b\\c"), [key("a"), key(r"b\c")]);
        let e = parse_path("a..b").unwrap_err().to_string();
        assert_eq!(e, "Config error at key \"a..b\": Parsing error: unexpected character at pos 2");
        let e = parse_path("a[x]").unwrap_err().to_string();
        assert!(e.ends_with("expected a numeric index, found 'x'"), "{e}");
        let e = parse_path("a[0]b").unwrap_err().to_string();
        assert!(e.ends_with("expected '.' character at pos 3"), "{e}");
        assert!(parse_path(r"a\q").unwrap_err().to_string().contains("invalid escape sequence '\\q'"));
    }

    fn doc(text: &str) -> Node {
        yaml::parse(text).unwrap().remove(0)
    }

    fn get<'a>(n: &'a Node, path: &str) -> &'a Node {
        let mut cur = n;
        for s in parse_path(path).unwrap() {
            cur = match (s, cur) {
                (Step::Key(k), n) => n.get(&k).unwrap(),
                (Step::Index(i), Node::Seq { items, .. }) => &items[i],
                _ => panic!("no {path}"),
            };
        }
        cur
    }

    #[test]
    fn options_set_scalars_create_maps_and_append_list_items() {
        let mut d = doc("json_output: false\nengine:\n  kind: modern_ebpf\nload_plugins: [a]\n");
        apply(&mut d, "json_output=true").unwrap();
        apply(&mut d, "engine.kind=replay").unwrap();
        apply(&mut d, "engine.replay.capture_file=/x=y.scap").unwrap();
        apply(&mut d, "load_plugins[0]=container").unwrap();
        apply(&mut d, "load_plugins[1]=json").unwrap();
        apply(&mut d, "rules[].disable.rule=*").unwrap();
        apply(&mut d, "rules[].enable.tag=T1").unwrap();
        apply(&mut d, "append_output[]={match: {source: syscall}, extra_output: on CPU %evt.cpu}").unwrap();
        assert_eq!(get(&d, "json_output").as_str(), Some("true"));
        assert_eq!(get(&d, "engine.kind").as_str(), Some("replay"));
        assert_eq!(get(&d, "engine.replay.capture_file").as_str(), Some("/x=y.scap"));
        assert_eq!(get(&d, "load_plugins[1]").as_str(), Some("json"));
        assert_eq!(get(&d, "rules[0].disable.rule").as_str(), Some("*"));
        assert_eq!(get(&d, "rules[1].enable.tag").as_str(), Some("T1"));
        assert_eq!(get(&d, "append_output[0].match.source").as_str(), Some("syscall"));
        assert_eq!(get(&d, "append_output[0].extra_output").as_str(), Some("on CPU %evt.cpu"));
        assert!(apply(&mut d, "load_plugins[5]=x").unwrap_err().to_string().contains("past the end"));
        // A key into a list makes it a mapping of its indexes (yaml-cpp's operator[]).
        apply(&mut d, "load_plugins.x=y").unwrap();
        assert_eq!(get(&d, "load_plugins.1").as_str(), Some("json"));
        assert_eq!(get(&d, "load_plugins.x").as_str(), Some("y"));
        let e = apply(&mut d, "novalue").unwrap_err().to_string();
        assert_eq!(
            e,
            "Error parsing config option \"novalue\". Must be of the form key=val or key.subkey=val"
        );
    }
}
