//! A plugin's field list (`get_fields`: a JSON array) as the rules see it.

use anyhow::{bail, Context, Result};
use harrier_rules::fields::{ArgForm, FieldType, PluginField};
use serde::Deserialize;

#[derive(Deserialize)]
struct Arg {
    #[serde(default, rename = "isRequired")]
    required: bool,
    #[serde(default, rename = "isIndex")]
    index: bool,
    #[serde(default, rename = "isKey")]
    key: bool,
}

#[derive(Deserialize)]
struct Def {
    #[serde(rename = "type")]
    ty: String,
    name: String,
    #[serde(default, rename = "isList")]
    list: bool,
    arg: Option<Arg>,
    #[serde(default)]
    desc: String,
}

/// Parses `get_fields`' JSON for the plugin at `plugin` (its position among those loaded).
pub fn parse(plugin: u16, json: &str) -> Result<Vec<PluginField>> {
    let defs: Vec<Def> = serde_json::from_str(json).context("get_fields is not a JSON array of fields")?;
    let mut out = Vec::with_capacity(defs.len());
    for (id, d) in defs.into_iter().enumerate() {
        let ty = match d.ty.as_str() {
            "string" => FieldType::Str,
            "uint64" => FieldType::U64,
            "bool" => FieldType::Bool,
            "reltime" => FieldType::RelTime,
            "abstime" => FieldType::AbsTime,
            "ipaddr" => FieldType::IpAddr,
            "ipnet" => FieldType::IpNet,
            other => bail!("field {}: unknown type '{other}'", d.name),
        };
        let arg = match d.arg {
            None => ArgForm::None,
            Some(a) => match (a.index, a.key, a.required) {
                (true, true, _) => ArgForm::IndexOrKey,
                (true, false, true) => ArgForm::Index,
                (true, false, false) => ArgForm::OptIndex,
                (false, true, true) => ArgForm::Key,
                (false, true, false) => ArgForm::OptKey,
                (false, false, _) => ArgForm::None,
            },
        };
        if d.name.is_empty() {
            bail!("field {id}: no name");
        }
        out.push(PluginField { plugin, id: id as u32, name: d.name, ty, list: d.list, arg, desc: d.desc });
    }
    if out.is_empty() {
        bail!("get_fields declares no field");
    }
    Ok(out)
}

/// The extract_fields type code of a field type.
pub fn ftype(t: FieldType) -> u32 {
    use crate::abi::*;
    match t {
        FieldType::U64 => FTYPE_UINT64,
        FieldType::Bool => FTYPE_BOOL,
        FieldType::RelTime => FTYPE_RELTIME,
        FieldType::AbsTime => FTYPE_ABSTIME,
        FieldType::IpAddr => FTYPE_IPADDR,
        FieldType::IpNet => FTYPE_IPNET,
        _ => FTYPE_STRING,
    }
}

#[cfg(test)]
mod tests {
    use harrier_rules::fields::{ArgForm, FieldType};
    #[test]
    fn falco_field_lists_parse() {
        let j = r#"[{"type":"string","name":"ka.user.name","desc":"user"},
                    {"type":"string","name":"ka.uri.param","arg":{"isRequired":true,"isKey":true}},
                    {"type":"uint64","name":"ka.response.code","isList":false},
                    {"type":"string","name":"ka.req.pod.containers.image","isList":true,"arg":{"isIndex":true}}]"#;
        let f = super::parse(2, j).unwrap();
        assert_eq!((f[1].arg, f[1].id, f[1].plugin), (ArgForm::Key, 1, 2));
        assert_eq!(f[2].ty, FieldType::U64);
        assert!(f[3].list && f[3].arg == ArgForm::OptIndex);
        assert!(super::parse(0, r#"[{"type":"float","name":"x"}]"#)
            .unwrap_err()
            .to_string()
            .contains("float"));
        assert!(super::parse(0, "[]").is_err());
    }
}
