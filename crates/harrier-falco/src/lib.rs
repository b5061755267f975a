//! The Falco-facing surface of Harrier, in one place: falco.yaml as Falco builds it
//! (`doc`: the main file, config_files, `-o`), what each key means here (`keys`, `config`),
//! Falco's command line (`cli`) and what `-V` reports (`validate`).

pub mod cli;
pub mod config;
pub mod describe;
pub mod doc;
pub mod keys;
pub mod lists;
pub mod opath;
pub mod validate;
