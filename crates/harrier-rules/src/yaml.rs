//! A YAML tree that keeps where each node starts, built from yaml-rust2's event parser, so
//! every loader error can name file:line:column and condition errors can point into the file.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Where a node starts: 1-based line and column, and the char index in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
    pub index: usize,
}

impl Pos {
    fn from_marker(m: &Marker) -> Pos {
        // yaml-rust2 reports 1-based lines and 0-based columns.
        Pos { line: m.line() as u32, col: m.col() as u32 + 1, index: m.index() }
    }
}

#[derive(Debug, Clone)]
pub enum Node {
    Scalar { value: String, style: Style, pos: Pos },
    Seq { items: Vec<Node>, pos: Pos },
    Map { entries: Vec<(Node, Node)>, pos: Pos },
}

/// How a scalar was written, needed to map an offset in its value back to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Quoted,
    Block,
}

impl Node {
    pub fn pos(&self) -> Pos {
        match self {
            Node::Scalar { pos, .. } | Node::Seq { pos, .. } | Node::Map { pos, .. } => *pos,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { value, style: Style::Plain, .. } if value.is_empty() || value == "~" || value == "null")
    }
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { .. } => "a scalar",
            Node::Seq { .. } => "a list",
            Node::Map { .. } => "a mapping",
        }
    }
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map { entries, .. } => {
                entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
            }
            _ => None,
        }
    }
}

const MAX_DEPTH: usize = 256;

enum Frame {
    Seq(Vec<Node>, Pos),
    /// Entries so far and a key waiting for its value.
    Map(Vec<(Node, Node)>, Option<Node>, Pos),
}

struct Builder {
    stack: Vec<(Frame, usize)>,
    /// Finished documents' roots.
    docs: Vec<Node>,
    anchors: Vec<(usize, Node)>,
    alias_budget: usize,
    error: Option<YamlError>,
}

fn size(n: &Node) -> usize {
    match n {
        Node::Scalar { value, .. } => 1 + value.len() / 64,
        Node::Seq { items, .. } => 1 + items.iter().map(size).sum::<usize>(),
        Node::Map { entries, .. } => 1 + entries.iter().map(|(k, v)| size(k) + size(v)).sum::<usize>(),
    }
}

impl Builder {
    fn push_value(&mut self, node: Node) {
        // After an error the tree is not used: drop nodes as they close (keeps drops shallow).
        if self.error.is_some() {
            return;
        }
        match self.stack.last_mut() {
            Some((Frame::Seq(items, _), _)) => items.push(node),
            Some((Frame::Map(entries, pending, _), _)) => match pending.take() {
                Some(k) => entries.push((k, node)),
                None => *pending = Some(node),
            },
            None => self.docs.push(node),
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = Pos::from_marker(&mark);
        match ev {
            Event::Scalar(value, style, anchor, _) => {
                let style = match style {
                    TScalarStyle::Plain => Style::Plain,
                    TScalarStyle::SingleQuoted | TScalarStyle::DoubleQuoted => Style::Quoted,
                    _ => Style::Block,
                };
                let node = Node::Scalar { value, style, pos };
                if anchor > 0 {
                    self.anchors.push((anchor, node.clone()));
                }
                self.push_value(node);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                // Rule files are shallow; a deep tree would only cost stack when dropped.
                if self.stack.len() >= MAX_DEPTH {
                    self.error.get_or_insert(YamlError {
                        pos,
                        msg: format!("nested deeper than {MAX_DEPTH} levels"),
                    });
                }
                let frame = if matches!(ev, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new(), pos)
                } else {
                    Frame::Map(Vec::new(), None, pos)
                };
                self.stack.push((frame, anchor));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some((frame, anchor)) = self.stack.pop() else { return };
                let node = match frame {
                    Frame::Seq(items, pos) => Node::Seq { items, pos },
                    // A block mapping's start mark is after its first key: use the key's.
                    Frame::Map(entries, _, pos) => {
                        let pos = entries.first().map(|(k, _)| k.pos()).unwrap_or(pos);
                        Node::Map { entries, pos }
                    }
                };
                if anchor > 0 {
                    self.anchors.push((anchor, node.clone()));
                }
                self.push_value(node);
            }
            Event::Alias(id) => {
                // Aliases are copied, with a budget: a small file must not expand into a huge
                // tree (the "billion laughs" document).
                let node = self.anchors.iter().rev().find(|(a, _)| *a == id).map(|(_, n)| n.clone());
                let node = node.unwrap_or(Node::Scalar { value: String::new(), style: Style::Plain, pos });
                self.alias_budget = self.alias_budget.saturating_sub(size(&node));
                if self.alias_budget == 0 {
                    self.error.get_or_insert(YamlError { pos, msg: "aliases expand too much".into() });
                    return;
                }
                self.push_value(node);
            }
            _ => {}
        }
    }
}

/// A parse error: position and message.
#[derive(Debug)]
pub struct YamlError {
    pub pos: Pos,
    pub msg: String,
}

/// Parses every document of `text`.
///
/// Falco's files close flow lists with a `]` at the indentation of their key, which
/// libyaml accepts and yaml-rust2 calls invalid indentation; such a line is re-indented
/// (only that line's columns move) and the text parsed again.
pub fn parse(text: &str) -> Result<Vec<Node>, YamlError> {
    let mut owned: Option<String> = None;
    for _ in 0..200 {
        let cur = owned.as_deref().unwrap_or(text);
        match parse_once(cur) {
            Err(e) if e.msg == "invalid indentation" => {
                let Some(fixed) = reindent_closer(cur, e.pos.line) else { return Err(e) };
                owned = Some(fixed);
            }
            r => return r,
        }
    }
    parse_once(owned.as_deref().unwrap_or(text))
}

/// Indents line `line` (1-based) like the line before it if it only closes a flow collection.
fn reindent_closer(text: &str, line: u32) -> Option<String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let i = (line as usize).checked_sub(1)?;
    let l = lines.get(i)?;
    let t = l.trim_start();
    if !(t.starts_with(']') || t.starts_with('}')) {
        return None;
    }
    let prev = lines[..i].iter().rev().find(|p| !p.trim().is_empty())?;
    let want = prev.len() - prev.trim_start().len();
    let have = l.len() - t.len();
    if want <= have {
        return None;
    }
    let mut out = String::with_capacity(text.len() + want);
    for (k, x) in lines.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        if k == i {
            out.extend(std::iter::repeat_n(' ', want));
            out.push_str(t);
        } else {
            out.push_str(x);
        }
    }
    Some(out)
}

fn parse_once(text: &str) -> Result<Vec<Node>, YamlError> {
    let mut b = Builder {
        stack: Vec::new(),
        docs: Vec::new(),
        anchors: Vec::new(),
        alias_budget: 100_000,
        error: None,
    };
    let mut p = Parser::new_from_str(text);
    p.load(&mut b, true)
        .map_err(|e| YamlError { pos: Pos::from_marker(e.marker()), msg: e.info().to_string() })?;
    match b.error {
        Some(e) => Err(e),
        None => Ok(b.docs),
    }
}

/// Maps a byte offset inside a scalar's value to its line and column in the file: walks
/// the value and the source together, matching non-blank characters in order (folding and
/// indentation only change blanks), so a condition error points at the right place.
pub fn locate(text: &str, node_pos: Pos, style: Style, value: &str, offset: usize) -> Pos {
    // Char index → byte index of the node's start.
    let start = text.char_indices().nth(node_pos.index).map(|(b, _)| b).unwrap_or(text.len());
    let mut src = text[start..].char_indices().peekable();
    // Skip the block header line (`>-`, `|`) or the opening quote, if the mark is on it.
    let first = text[start..].chars().next();
    match (style, first) {
        (Style::Block, Some('>' | '|')) => {
            for (_, c) in src.by_ref() {
                if c == '\n' {
                    break;
                }
            }
        }
        (Style::Quoted, Some('"' | '\'')) => {
            src.next();
        }
        _ => {}
    }
    // Byte offset just after the last matched character.
    let mut after = start;
    for (vi, vc) in value.char_indices() {
        if vc.is_whitespace() {
            continue;
        }
        // Find the same character in the source, skipping blanks (and escapes).
        let found = loop {
            match src.next() {
                Some((si, sc)) if sc == vc => break Some(start + si),
                Some((_, sc)) if sc.is_whitespace() || sc == '\\' => continue,
                _ => break None,
            }
        };
        let Some(at) = found else { break };
        if vi >= offset {
            return pos_of(text, at);
        }
        after = at + vc.len_utf8();
    }
    pos_of(text, after)
}

/// 1-based line and column of a byte offset.
pub fn pos_of(text: &str, byte: usize) -> Pos {
    let before = &text[..byte.min(text.len())];
    let line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() as u32 + 1;
    Pos { line, col, index: before.chars().count() }
}
