//! The `bridle` command-line interface: parses flags, wires the crates, prints.

mod agent_host;
mod cli;
mod exec_cmd;
mod log_cmd;
mod net_wiring;
mod policy_cmd;
mod probe_cmd;
mod run_cmd;
mod session_facts;
mod shell_cmd;
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
    let cli = Cli::parse();
    init_logging(&cli.global);
    let result = match &cli.command {
        Command::Policy(cmd) => policy_cmd::run(&cli.global, cmd),
        Command::Log(cmd) => log_cmd::run(&cli.global, cmd),
        Command::Run(args) => run_cmd::run(&cli.global, args),
        Command::Exec(args) => Ok(exec_cmd::run(&cli.global, args)),
        Command::Probe { json } => probe_cmd::run(&cli.global, *json),
        Command::Shell => shell_cmd::run(&cli.global),
        Command::Tool {
            name,
            session_dir,
            arguments,
        } => tool_cmd::run(&cli.global, name, session_dir.as_deref(), arguments),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "bridle: {}", error_chain(&err));
            ExitCode::from(1)
        }
    }
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
