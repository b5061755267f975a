//! A plugin's shared object: opened once, its symbols resolved and its description read.
//! Its state ([`crate::Plugin`]) is made per source thread, as Falco makes one per inspector.

use crate::abi::{self, Event, EventInput, FieldExtractInput, InitInput, Metric, Rc};
use anyhow::{bail, Context, Result};
use std::ffi::{c_char, c_void, CStr};

type Str = unsafe extern "C" fn() -> *const c_char;
type StrOf = unsafe extern "C" fn(*mut c_void) -> *const c_char;

/// The entry points, by their exported names (`plugin_<name>`); None when not exported.
#[derive(Default)]
pub(crate) struct Api {
    pub get_required_api_version: Option<Str>,
    pub get_init_schema: Option<unsafe extern "C" fn(*mut u32) -> *const c_char>,
    pub init: Option<unsafe extern "C" fn(*const InitInput, *mut Rc) -> *mut c_void>,
    pub destroy: Option<unsafe extern "C" fn(*mut c_void)>,
    pub get_last_error: Option<StrOf>,
    pub get_name: Option<Str>,
    pub get_description: Option<Str>,
    pub get_contact: Option<Str>,
    pub get_version: Option<Str>,
    pub get_id: Option<unsafe extern "C" fn() -> u32>,
    pub get_event_source: Option<Str>,
    pub open: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *mut Rc) -> *mut c_void>,
    pub close: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    pub list_open_params: Option<unsafe extern "C" fn(*mut c_void, *mut Rc) -> *const c_char>,
    pub get_progress: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut u32) -> *const c_char>,
    pub event_to_string: Option<unsafe extern "C" fn(*mut c_void, *const EventInput) -> *const c_char>,
    pub next_batch:
        Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut u32, *mut *mut *mut Event) -> Rc>,
    pub get_extract_event_sources: Option<Str>,
    pub get_fields: Option<Str>,
    pub extract_fields:
        Option<unsafe extern "C" fn(*mut c_void, *const EventInput, *const FieldExtractInput) -> Rc>,
    pub parse_event: Option<unsafe extern "C" fn(*mut c_void, *const EventInput, *const c_void) -> Rc>,
    pub get_async_events: Option<Str>,
    pub get_metrics: Option<unsafe extern "C" fn(*mut c_void, *mut u32) -> *const Metric>,
}

/// What a plugin declares it can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    pub sourcing: bool,
    pub extraction: bool,
    pub parsing: bool,
    pub async_events: bool,
}

/// An opened plugin library.
pub struct Library {
    pub path: String,
    pub name: String,
    pub version: String,
    pub required_api: String,
    pub description: String,
    pub contact: String,
    pub caps: Caps,
    /// Sourcing: its event source and plugin id.
    pub source: Option<String>,
    pub id: u32,
    /// Extraction: its fields' JSON, and the sources it extracts from (empty: any).
    pub fields_json: Option<String>,
    pub extract_sources: Vec<String>,
    pub init_schema: Option<String>,
    pub(crate) api: Api,
    _lib: libloading::Library,
}

/// A string a plugin returned (None for null), copied.
pub(crate) fn owned(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn call_str(f: Option<Str>) -> Option<String> {
    f.and_then(|f| owned(unsafe { f() }))
}

/// A JSON array of strings from a plugin (`get_extract_event_sources`...).
fn str_list(what: &str, f: Option<Str>) -> Result<Vec<String>> {
    match call_str(f) {
        None => Ok(Vec::new()),
        Some(j) => {
            serde_json::from_str(&j).with_context(|| format!("{what} is not a JSON array of strings: {j}"))
        }
    }
}

/// Whether a plugin requiring `req` runs on this host: the same major, a minor (and patch)
/// no newer than the host's.
pub fn api_supported(req: &str) -> bool {
    let mut p = req.trim().split('.').map(|x| x.parse::<u32>().ok());
    match (p.next().flatten(), p.next().flatten(), p.next().flatten()) {
        (Some(ma), Some(mi), Some(pa)) => {
            ma == abi::API_MAJOR && (mi < abi::API_MINOR || (mi == abi::API_MINOR && pa == 0))
        }
        _ => false,
    }
}

impl Library {
    /// Opens `path` and reads what the plugin declares. Errors name the file and the cause.
    pub fn open(path: &str) -> Result<Library> {
        // SAFETY: loading runs the object's constructors: the plugin is trusted code, as in Falco.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| anyhow::anyhow!("cannot load plugin {path}: {e}"))?;
        macro_rules! sym {
            ($name:literal) => {
                unsafe { lib.get(concat!("plugin_", $name, "\0").as_bytes()) }
                    .ok()
                    .map(|s: libloading::Symbol<_>| *s)
            };
        }
        let api = Api {
            get_required_api_version: sym!("get_required_api_version"),
            get_init_schema: sym!("get_init_schema"),
            init: sym!("init"),
            destroy: sym!("destroy"),
            get_last_error: sym!("get_last_error"),
            get_name: sym!("get_name"),
            get_description: sym!("get_description"),
            get_contact: sym!("get_contact"),
            get_version: sym!("get_version"),
            get_id: sym!("get_id"),
            get_event_source: sym!("get_event_source"),
            open: sym!("open"),
            close: sym!("close"),
            list_open_params: sym!("list_open_params"),
            get_progress: sym!("get_progress"),
            event_to_string: sym!("event_to_string"),
            next_batch: sym!("next_batch"),
            get_extract_event_sources: sym!("get_extract_event_sources"),
            get_fields: sym!("get_fields"),
            extract_fields: sym!("extract_fields"),
            parse_event: sym!("parse_event"),
            get_async_events: sym!("get_async_events"),
            get_metrics: sym!("get_metrics"),
        };
        let required_api = call_str(api.get_required_api_version)
            .with_context(|| format!("{path}: not a Falco plugin (no plugin_get_required_api_version)"))?;
        if !api_supported(&required_api) {
            bail!(
                "{path}: the plugin requires plugin API {required_api}; this host implements {}.{}.0",
                abi::API_MAJOR,
                abi::API_MINOR
            );
        }
        let missing = [
            ("init", api.init.is_none()),
            ("destroy", api.destroy.is_none()),
            ("get_last_error", api.get_last_error.is_none()),
            ("get_name", api.get_name.is_none()),
            ("get_description", api.get_description.is_none()),
            ("get_contact", api.get_contact.is_none()),
            ("get_version", api.get_version.is_none()),
        ];
        if let Some((s, _)) = missing.iter().find(|m| m.1) {
            bail!("{path}: the plugin does not export the required symbol plugin_{s}");
        }
        let caps = Caps {
            sourcing: api.get_id.is_some()
                && api.get_event_source.is_some()
                && api.open.is_some()
                && api.close.is_some()
                && api.next_batch.is_some(),
            extraction: api.get_fields.is_some() && api.extract_fields.is_some(),
            parsing: api.parse_event.is_some(),
            async_events: api.get_async_events.is_some(),
        };
        let name = call_str(api.get_name).unwrap_or_default();
        if !(caps.sourcing || caps.extraction || caps.parsing || caps.async_events) {
            bail!("{path}: plugin {name} declares no capability (event sourcing, field extraction, parsing, async events)");
        }
        let source = if caps.sourcing { call_str(api.get_event_source) } else { None };
        let id = match (caps.sourcing, api.get_id) {
            (true, Some(f)) => unsafe { f() },
            _ => 0,
        };
        let mut extract_sources = match caps.extraction {
            true => str_list("get_extract_event_sources", api.get_extract_event_sources)
                .with_context(|| format!("plugin {name}"))?,
            false => Vec::new(),
        };
        // A source plugin extracts from its own source when it names none.
        if let (true, Some(s)) = (caps.extraction && !extract_sources.is_empty(), &source) {
            if !extract_sources.contains(s) {
                extract_sources.push(s.clone());
            }
        } else if let (true, Some(s)) = (caps.extraction, &source) {
            extract_sources.push(s.clone());
        }
        let init_schema = api.get_init_schema.and_then(|f| {
            let mut ty = 0u32;
            let s = owned(unsafe { f(&mut ty) });
            s.filter(|_| ty == 1)
        });
        Ok(Library {
            path: path.to_string(),
            version: call_str(api.get_version).unwrap_or_default(),
            description: call_str(api.get_description).unwrap_or_default(),
            contact: call_str(api.get_contact).unwrap_or_default(),
            fields_json: if caps.extraction { call_str(api.get_fields) } else { None },
            name,
            required_api,
            caps,
            source,
            id,
            extract_sources,
            init_schema,
            api,
            _lib: lib,
        })
    }

    /// Whether its fields apply to events of `source`.
    pub fn extracts_from(&self, source: &str) -> bool {
        self.caps.extraction
            && (self.extract_sources.is_empty() || self.extract_sources.iter().any(|s| s == source))
    }
}

// SAFETY: the library's entry points are plain functions; per-state calls are serialized by
// [`crate::Plugin`], which is made and used by one thread.
unsafe impl Send for Library {}
unsafe impl Sync for Library {}
