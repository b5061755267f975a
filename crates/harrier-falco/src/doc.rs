//! The configuration as Falco builds it: the main file, then the files and folders its
//! `config_files` names (each with its merge strategy), then every `-o` on top. What is read
//! from the result can still name the file (or `-o`) each top-level key came from.

use crate::opath;
use anyhow::{anyhow, bail, Context, Result};
use harrier_rules::yaml::{self, Node, Pos};
use std::path::Path;

/// Where Falco looks when `-c` is not given.
pub const DEFAULT_CONFIG: &str = "/etc/falco/falco.yaml";

/// How an included file's top-level keys merge (Falco's config_files strategies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Lists are extended, other values replaced (the default).
    Append,
    Override,
    /// Only keys not set yet.
    AddOnly,
}

#[derive(Debug, Clone)]
pub struct ConfigDoc {
    /// A mapping (empty when there was no file).
    pub root: Node,
    /// The main file ("" without one).
    pub main: String,
    /// Per top-level key, the file that set it last ("-o" for the command line).
    origin: Vec<(String, String)>,
    /// Every config file read, in order: the main one first (watch_config_files watches these).
    pub files: Vec<String>,
    /// Folders named by config_files (a file added there later is seen on reload).
    pub folders: Vec<String>,
}

fn parse_root(name: &str, text: &str) -> Result<Node> {
    let docs = yaml::parse(text).map_err(|e| anyhow!("{name}:{}:{}: {}", e.pos.line, e.pos.col, e.msg))?;
    match docs.into_iter().next() {
        None => Ok(Node::Map { entries: Vec::new(), pos: Pos::default() }),
        Some(n) if n.is_null() => Ok(Node::Map { entries: Vec::new(), pos: n.pos() }),
        Some(n @ Node::Map { .. }) => Ok(n),
        Some(n) => {
            let p = n.pos();
            bail!("{name}:{}:{}: the configuration must be a mapping, not {}", p.line, p.col, n.kind())
        }
    }
}

fn entries(n: &mut Node) -> &mut Vec<(Node, Node)> {
    match n {
        Node::Map { entries, .. } => entries,
        _ => unreachable!("the root is always a mapping"),
    }
}

impl ConfigDoc {
    /// Falco's order: the main file, `-o config_files=...`, the included files, then
    /// every `-o`. `path` None: the empty configuration.
    pub fn load(path: Option<&str>, options: &[String]) -> Result<ConfigDoc> {
        let (main, text) = match path {
            Some(p) => (p, std::fs::read_to_string(p).map_err(|e| anyhow!("reading {p}: {e}"))?),
            None => ("", String::new()),
        };
        Self::from_text(main, &text, options)
    }

    pub fn from_text(main: &str, text: &str, options: &[String]) -> Result<ConfigDoc> {
        let root = parse_root(main, text)?;
        let origin = match &root {
            Node::Map { entries, .. } => entries
                .iter()
                .filter_map(|(k, _)| Some((k.as_str()?.to_string(), main.to_string())))
                .collect(),
            _ => Vec::new(),
        };
        let files = if main.is_empty() { Vec::new() } else { vec![main.to_string()] };
        let mut d = ConfigDoc { root, main: main.to_string(), origin, files, folders: Vec::new() };
        for o in options.iter().filter(|o| o.starts_with("config_files")) {
            d.option(o)?;
        }
        d.include()?;
        for o in options {
            d.option(o)?;
        }
        Ok(d)
    }

    fn option(&mut self, opt: &str) -> Result<()> {
        opath::apply(&mut self.root, opt)?;
        let top = opt.split(['.', '[', '=']).next().unwrap_or("");
        self.set_origin(top, "-o");
        Ok(())
    }

    fn set_origin(&mut self, key: &str, file: &str) {
        match self.origin.iter_mut().find(|(k, _)| k == key) {
            Some(o) => o.1 = file.to_string(),
            None => self.origin.push((key.to_string(), file.to_string())),
        }
    }

    /// The file (or "-o") a top-level key came from.
    pub fn file_of(&self, key: &str) -> &str {
        self.origin.iter().find(|(k, _)| k == key).map_or(self.main.as_str(), |(_, f)| f.as_str())
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.root.get(key)
    }

    /// config_files: files merged in order, folders' regular files sorted by name;
    /// paths that do not exist are skipped, as Falco skips them.
    fn include(&mut self) -> Result<()> {
        let Some(list) = self.get("config_files").cloned() else { return Ok(()) };
        let items = match list {
            Node::Seq { items, .. } => items,
            n if n.is_null() => Vec::new(),
            n => vec![n],
        };
        let file = self.file_of("config_files").to_string();
        for item in items {
            let (path, strategy) = entry(&file, &item)?;
            if !self.main.is_empty() && Path::new(&path) == Path::new(&self.main) {
                bail!("Config error: 'config_files' directive tried to recursively include main config file: {}.", self.main);
            }
            let p = Path::new(&path);
            if p.is_file() {
                self.merge(&path, strategy)?;
            } else if p.is_dir() {
                self.folders.push(path.clone());
                let mut names: Vec<String> = std::fs::read_dir(p)
                    .with_context(|| format!("reading {path}"))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .map(|p| p.display().to_string())
                    .collect();
                names.sort();
                for n in names {
                    self.merge(&n, strategy)?;
                }
            }
        }
        Ok(())
    }

    fn merge(&mut self, path: &str, strategy: Strategy) -> Result<()> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow!("reading {path}: {e}"))?;
        let Node::Map { entries: new, .. } = parse_root(path, &text)? else { unreachable!() };
        self.files.push(path.to_string());
        for (k, v) in new {
            let key = k.as_str().unwrap_or("").to_string();
            if key == "config_files" {
                bail!("Config error: 'config_files' directive in included config file {path}.");
            }
            let root = entries(&mut self.root);
            let old = root.iter_mut().find(|(rk, _)| rk.as_str() == Some(&key));
            match (strategy, old, v) {
                (Strategy::AddOnly, Some(_), _) => continue,
                (Strategy::Append, Some((_, Node::Seq { items, .. })), Node::Seq { items: more, .. }) => {
                    items.extend(more)
                }
                (_, Some((_, old)), v) => *old = v,
                (_, None, v) => root.push((k, v)),
            }
            self.set_origin(&key, path);
        }
        Ok(())
    }
}

/// One config_files entry: a path, or `{path, strategy}`.
fn entry(file: &str, item: &Node) -> Result<(String, Strategy)> {
    let at = |n: &Node| format!("{file}:{}:{}", n.pos().line, n.pos().col);
    if let Some(p) = item.as_str() {
        return Ok((p.to_string(), Strategy::Append));
    }
    let path = item
        .get("path")
        .and_then(|p| p.as_str())
        .ok_or_else(|| anyhow!("{}: a config_files entry is a path or a mapping with a path", at(item)))?;
    let strategy = match item.get("strategy").map(|s| (s, s.as_str())) {
        None | Some((_, Some("append"))) => Strategy::Append,
        Some((_, Some("override"))) => Strategy::Override,
        Some((_, Some("add-only"))) => Strategy::AddOnly,
        Some((s, v)) => bail!(
            "{}: config_files strategy must be append, override or add-only, not '{}'",
            at(s),
            v.unwrap_or("a collection")
        ),
    };
    Ok((path.to_string(), strategy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("harrier-falco-doc-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn config_files_merge_with_each_strategy_and_options_come_last() {
        let d = tmp("merge");
        let confd = d.join("conf.d");
        std::fs::create_dir(&confd).unwrap();
        // Folder files merge in name order: 10 before 20.
        std::fs::write(confd.join("20-b.yaml"), "rules_files: [/r/b.yaml]\npriority: error\n").unwrap();
        std::fs::write(confd.join("10-a.yaml"), "rules_files: [/r/a.yaml]\njson_output: true\n").unwrap();
        let over = d.join("over.yaml");
        std::fs::write(&over, "rules_files: [/r/o.yaml]\n").unwrap();
        let add = d.join("add.yaml");
        std::fs::write(&add, "priority: debug\nlog_level: debug\n").unwrap();
        let main = d.join("falco.yaml");
        let text = format!(
            "config_files:\n  - {}\n  - /does/not/exist\n  - path: {}\n    strategy: add-only\n\
             rules_files:\n  - /r/main.yaml\npriority: warning\n",
            confd.display(),
            add.display()
        );
        std::fs::write(&main, &text).unwrap();
        let opts = vec![format!("config_files[]={}", over.display()), "json_output=false".to_string()];
        let _ = std::fs::write(&over, "rules_files: [/r/o.yaml]\n");
        let doc = ConfigDoc::load(Some(main.to_str().unwrap()), &opts).unwrap();
        let rules: Vec<&str> = match doc.get("rules_files").unwrap() {
            Node::Seq { items, .. } => items.iter().map(|i| i.as_str().unwrap()).collect(),
            _ => panic!(),
        };
        // The -o entry is a plain path: appended like the others.
        assert_eq!(rules, ["/r/main.yaml", "/r/a.yaml", "/r/b.yaml", "/r/o.yaml"]);
        assert_eq!(doc.get("priority").unwrap().as_str(), Some("error"), "add-only keeps what is set");
        assert_eq!(doc.get("log_level").unwrap().as_str(), Some("debug"), "add-only adds what is not");
        assert_eq!(doc.get("json_output").unwrap().as_str(), Some("false"), "-o comes last");
        assert_eq!(doc.file_of("json_output"), "-o");
        assert!(doc.file_of("priority").ends_with("20-b.yaml"));
        assert_eq!(doc.files.len(), 5);
        assert_eq!(doc.folders, [confd.display().to_string()]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn includes_cannot_include_again_nor_the_main_file() {
        let d = tmp("loop");
        let inc = d.join("inc.yaml");
        std::fs::write(&inc, "config_files: [/x]\n").unwrap();
        let main = d.join("falco.yaml");
        std::fs::write(&main, format!("config_files: [{}]\n", inc.display())).unwrap();
        let e = ConfigDoc::load(Some(main.to_str().unwrap()), &[]).unwrap_err().to_string();
        assert!(e.contains("'config_files' directive in included config file"), "{e}");
        std::fs::write(&main, format!("config_files: [{}]\n", main.display())).unwrap();
        let e = ConfigDoc::load(Some(main.to_str().unwrap()), &[]).unwrap_err().to_string();
        assert!(e.contains("recursively include main config file"), "{e}");
        let e = ConfigDoc::from_text("c.yaml", "config_files:\n  - path: /x\n    strategy: merge\n", &[])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "c.yaml:3:15: config_files strategy must be append, override or add-only, not 'merge'");
        let _ = std::fs::remove_dir_all(&d);
    }
}
