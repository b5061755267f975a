//! Falco 0.44.1's command line: every option, with Falco's names and meanings. The harrier
//! binary reads it when called as `falco` (argv[0]) or as `harrier falco ...`.

use clap::Parser;

#[derive(Parser, Debug, Default)]
#[command(
    name = "falco",
    about = "Falco - Cloud Native Runtime Security (Harrier's drop-in: Falco's options, Harrier's sensor)",
    override_usage = "falco [OPTION...]",
    disable_version_flag = true
)]
pub struct FalcoArgs {
    /// Configuration file. If not specified uses /etc/falco/falco.yaml.
    #[arg(short = 'c', value_name = "path")]
    pub config: Option<String>,
    /// Print a gVisor config for Falco's gVisor engine and exit (not supported: Harrier's
    /// sensor is eBPF).
    #[arg(long, value_name = "root", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub gvisor_generate_config: Option<String>,
    /// Print the config json schema and exit.
    #[arg(long)]
    pub config_schema: bool,
    /// Print the rule json schema and exit.
    #[arg(long)]
    pub rule_schema: bool,
    /// Turn off a specific <event_source>.
    #[arg(long, value_name = "event_source")]
    pub disable_source: Vec<String>,
    /// Run without processing events: check that the configuration and rules load.
    #[arg(long)]
    pub dry_run: bool,
    /// Enable only these event sources.
    #[arg(long, value_name = "event_source")]
    pub enable_source: Vec<String>,
    /// Print the events that are ignored by default for performance reasons and exit.
    #[arg(short = 'i')]
    pub ignored_events: bool,
    /// Show the name and description of all rules and exit (JSON with json_output).
    #[arg(short = 'L')]
    pub describe_all: bool,
    /// Show the name and description of <rule> and exit.
    #[arg(short = 'l', value_name = "rule")]
    pub describe_rule: Option<String>,
    /// List all defined fields and exit; with <source>, only that source's.
    #[arg(long, value_name = "source", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub list: Option<String>,
    /// List all defined syscall events, metaevents, tracepoint events and exit.
    #[arg(long)]
    pub list_events: bool,
    /// Print info on all loaded plugins and exit.
    #[arg(long)]
    pub list_plugins: bool,
    /// Stop after <num_seconds>.
    #[arg(short = 'M', value_name = "num_seconds", default_value_t = 0)]
    pub duration: u64,
    /// DEPRECATED: use --format markdown instead.
    #[arg(long)]
    pub markdown: bool,
    /// Output format of --list and --list-events: text, markdown or json.
    #[arg(long, value_name = "format")]
    pub format: Option<String>,
    /// Only print field names with --list.
    #[arg(short = 'N')]
    pub names_only: bool,
    /// Set the value of option <opt> to <val>, overriding the configuration file
    /// (dot notation, [n] list indexes, [] appends, backslash escapes).
    #[arg(short = 'o', long = "option", value_name = "opt>=<val")]
    pub options: Vec<String>,
    /// Print info for the plugin <plugin_name> and exit.
    #[arg(long, value_name = "plugin_name")]
    pub plugin_info: Option<String>,
    /// DEPRECATED: use -o append_output... instead.
    #[arg(short = 'p', long = "print", value_name = "output_format")]
    pub print: Option<String>,
    /// Write the PID to <pid_file>.
    #[arg(short = 'P', long = "pidfile", value_name = "pid_file")]
    pub pidfile: Option<String>,
    /// Rules file or directory to be loaded (repeatable).
    #[arg(short = 'r', value_name = "rules_file")]
    pub rules: Vec<String>,
    /// Print support information (JSON) and exit.
    #[arg(long)]
    pub support: bool,
    /// Turn off output buffering.
    #[arg(short = 'U', long = "unbuffered")]
    pub unbuffered: bool,
    /// Validate the rules file(s) and exit (repeatable).
    #[arg(short = 'V', long = "validate", value_name = "rules_file")]
    pub validate: Vec<String>,
    /// Verbose output.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Print version information and exit.
    #[arg(long)]
    pub version: bool,
    /// Print the system page size and exit.
    #[arg(long)]
    pub page_size: bool,
}

/// --format's value, as Falco checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

impl FalcoArgs {
    pub fn output_format(&self) -> Result<Format, String> {
        if self.markdown && self.format.is_some() {
            return Err("Cannot specify both --markdown and --format options together".into());
        }
        match self.format.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("") if self.markdown => Ok(Format::Markdown),
            None | Some("") | Some("text") => Ok(Format::Text),
            Some("markdown") => Ok(Format::Markdown),
            Some("json") => Ok(Format::Json),
            Some(_) => Err(format!(
                "Invalid format '{}'. Valid values are: text, markdown, json",
                self.format.as_deref().unwrap_or("")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> FalcoArgs {
        FalcoArgs::try_parse_from(std::iter::once("falco").chain(a.iter().copied())).unwrap()
    }

    #[test]
    fn falcos_options_parse_as_falco_reads_them() {
        let a =
            parse(&["-c", "f.yaml", "-r", "a.yaml", "-r", "d/", "-o", "json_output=true", "--option=x.y=1"]);
        assert_eq!(a.config.as_deref(), Some("f.yaml"));
        assert_eq!(a.rules, ["a.yaml", "d/"]);
        assert_eq!(a.options, ["json_output=true", "x.y=1"]);
        let a = parse(&["-V", "a.yaml", "-V", "b.yaml", "-L"]);
        assert_eq!(a.validate, ["a.yaml", "b.yaml"]);
        assert!(a.describe_all);
        assert_eq!(parse(&["--list"]).list.as_deref(), Some(""));
        assert_eq!(parse(&["--list=syscall", "-N"]).list.as_deref(), Some("syscall"));
        assert_eq!(parse(&["-M", "5", "--dry-run"]).duration, 5);
        assert_eq!(parse(&["--format", "JSON"]).output_format(), Ok(Format::Json));
        assert!(parse(&["--format", "yaml"])
            .output_format()
            .unwrap_err()
            .starts_with("Invalid format 'yaml'"));
        assert!(parse(&["--markdown", "--format", "text"]).output_format().is_err());
        assert!(parse(&["--version"]).version);
    }
}
