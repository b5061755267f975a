//! The field table (generated from schema/fields.tbl) and name resolution.

use crate::events::{EventSet, EventType};

/// The declared type of a field, which decides the operators it accepts and how literals
/// on the right of an operator are parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// The events of plugin sources.
    Plugin,
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
            Events::Plugin => "events of plugin sources".into(),
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
    /// A plugin's field (with [`Field::PluginField`]): which one, and its argument.
    Plugin(std::sync::Arc<PluginSel>),
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

/// Exact lookup by name (`plugin.field` stands for plugins' fields: never by its name).
pub fn lookup(name: &str) -> Option<Field> {
    if name == Field::PluginField.name() {
        return None;
    }
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
        Events::All | Events::Plugin => EventSet::all(),
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

/// A field a loaded plugin declares (its `get_fields`), as the rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginField {
    /// The plugin's position among the loaded plugins: the integration's handle.
    pub plugin: u16,
    /// Its position in the plugin's field list (extract_fields' field_id).
    pub id: u32,
    pub name: String,
    /// Str, U64, Bool, RelTime, AbsTime, IpAddr or IpNet.
    pub ty: FieldType,
    /// Several values; only `in`, `intersects` and `exists` apply (as in Falco).
    pub list: bool,
    pub arg: ArgForm,
    pub desc: String,
}

/// A source other than syscall and the plugin fields its rules may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceFields {
    pub source: String,
    pub fields: Vec<PluginField>,
}

/// A plugin field as a condition or output selects it: what `extract_fields` is asked.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PluginSel {
    pub plugin: u16,
    pub id: u32,
    /// The field's name, NUL-terminated for the plugin.
    pub name: std::ffi::CString,
    /// The argument as written (`[x]`), NUL-terminated, and as a number when it is one.
    pub key: Option<std::ffi::CString>,
    pub index: Option<u64>,
    pub ty: FieldType,
    pub list: bool,
}

/// The syscall table's fields that rules of a plugin source may use (Falco's event fields
/// of plugin events); the rest are unknown there, as in Falco.
const PLUGIN_SOURCE_FIELDS: &[&str] = &[
    "evt.num",
    "evt.time",
    "evt.time.s",
    "evt.time.iso8601",
    "evt.datetime",
    "evt.rawtime",
    "evt.rawtime.s",
    "evt.rawtime.ns",
    "evt.hostname",
    "evt.source",
    "evt.plugininfo",
    "evt.pluginname",
    "evt.is_async",
];

/// [`resolve`] in a source's scope: a plugin source's rules see its plugins' fields and
/// the event fields of plugin events; syscall rules (`None`) see the syscall table.
pub fn resolve_in(
    scope: Option<&SourceFields>,
    name: &str,
    bracket: Option<&str>,
) -> Result<(Field, FieldArg), FieldError> {
    let Some(scope) = scope else { return resolve(name, bracket) };
    // Syscall rules see the whole table, and fields of plugins that extract from any source.
    let syscall = scope.source == "syscall";
    if syscall {
        if let Ok(x) = resolve(name, bracket) {
            return Ok(x);
        }
    }
    let Some(pf) = scope.fields.iter().find(|f| f.name == name) else {
        return match PLUGIN_SOURCE_FIELDS.contains(&name) && !syscall {
            true => resolve(name, bracket),
            false => Err(FieldError::Unknown),
        };
    };
    let c =
        |s: &str| std::ffi::CString::new(s).map_err(|_| FieldError::BadArg("has a NUL byte in its argument"));
    let (key, index) = match (pf.arg, bracket.map(str::trim)) {
        (ArgForm::None, Some(_)) => return Err(FieldError::BadArg("takes no argument")),
        (ArgForm::Index | ArgForm::Key | ArgForm::IndexOrKey, None) => {
            return Err(FieldError::BadArg("needs an argument: [x]"))
        }
        (_, None) => (None, None),
        (_, Some("")) => return Err(FieldError::BadArg("has an empty argument")),
        (ArgForm::Index | ArgForm::OptIndex, Some(b)) => match b.parse::<u64>() {
            Ok(n) => (Some(c(b)?), Some(n)),
            Err(_) => return Err(FieldError::BadArg("needs a numeric index")),
        },
        (_, Some(b)) => (Some(c(b)?), b.parse::<u64>().ok()),
    };
    let sel =
        PluginSel { plugin: pf.plugin, id: pf.id, name: c(&pf.name)?, key, index, ty: pf.ty, list: pf.list };
    Ok((Field::PluginField, FieldArg::Plugin(std::sync::Arc::new(sel))))
}
