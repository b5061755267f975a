//! The field table (generated from schema/fields.tbl) and name resolution.

use crate::events::{EventSet, EventType};

/// The declared type of a field, which decides the operators it accepts and how literals
/// on the right of an operator are parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Str,
    U64,
    S64,
    Bool,
    IpAddr,
    /// An address compared with networks (`fd.net = 10.0.0.0/8`).
    IpNet,
    Port,
    Bytes,
    /// A number rendered as names for string operators (`O_RDONLY|O_CLOEXEC`).
    Flags,
    /// Several strings (`fd.types`).
    List,
    RelTime,
    AbsTime,
    /// The type of the event parameter read (`evt.arg.*`): decided per event.
    Dyn,
}

impl FieldType {
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Str => "string",
            FieldType::U64 => "u64",
            FieldType::S64 => "s64",
            FieldType::Bool => "bool",
            FieldType::IpAddr => "ipaddr",
            FieldType::IpNet => "ipnet",
            FieldType::Port => "port",
            FieldType::Bytes => "bytes",
            FieldType::Flags => "flags",
            FieldType::List => "list",
            FieldType::RelTime => "reltime",
            FieldType::AbsTime => "abstime",
            FieldType::Dyn => "dyn",
        }
    }

    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            FieldType::U64 | FieldType::S64 | FieldType::Port | FieldType::RelTime | FieldType::AbsTime
        )
    }
}

/// Which argument a field takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgForm {
    None,
    Index,
    OptIndex,
    Key,
    OptKey,
    IndexOrKey,
}

impl ArgForm {
    pub fn name(self) -> &'static str {
        match self {
            ArgForm::None => "-",
            ArgForm::Index => "`[N]`",
            ArgForm::OptIndex => "optional `[N]`",
            ArgForm::Key => "`.key` or `[key]`",
            ArgForm::OptKey => "optional `[key]`",
            ArgForm::IndexOrKey => "`[N]`, `.key` or `[key]`",
        }
    }
    fn takes_key(self) -> bool {
        matches!(self, ArgForm::Key | ArgForm::OptKey | ArgForm::IndexOrKey)
    }
}

/// Which events can give a field a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Events {
    All,
    Fd,
    File,
    Net,
    Exec,
    /// Events having the parameter named by the key.
    Param,
    /// Declared only (Kubernetes): never has a value in Harrier.
    Never,
    Syscalls(&'static [&'static str]),
}

impl Events {
    pub fn describe(self) -> String {
        match self {
            Events::All => "all".into(),
            Events::Fd => "events with an fd".into(),
            Events::File => "events naming a file".into(),
            Events::Net => "socket events".into(),
            Events::Exec => "execve, execveat".into(),
            Events::Param => "events with that parameter".into(),
            Events::Never => "none (no value in Harrier)".into(),
            Events::Syscalls(s) => s.join(", "),
        }
    }
}

/// One row of the field table.
#[derive(Debug)]
pub struct FieldInfo {
    pub field: Field,
    pub name: &'static str,
    pub ty: FieldType,
    pub arg: ArgForm,
    pub events: Events,
    /// The extraction routine the integration implements for it.
    pub extractor: &'static str,
    pub desc: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/fields.gen.rs"));

impl Field {
    pub fn info(self) -> &'static FieldInfo {
        &FIELDS[self as usize]
    }
    pub fn name(self) -> &'static str {
        self.info().name
    }
    pub fn ty(self) -> FieldType {
        self.info().ty
    }
}

/// The argument given to a field in a condition or an output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum FieldArg {
    #[default]
    None,
    Index(u32),
    Key(Box<str>),
}

impl FieldArg {
    pub fn index(&self) -> Option<u32> {
        match self {
            FieldArg::Index(i) => Some(*i),
            _ => None,
        }
    }
    pub fn key(&self) -> Option<&str> {
        match self {
            FieldArg::Key(k) => Some(k),
            _ => None,
        }
    }
}

/// Why a field reference did not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    Unknown,
    /// The field needs an argument and has none, or takes none and has one.
    BadArg(&'static str),
}

/// Resolves `proc.aname[2]`, `evt.arg.flags`, `evt.arg[0]`, `proc.env[HOME]`: the name as
/// written (without the bracket part) and the bracket content if any.
pub fn resolve(name: &str, bracket: Option<&str>) -> Result<(Field, FieldArg), FieldError> {
    let (field, dotkey) = match lookup(name) {
        Some(f) => (f, None),
        None => {
            // Longest field name that is a prefix followed by '.' and takes a key.
            let mut best: Option<(Field, &str)> = None;
            for (i, c) in name.char_indices().rev() {
                if c == '.' {
                    if let Some(f) = lookup(&name[..i]) {
                        if f.info().arg.takes_key() {
                            best = Some((f, &name[i + 1..]));
                            break;
                        }
                    }
                }
            }
            match best {
                Some((f, k)) if !k.is_empty() && bracket.is_none() => (f, Some(k)),
                _ => return Err(FieldError::Unknown),
            }
        }
    };
    let form = field.info().arg;
    let arg = if let Some(k) = dotkey {
        FieldArg::Key(k.into())
    } else if let Some(b) = bracket {
        let b = b.trim();
        let num = b.parse::<u32>().ok();
        match (form, num) {
            (ArgForm::None, _) => return Err(FieldError::BadArg("takes no argument")),
            (ArgForm::Index | ArgForm::OptIndex, Some(n)) => FieldArg::Index(n),
            (ArgForm::Index | ArgForm::OptIndex, None) => {
                return Err(FieldError::BadArg("needs a numeric index"))
            }
            (ArgForm::IndexOrKey, Some(n)) => FieldArg::Index(n),
            (_, _) if b.is_empty() => return Err(FieldError::BadArg("has an empty argument")),
            (_, _) => FieldArg::Key(b.into()),
        }
    } else {
        match form {
            ArgForm::Index => return Err(FieldError::BadArg("needs an index: [N]")),
            ArgForm::Key | ArgForm::IndexOrKey => {
                return Err(FieldError::BadArg("needs an argument: .name or [name]"))
            }
            _ => FieldArg::None,
        }
    };
    // evt.arg.name, evt.arg.res keep Falco's name: the integration maps it, through
    // Falco's parameter list of the event or `harrier_param_name`.
    Ok((field, arg))
}

/// Exact lookup by name.
pub fn lookup(name: &str) -> Option<Field> {
    // Built once: 200-odd names, looked up at load time only.
    static INDEX: std::sync::OnceLock<std::collections::HashMap<&'static str, Field>> =
        std::sync::OnceLock::new();
    INDEX.get_or_init(|| FIELDS.iter().map(|f| (f.name, f.field)).collect()).get(name).copied()
}

/// Falco's parameter names that Harrier's event table spells differently: the integration
/// maps `evt.arg.<key>` through this before looking the parameter up.
pub fn harrier_param_name(falco: &str) -> &str {
    match falco {
        "name" => "path",
        "res" | "res_or_fd" => "ret",
        other => other,
    }
}

/// The events on which `field` (with `arg`) can have a value.
pub fn field_events(field: Field, arg: &FieldArg) -> EventSet {
    match field.info().events {
        Events::All => EventSet::all(),
        Events::Never => EventSet::empty(),
        Events::Fd => crate::events::fd_events().clone(),
        Events::File => crate::events::file_events().clone(),
        Events::Net => crate::events::net_events().clone(),
        Events::Exec => EventSet::from_names(&["execve", "execveat"]),
        Events::Syscalls(names) => EventSet::from_names(names),
        Events::Param => match arg {
            FieldArg::Key(k) => crate::events::param_events(k),
            _ => EventSet::all(),
        },
    }
}

/// Convenience for tests and docs.
pub fn event_has_param(ev: EventType, falco_name: &str) -> bool {
    crate::events::param_events(falco_name).contains(ev)
}
