//! The `bridle` command-line interface: parses flags, wires the crates, prints.

mod acp_cmd;
mod agent_host;
mod chat;
mod cli;
mod exec_cmd;
mod log_cmd;
mod net_wiring;
mod policy_cmd;
mod probe_cmd;
mod remove_tree;
mod run_cmd;
mod session_facts;
mod session_registry;
mod session_wiring;
mod shell_cmd;
mod style;
mod tool_cmd;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command, GlobalArgs};

fn init_logging(global: &GlobalArgs) {
    let default = match (global.quiet, global.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colours only on a terminal: logs piped into files or CI output stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi)
        .init();
}

fn main() -> ExitCode {
    // The launcher: bridle re-executed by itself to confine a command. Not a clap subcommand,
    // so it never shows up in --help.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == bridle_sandbox::LAUNCHER_SUBCOMMAND)
    {
        bridle_sandbox::launcher_main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    init_logging(&cli.global);
    let result = match &cli.command {
        Command::Policy(cmd) => policy_cmd::run(&cli.global, cmd),
        Command::Log(cmd) => log_cmd::run(&cli.global, cmd),
        Command::Run(args) => run_cmd::run(&cli.global, args),
        Command::Acp(args) => acp_cmd::run(&cli.global, args),
        Command::Chat(args) => chat::run(&cli.global, args),
        Command::Exec(args) => Ok(exec_cmd::run(&cli.global, args)),
        Command::Probe { json } => probe_cmd::run(&cli.global, *json),
        Command::Shell(args) => shell_cmd::run(&cli.global, args),
        Command::Tool {
            confine,
            name,
            session_dir,
            arguments,
        } => tool_cmd::run(
            &cli.global,
            confine,
            name,
            session_dir.as_deref(),
            arguments,
        ),
        Command::Completions { shell } => completions(*shell),
        Command::Man => man_page(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // The reader of stdout went away (`bridle policy show | head`): it has what it read.
        // (Only for commands whose one job is to print: elsewhere a pipe may be a child's.)
        Err(err)
            if is_broken_pipe(&err)
                && matches!(
                    cli.command,
                    Command::Policy(_) | Command::Completions { .. } | Command::Man
                ) =>
        {
            ExitCode::SUCCESS
        }
        Err(err) => {
            // `probe` answers one question, "can this profile be enforced here": anything that
            // keeps it from saying yes is a no.
            // `policy check` says whether a file is valid: invalid is its answer 1 (cli.md).
            let code = match cli.command {
                Command::Probe { .. } => exec_cmd::EXIT_SANDBOX_UNAVAILABLE,
                Command::Policy(cli::PolicyCommand::Check { .. }) => 1,
                _ => exit_code_of(&err),
            };
            let message = error_chain(&err);
            if matches!(cli.command, Command::Tool { .. }) {
                // `tool` always prints its one object, with the `content` the model would see.
                let mut value = error_json(&message, code);
                value["content"] = serde_json::json!(format!("not run: {message}"));
                let _ = writeln!(std::io::stdout().lock(), "{value}");
            } else {
                report_error(&message, code, cli.command.wants_json());
            }
            ExitCode::from(code)
        }
    }
}

/// Whether `e` is a write to a pipe whose reader has closed it (`bridle ... | head`): what the
/// reader wanted it has, so it is no error to report.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        let kind = cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                cause
                    .downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            });
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// The host cannot enforce what the profile requires: exit 125 (`exec`'s status for it), and
/// the line `bridle: sandbox unavailable: GUARANTEE (why)`. Nothing ran.
#[derive(Debug)]
pub(crate) struct SandboxUnavailable(pub String);

impl std::fmt::Display for SandboxUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sandbox unavailable: {}", self.0)
    }
}

impl std::error::Error for SandboxUnavailable {}

/// Exit status for an error in what was asked (flags, arguments, a profile that does not load,
/// a workspace that cannot be used): nothing ran.
pub(crate) const EXIT_USAGE: u8 = 2;

/// An error in what the user asked for rather than in running it: exit [`EXIT_USAGE`].
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The exit status for a command that failed with `err`: a usage or profile error is 2,
/// anything else 1.
pub(crate) fn exit_code_of(err: &anyhow::Error) -> u8 {
    let usage = err.chain().any(|cause| {
        cause.downcast_ref::<UsageError>().is_some()
            || cause.downcast_ref::<bridle_policy::PolicyError>().is_some()
    });
    if err
        .chain()
        .any(|cause| cause.downcast_ref::<SandboxUnavailable>().is_some())
    {
        return exec_cmd::EXIT_SANDBOX_UNAVAILABLE;
    }
    if usage { EXIT_USAGE } else { 1 }
}

/// Prints a failure: one `bridle:` line on stderr, or, when JSON output was asked for, one
/// JSON object on stdout (so a script reading stdout sees the failure in the format it parses).
pub(crate) fn report_error(message: &str, code: u8, as_json: bool) {
    if as_json {
        let value = error_json(message, code);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}");
    } else {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "bridle: {message}");
    }
}

/// The JSON object a failure is on stdout under `--json`.
fn error_json(message: &str, code: u8) -> serde_json::Value {
    serde_json::json!({"ok": false, "error": message, "exit_code": code})
}

/// A command line clap refused (or `--help`/`--version`, which clap reports the same way).
fn usage_error(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = err.print();
        return ExitCode::from(
            if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                EXIT_USAGE
            } else {
                0
            },
        );
    }
    if err.kind() == ErrorKind::InvalidUtf8 {
        report_error(&not_text(std::env::args_os()), EXIT_USAGE, json_asked(err));
        return ExitCode::from(EXIT_USAGE);
    }
    if json_asked(err) {
        // The error's paragraph (its first line, and the arguments it lists under it).
        let rendered = err.render().to_string();
        let message = rendered
            .lines()
            .take_while(|line| !line.trim().is_empty())
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
            .trim_start_matches("error: ")
            .to_owned();
        report_error(&message, EXIT_USAGE, true);
    } else {
        let _ = err.print();
    }
    ExitCode::from(EXIT_USAGE)
}

/// Whether the command line asked for JSON: a `--json` before any `--` (after it, the words
/// are the command's), unless `--json` itself is what clap refused (`bridle exec --json`).
fn json_asked(err: &clap::Error) -> bool {
    let refused = err.kind() == clap::error::ErrorKind::UnknownArgument
        && matches!(
            err.get(clap::error::ContextKind::InvalidArg),
            Some(clap::error::ContextValue::String(arg)) if arg == "--json"
        );
    !refused
        && std::env::args_os()
            .take_while(|a| a != "--")
            .any(|a| a == "--json")
}

/// The message for a command line with an argument that is not UTF-8, naming it.
fn not_text(args: impl Iterator<Item = std::ffi::OsString>) -> String {
    let Some((n, arg)) = args.enumerate().find(|(_, a)| a.to_str().is_none()) else {
        return "invalid UTF-8 in the command line".to_owned();
    };
    format!(
        "argument {n} ({:?}) is not valid UTF-8: bridle takes arguments as text",
        arg.to_string_lossy()
    )
}

fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut command, "bridle", &mut out);
    Ok(0)
}

fn man_page() -> anyhow::Result<u8> {
    let command = <Cli as clap::CommandFactory>::command();
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(command).render(&mut out)?;
    Ok(0)
}

/// One line: the error and its causes, separated by `: `, without repeating a cause that the
/// message above it already includes.
pub(crate) fn error_chain(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    // Errors quote what they read (a log line, a file name): never let that drive the terminal.
    bridle_exec::printable::printable(&line)
}
