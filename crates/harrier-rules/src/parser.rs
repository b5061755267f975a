//! Condition lexer and parser: Falco's filter grammar, every node with its span.
//!
//! ```text
//! expr   := or
//! or     := and ("or" and)*
//! and    := not ("and" not)*
//! not    := "not" not | primary
//! primary:= "(" expr ")" | MACRO | lhs OP rhs | lhs "exists"
//! lhs    := FIELD | TRANSFORMER "(" lhs ")"
//! rhs    := VALUE | "(" VALUE ("," VALUE)* ")" | LISTNAME | "val(" FIELD ")" | TRANSFORMER "(" lhs ")"
//! ```

use crate::ast::*;

/// A syntax error at a byte range of the condition.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub span: Span,
    pub msg: String,
    /// libsinsp's message for the same mistake, where Falco's `-V` output needs it.
    pub falco: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    LParen,
    RParen,
    Comma,
    /// `=`, `==`, `!=`, `<`, `<=`, `>`, `>=`
    Sym(Op),
    /// A bare word: a keyword, a field, a macro, a list name or an unquoted value.
    Word(String),
    Str(String),
}

const MAX_DEPTH: usize = 200;

fn lex(src: &str) -> Result<Vec<(Tok, Span)>, ParseError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => {
                i += 1;
                out.push((Tok::LParen, start..i));
            }
            b')' => {
                i += 1;
                out.push((Tok::RParen, start..i));
            }
            b',' => {
                i += 1;
                out.push((Tok::Comma, start..i));
            }
            b'=' | b'<' | b'>' | b'!' => {
                let two = b.get(i + 1) == Some(&b'=');
                let op = match (c, two) {
                    (b'=', _) => Op::Eq,
                    (b'!', true) => Op::Ne,
                    (b'<', false) => Op::Lt,
                    (b'<', true) => Op::Le,
                    (b'>', false) => Op::Gt,
                    (b'>', true) => Op::Ge,
                    _ => {
                        return Err(ParseError {
                            span: i..i + 1,
                            msg: "unexpected '!' (did you mean != or not?)".into(),
                            falco: None,
                        })
                    }
                };
                i += if two { 2 } else { 1 };
                out.push((Tok::Sym(op), start..i));
            }
            b'"' | b'\'' => {
                let q = c;
                i += 1;
                let mut s = Vec::new();
                loop {
                    match b.get(i) {
                        None => {
                            return Err(ParseError {
                                span: start..b.len(),
                                msg: "unterminated string".into(),
                                falco: None,
                            })
                        }
                        Some(&ch) if ch == q => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') if i + 1 < b.len() => {
                            let e = b[i + 1];
                            s.push(match e {
                                b'n' => b'\n',
                                b't' => b'\t',
                                b'r' => b'\r',
                                other => other,
                            });
                            i += 2;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push((Tok::Str(String::from_utf8_lossy(&s).into_owned()), start..i));
            }
            _ => {
                // A bare word; `[...]` inside it is kept whole (proc.aname[2], mount.dest[/x y]).
                while i < b.len() {
                    match b[i] {
                        b' ' | b'\t' | b'\n' | b'\r' | b'(' | b')' | b',' | b'"' | b'\'' | b'<' | b'>' => {
                            break
                        }
                        b'=' => break,
                        b'!' if b.get(i + 1) == Some(&b'=') => break,
                        b'[' => match src[i..].find(']') {
                            Some(e) => i += e + 1,
                            None => {
                                return Err(ParseError {
                                    span: i..b.len(),
                                    msg: "missing ']'".into(),
                                    falco: None,
                                })
                            }
                        },
                        _ => i += 1,
                    }
                }
                // Split on a char boundary: the loop above stops only at ASCII bytes.
                out.push((Tok::Word(src[start..i].to_string()), start..i));
            }
        }
    }
    Ok(out)
}

struct P {
    toks: Vec<(Tok, Span)>,
    at: usize,
    end: usize,
    depth: usize,
}

/// Parses a condition.
pub fn parse(src: &str) -> Result<Ast, ParseError> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return Err(ParseError { span: 0..src.len(), msg: "empty condition".into(), falco: None });
    }
    let mut p = P { toks, at: 0, end: src.len(), depth: 0 };
    let ast = p.or()?;
    if let Some((t, s)) = p.toks.get(p.at) {
        let prev = p.at.checked_sub(1).map(|i| &p.toks[i].1).map_or("", |sp| &src[sp.clone()]);
        return Err(ParseError {
            span: s.clone(),
            msg: format!("unexpected {} after a complete expression", describe(t)),
            falco: Some(format!("unexpected token after '{prev}', expecting 'or', 'and'")),
        });
    }
    Ok(ast)
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::Comma => "','".into(),
        Tok::Sym(op) => format!("'{}'", op.as_str()),
        Tok::Word(w) => format!("'{w}'"),
        Tok::Str(s) => format!("string \"{s}\""),
    }
}

fn is_word(t: Option<&(Tok, Span)>, w: &str) -> bool {
    matches!(t, Some((Tok::Word(x), _)) if x == w)
}

impl P {
    fn peek(&self) -> Option<&(Tok, Span)> {
        self.toks.get(self.at)
    }
    fn eof_span(&self) -> Span {
        self.end..self.end
    }
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, ParseError> {
        let span = self.peek().map(|(_, s)| s.clone()).unwrap_or_else(|| self.eof_span());
        Err(ParseError { span, msg: msg.into(), falco: None })
    }
    fn found(&self) -> String {
        self.peek().map(|(t, _)| describe(t)).unwrap_or_else(|| "the end of the condition".into())
    }
    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("expression nested too deeply");
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Ast, ParseError> {
        self.enter()?;
        let mut v = vec![self.and()?];
        while is_word(self.peek(), "or") {
            self.at += 1;
            v.push(self.and()?);
        }
        self.depth -= 1;
        Ok(if v.len() == 1 { v.pop().unwrap() } else { Ast::Or(v) })
    }

    fn and(&mut self) -> Result<Ast, ParseError> {
        let mut v = vec![self.not()?];
        while is_word(self.peek(), "and") {
            self.at += 1;
            v.push(self.not()?);
        }
        Ok(if v.len() == 1 { v.pop().unwrap() } else { Ast::And(v) })
    }

    fn not(&mut self) -> Result<Ast, ParseError> {
        if is_word(self.peek(), "not") {
            let start = self.peek().unwrap().1.start;
            self.at += 1;
            self.enter()?;
            let inner = self.not()?;
            self.depth -= 1;
            let end = inner.span().end;
            return Ok(Ast::Not(Box::new(inner), start..end));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Ast, ParseError> {
        match self.peek().cloned() {
            Some((Tok::LParen, _)) => {
                self.at += 1;
                let e = self.or()?;
                match self.peek() {
                    Some((Tok::RParen, _)) => {
                        self.at += 1;
                        Ok(e)
                    }
                    _ => self.err(format!("expected ')' but found {}", self.found())),
                }
            }
            Some((Tok::Word(w), span)) => {
                if matches!(w.as_str(), "and" | "or") {
                    return self.err(format!("expected a field, a macro or '(' but found '{w}'"));
                }
                let is_tf = Transformer::from_word(&w).is_some()
                    && matches!(self.toks.get(self.at + 1), Some((Tok::LParen, _)));
                if !is_tf && !w.contains('.') && !w.contains('[') {
                    self.at += 1;
                    if !valid_ident(&w) {
                        return Err(ParseError {
                            span,
                            msg: format!("'{w}' is not a field, a macro or a keyword"),
                            falco: None,
                        });
                    }
                    return Ok(Ast::Macro(w, span));
                }
                let lhs = self.field_ref()?;
                self.check(lhs)
            }
            _ => self.err(format!("expected a field, a macro or '(' but found {}", self.found())),
        }
    }

    /// FIELD or TRANSFORMER "(" lhs ")"
    fn field_ref(&mut self) -> Result<FieldRef, ParseError> {
        let Some((Tok::Word(w), span)) = self.peek().cloned() else {
            return self.err(format!("expected a field but found {}", self.found()));
        };
        self.at += 1;
        if let Some(tf) = Transformer::from_word(&w) {
            if matches!(self.peek(), Some((Tok::LParen, _))) {
                self.at += 1;
                self.enter()?;
                let mut inner = self.field_ref()?;
                self.depth -= 1;
                let Some((Tok::RParen, close)) = self.peek().cloned() else {
                    return self
                        .err(format!("expected ')' after the argument of {w}() but found {}", self.found()));
                };
                self.at += 1;
                inner.transformers.push(tf);
                inner.span = span.start..close.end;
                return Ok(inner);
            }
        }
        let (name, arg) = match w.find('[') {
            Some(i) => {
                if !w.ends_with(']') {
                    return Err(ParseError { span, msg: format!("'{w}': text after ']'"), falco: None });
                }
                (w[..i].to_string(), Some(w[i + 1..w.len() - 1].to_string()))
            }
            None => (w.clone(), None),
        };
        if !valid_field_name(&name) {
            return Err(ParseError { span, msg: format!("'{w}' is not a valid field name"), falco: None });
        }
        Ok(FieldRef { name, arg, transformers: Vec::new(), span })
    }

    fn check(&mut self, lhs: FieldRef) -> Result<Ast, ParseError> {
        let start = lhs.span.start;
        let op = match self.peek() {
            Some((Tok::Sym(op), _)) => *op,
            Some((Tok::Word(w), _)) if Op::from_word(w).is_some() => Op::from_word(w).unwrap(),
            _ => {
                return self.err(format!(
                    "expected an operator after '{}' but found {}",
                    lhs.name,
                    self.found()
                ))
            }
        };
        let op_span = self.peek().unwrap().1.clone();
        self.at += 1;
        if op == Op::Exists {
            return Ok(Ast::Check { lhs, op, rhs: Rhs::None, span: start..op_span.end });
        }
        let rhs = if op.takes_list() { self.list()? } else { self.value()? };
        let end = match &rhs {
            Rhs::Value(l) | Rhs::ListName(l) => l.span.end,
            Rhs::List(_, s) => s.end,
            Rhs::Field(f) => f.span.end,
            Rhs::None => op_span.end,
        };
        Ok(Ast::Check { lhs, op, rhs, span: start..end })
    }

    fn literal(&mut self) -> Result<Literal, ParseError> {
        match self.peek().cloned() {
            Some((Tok::Word(w), span)) => {
                self.at += 1;
                Ok(Literal { text: w, quoted: false, span })
            }
            Some((Tok::Str(s), span)) => {
                self.at += 1;
                Ok(Literal { text: s, quoted: true, span })
            }
            // Falco's older rules compare evt.dir with a bare < or >.
            Some((Tok::Sym(op @ (Op::Lt | Op::Gt)), span)) => {
                self.at += 1;
                Ok(Literal { text: if op == Op::Lt { "<" } else { ">" }.into(), quoted: false, span })
            }
            _ => self.err(format!("expected a value but found {}", self.found())),
        }
    }

    fn value(&mut self) -> Result<Rhs, ParseError> {
        if let Some((Tok::Word(w), span)) = self.peek().cloned() {
            let call = matches!(self.toks.get(self.at + 1), Some((Tok::LParen, _)));
            if call && w == "val" {
                self.at += 2;
                let mut f = self.field_ref()?;
                let Some((Tok::RParen, close)) = self.peek().cloned() else {
                    return self.err(format!("expected ')' after val(field but found {}", self.found()));
                };
                self.at += 1;
                f.span = span.start..close.end;
                return Ok(Rhs::Field(f));
            }
            if call && Transformer::from_word(&w).is_some() {
                return Ok(Rhs::Field(self.field_ref()?));
            }
        }
        if matches!(self.peek(), Some((Tok::LParen, _))) {
            return self.err("this operator takes one value, not a list (use 'in')");
        }
        Ok(Rhs::Value(self.literal()?))
    }

    fn list(&mut self) -> Result<Rhs, ParseError> {
        let Some((Tok::LParen, open)) = self.peek().cloned() else {
            // `in list_name` without parentheses.
            return match self.peek().cloned() {
                Some((Tok::Word(w), span)) if valid_ident(&w) => {
                    self.at += 1;
                    Ok(Rhs::ListName(Literal { text: w, quoted: false, span }))
                }
                _ => self.err(format!("expected '(' and a list but found {}", self.found())),
            };
        };
        self.at += 1;
        let mut items = Vec::new();
        // Items are separated by commas; an empty list `()` is allowed.
        loop {
            match self.peek().cloned() {
                Some((Tok::RParen, close)) if items.is_empty() => {
                    self.at += 1;
                    return Ok(Rhs::List(items, open.start..close.end));
                }
                Some((Tok::Word(_) | Tok::Str(_), _)) => items.push(self.literal()?),
                Some((Tok::Sym(_), _)) => {
                    return self.err("operators are not allowed inside a list; quote the value")
                }
                _ => return self.err(format!("expected a value in the list but found {}", self.found())),
            }
            match self.peek().cloned() {
                Some((Tok::Comma, _)) => self.at += 1,
                Some((Tok::RParen, close)) => {
                    self.at += 1;
                    return Ok(Rhs::List(items, open.start..close.end));
                }
                _ => return self.err(format!("expected ',' or ')' in the list but found {}", self.found())),
            }
        }
    }
}

fn valid_ident(w: &str) -> bool {
    let mut c = w.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
}

fn valid_field_name(w: &str) -> bool {
    let mut c = w.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic())
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.' || ch == '-')
        && !w.ends_with('.')
}
