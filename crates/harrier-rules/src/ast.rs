//! The condition syntax tree. Spans are byte ranges in the condition text.

pub type Span = std::ops::Range<usize>;

/// Comparison and membership operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Contains,
    IContains,
    BContains,
    StartsWith,
    BStartsWith,
    EndsWith,
    Glob,
    IGlob,
    Regex,
    In,
    Intersects,
    PMatch,
    Exists,
}

impl Op {
    pub fn from_word(w: &str) -> Option<Op> {
        Some(match w {
            "contains" => Op::Contains,
            "icontains" => Op::IContains,
            "bcontains" => Op::BContains,
            "startswith" => Op::StartsWith,
            "bstartswith" => Op::BStartsWith,
            "endswith" => Op::EndsWith,
            "glob" => Op::Glob,
            "iglob" => Op::IGlob,
            "regex" => Op::Regex,
            "in" => Op::In,
            "intersects" => Op::Intersects,
            "pmatch" => Op::PMatch,
            "exists" => Op::Exists,
            _ => return None,
        })
    }
    /// An exception's `comps` entry: a symbol (`=`, `==`, `!=`, `<`...) or a word.
    pub fn from_comp(c: &str) -> Option<Op> {
        Some(match c {
            "=" | "==" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            w => return Op::from_word(w),
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Contains => "contains",
            Op::IContains => "icontains",
            Op::BContains => "bcontains",
            Op::StartsWith => "startswith",
            Op::BStartsWith => "bstartswith",
            Op::EndsWith => "endswith",
            Op::Glob => "glob",
            Op::IGlob => "iglob",
            Op::Regex => "regex",
            Op::In => "in",
            Op::Intersects => "intersects",
            Op::PMatch => "pmatch",
            Op::Exists => "exists",
        }
    }
    /// Takes a list on the right.
    pub fn takes_list(self) -> bool {
        matches!(self, Op::In | Op::Intersects | Op::PMatch)
    }
}

/// Field transformers: `tolower(proc.name)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transformer {
    ToLower,
    ToUpper,
    B64,
    Basename,
    Len,
}

impl Transformer {
    pub fn as_str(self) -> &'static str {
        match self {
            Transformer::ToLower => "tolower",
            Transformer::ToUpper => "toupper",
            Transformer::B64 => "b64",
            Transformer::Basename => "basename",
            Transformer::Len => "len",
        }
    }
    pub fn from_word(w: &str) -> Option<Transformer> {
        Some(match w {
            "tolower" => Transformer::ToLower,
            "toupper" => Transformer::ToUpper,
            "b64" => Transformer::B64,
            "basename" => Transformer::Basename,
            "len" => Transformer::Len,
            _ => return None,
        })
    }
}

/// A field reference as written, with its transformers (innermost last).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRef {
    pub name: String,
    /// The text inside `[...]`, if any.
    pub arg: Option<String>,
    pub transformers: Vec<Transformer>,
    pub span: Span,
}

/// One value on the right of an operator or in a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Literal {
    pub text: String,
    pub quoted: bool,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Rhs {
    None,
    Value(Literal),
    /// `(a, b, c)`; unquoted items may name lists.
    List(Vec<Literal>, Span),
    /// A list given by name without parentheses.
    ListName(Literal),
    /// `val(field)` or a transformed field.
    Field(FieldRef),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Ast {
    And(Vec<Ast>),
    Or(Vec<Ast>),
    Not(Box<Ast>, Span),
    /// A bare identifier: a macro use.
    Macro(String, Span),
    Check {
        lhs: FieldRef,
        op: Op,
        rhs: Rhs,
        span: Span,
    },
}

impl Ast {
    pub fn span(&self) -> Span {
        match self {
            Ast::And(v) | Ast::Or(v) => {
                let s = v.first().map(|a| a.span().start).unwrap_or(0);
                let e = v.last().map(|a| a.span().end).unwrap_or(0);
                s..e
            }
            Ast::Not(_, s) | Ast::Macro(_, s) => s.clone(),
            Ast::Check { span, .. } => span.clone(),
        }
    }
}
