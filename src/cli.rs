//! The command-line surface (see `shared/spec/cli.md`).

use std::path::PathBuf;
use std::time::Duration;

use bridle_policy::{Network, SandboxMode};

use clap::{ArgAction, Args, Parser, Subcommand};

/// bridle: one sandbox policy for every way an AI coding agent touches the machine.
#[derive(Debug, Parser)]
#[command(name = "bridle", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags accepted before or after any subcommand.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// A shipped profile by name, or a profile YAML file by path.
    #[arg(
        long,
        global = true,
        value_name = "NAME|PATH",
        default_value = "workspace-write"
    )]
    pub profile: String,
    /// The workspace root (canonicalised; symlinks resolved). Defaults to the current directory.
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Only errors in the log output.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command confined by the policy.
    ///
    /// stdin, stdout and stderr are passed through. Exit status: the command's own; 128+N when
    /// it was killed by signal N; 124 when --timeout passed; 126 when a command rule refuses
    /// the command; 125 when the sandbox could not be established; 2 when the flags or the
    /// profile are wrong (in those three cases the command never ran, and stderr says why in one
    /// `bridle: ` line).
    Exec(ExecArgs),
    /// What this host can enforce, and whether the profile is enforceable.
    ///
    /// Exit 0 when every guarantee the selected profile requires can be enforced, 125 when not.
    Probe {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// An interactive bash in a pseudo-terminal, confined like `exec`.
    ///
    /// Exits with the shell's status.
    Shell(ShellArgs),
    /// Call one tool through the agent's pipeline, without a model.
    ///
    /// Prints one JSON object (`ok`, `content`, ...). Exit 0 when ok, 1 when the tool failed or
    /// was denied, 2 on a usage error. Tools: bash, read_file, write_file, edit_file, list_dir,
    /// glob, grep, terminal, str_replace_editor.
    /// With no terminal on stdin, approvals are answered `unavailable`.
    Tool {
        #[command(flatten)]
        confine: ConfineArgs,
        /// The tool: bash, read_file, write_file, edit_file, list_dir, glob, grep, terminal or
        /// str_replace_editor.
        name: String,
        /// Where the session keeps its private temp dir (`DIR/tmp`); must not be inside a
        /// writable root.
        #[arg(long, value_name = "DIR")]
        session_dir: Option<PathBuf>,
        /// The tool's arguments as a JSON object, e.g. '{"command": "ls"}'.
        #[arg(value_name = "JSON")]
        arguments: String,
    },
    /// Inspect, validate and explain the effective policy.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Run the agent headless on TASK until the turn ends; prints the final answer.
    ///
    /// Exit 0 only when the turn completed; 1 otherwise, with the reason on stderr. The session
    /// id is printed on stderr (`bridle: session ID`) before the first model request.
    Run(RunArgs),
    /// Serve the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim,
    /// Emacs).
    ///
    /// Newline-delimited JSON-RPC 2.0, protocol version 1. Each `session/new` opens a session
    /// whose workspace is the client's `cwd`, planned from --profile; every tool runs in the
    /// sandbox, never through the client's fs/terminal. stdout carries the protocol only;
    /// diagnostics go to stderr. Exits 0 when the client closes stdin.
    Acp(AcpArgs),
    /// The interactive terminal on a live session: streamed text, tool calls with their
    /// decisions, inline approvals and plan review; typing while the agent works steers it.
    ///
    /// `/help` lists the commands. Ctrl-C cancels the running turn; Ctrl-D, or Ctrl-C at an
    /// empty prompt, exits 0.
    Chat(ChatArgs),
    /// List, show, verify and export session logs.
    #[command(subcommand)]
    Log(LogCommand),
    /// Print a shell completion script: `bridle completions bash > /etc/bash_completion.d/bridle`.
    Completions {
        /// The shell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `bridle man | man -l -`.
    Man,
}

impl Command {
    /// Whether the user asked for JSON output (then errors are printed as JSON too).
    pub fn wants_json(&self) -> bool {
        match self {
            Command::Probe { json } => *json,
            Command::Policy(PolicyCommand::Show { json }) => *json,
            Command::Policy(PolicyCommand::Explain(e)) => e.wants_json(),
            Command::Log(LogCommand::List { json, .. } | LogCommand::Show { json, .. }) => *json,
            Command::Tool { .. } => true,
            Command::Run(args) => args.json,
            Command::Policy(PolicyCommand::Check { .. })
            | Command::Log(LogCommand::Verify { .. } | LogCommand::Export { .. })
            | Command::Exec(_)
            | Command::Shell(_)
            | Command::Acp(_)
            | Command::Chat(_)
            | Command::Completions { .. }
            | Command::Man => false,
        }
    }
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    pub confine: ConfineArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub confine: ConfineArgs,
    #[command(flatten)]
    pub session: SessionArgs,
    /// Start the session in plan mode.
    #[arg(long, conflicts_with = "plan_off")]
    pub plan: bool,
    /// One JSON object per line on stdout for each committed event a script needs, the final
    /// answer last (README "bridle run --json"); without it, one progress line per tool call
    /// on stderr (none with -q).
    #[arg(long)]
    pub json: bool,
    /// Leave plan mode (of a resumed session) before the task; with the task `/plan off`,
    /// only that.
    #[arg(long)]
    pub plan_off: bool,
    /// Continue session ID (its turn numbers continue).
    #[arg(long, value_name = "ID", conflicts_with = "fork")]
    pub resume: Option<String>,
    /// Branch a new session from session ID, up to event SEQ (default: its last event).
    #[arg(long, value_name = "ID[@SEQ]")]
    pub fork: Option<String>,
    /// The task.
    #[arg(value_name = "TASK")]
    pub task: String,
}

#[derive(Debug, Args)]
pub struct AcpArgs {
    #[command(flatten)]
    pub session: SessionArgs,
}

/// What every front end of a live session takes: the model and where its log lives.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// `openai:MODEL` (base URL from BRIDLE_BASE_URL, key from BRIDLE_API_KEY),
    /// `deepseek:MODEL` (key from DEEPSEEK_API_KEY) or `script:FILE` (a scripted model).
    #[arg(long, value_name = "SPEC")]
    pub model: String,
    /// The session log store.
    #[arg(long, value_name = "jsonl|sqlite", default_value = "jsonl", value_parser = ["jsonl", "sqlite"])]
    pub store: String,
    /// Where session logs live (default `$XDG_STATE_HOME/bridle/sessions`); refused when it
    /// lies inside a writable root.
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub confine: ConfineArgs,
    #[command(flatten)]
    pub session: SessionArgs,
    /// Continue session ID (its turn numbers continue).
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
}

/// Where session logs live, for every `bridle log` subcommand.
#[derive(Debug, Args)]
pub struct SessionDirArg {
    /// The session directory (default `$XDG_STATE_HOME/bridle/sessions`).
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Sessions with id, created, workspace, turns and last status, oldest first.
    List {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        dir: SessionDirArg,
    },
    /// A session's timeline: turns, steps, tool calls with their policy decision, approvals
    /// asked and answered, denials, escalations, mode and policy switches, why each turn
    /// ended. The log must verify.
    Show {
        /// The session: its id, a prefix only it starts with, or `last` (the newest).
        id: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Print arguments, results, input and answers whole (by default long ones are cut,
        /// with a marker saying how much; decisions and reasons are never cut).
        #[arg(long)]
        full: bool,
        #[command(flatten)]
        dir: SessionDirArg,
    },
    /// Check a session log's integrity: exit 0 intact, 1 tampered or corrupt (says where), 2
    /// could not check.
    Verify {
        /// The session: its id, a prefix only it starts with, or `last` (the newest).
        id: String,
        #[command(flatten)]
        dir: SessionDirArg,
    },
    /// Print a session's log (it must verify) in a portable format, whatever its store.
    Export {
        /// The session: its id, a prefix only it starts with, or `last` (the newest).
        id: String,
        /// The output format.
        #[arg(long, value_name = "FORMAT", value_parser = ["jsonl"], default_value = "jsonl")]
        format: String,
        #[command(flatten)]
        dir: SessionDirArg,
    },
}

/// How a command is confined, given the same way to every subcommand that runs one (`exec`,
/// `shell`, `tool`, `run`): each flag overrides the profile for this invocation only.
#[derive(Debug, Clone, Default, Args)]
pub struct ConfineArgs {
    /// Overrides the profile's sandbox mode.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub mode: Option<SandboxMode>,
    /// An extra writable root (repeatable).
    #[arg(long = "allow-write", value_name = "DIR")]
    pub allow_write: Vec<PathBuf>,
    /// Overrides the profile's network setting (`allow-list`: only the profile's
    /// `network.allow` hosts, through bridle's proxy).
    #[arg(long, value_name = "off|allow-list|on", value_parser = parse_network)]
    pub network: Option<Network>,
    /// Wall-clock limit (seconds, or a duration such as `90s`, `2m`, `1h`); the whole process
    /// tree is killed when it passes.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Pass NAME from bridle's environment, or set NAME=VALUE, inside the sandbox (repeatable).
    /// Names the profile scrubs (secrets) are refused.
    #[arg(long = "env", value_name = "NAME[=VALUE]", value_parser = parse_env)]
    pub env: Vec<EnvArg>,
}

/// One `--env`: a name, and the value to set (none: pass the host's value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvArg {
    pub name: String,
    pub value: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub confine: ConfineArgs,
    /// The command and its arguments (`--` is needed only when the command itself starts with
    /// `-`).
    #[arg(required = true, value_name = "CMD", trailing_var_arg = true)]
    pub argv: Vec<String>,
}

fn parse_mode(s: &str) -> Result<SandboxMode, String> {
    s.parse()
}

fn parse_network(s: &str) -> Result<Network, String> {
    s.parse()
}

/// Seconds (`30`, `0.5`) or a duration as in profiles (`90s`, `2m`, `1h`).
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = match s.trim().parse::<f64>() {
        Ok(secs) => secs,
        Err(_) => match bridle_policy::units::parse_seconds(s) {
            Ok(Some(secs)) => secs as f64,
            Ok(None) => return Err(format!("`{s}`: a timeout cannot be unlimited")),
            Err(e) => {
                return Err(format!(
                    "{e} (use seconds or a duration such as 90s, 2m, 1h)"
                ));
            }
        },
    };
    if !(secs > 0.0 && secs.is_finite() && secs <= 31_536_000.0) {
        return Err(format!(
            "`{s}`: a timeout must be greater than 0 and at most one year (31536000 seconds)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_env(s: &str) -> Result<EnvArg, String> {
    let (name, value) = match s.split_once('=') {
        Some((name, value)) => (name, Some(value.to_owned())),
        None => (s, None),
    };
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "`{name}` is not a variable name (letters, digits and `_`, not starting with a digit)"
        ));
    }
    if value.as_deref().is_some_and(|v| v.contains('\0')) {
        return Err(format!("the value of `{name}` contains a NUL byte"));
    }
    Ok(EnvArg {
        name: name.to_owned(),
        value,
    })
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// The effective policy after all layers, each value with the file and line that set it,
    /// and the sandbox spec it plans to for the workspace.
    Show {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Validate a profile file (exit 0 valid, 1 invalid with file:line:column and reason). A file
    /// at `.bridle/profile.yaml` is checked as workspace configuration: tighten-only, on top of
    /// `--profile`.
    Check {
        /// The profile file.
        file: PathBuf,
    },
    /// The decision the policy would take, and which rule or root decided it (exit 0 allow,
    /// 1 deny, 3 ask).
    #[command(subcommand)]
    Explain(ExplainCommand),
}

/// Every `explain` subcommand exits 0 when the decision is allow, 1 deny, 3 ask, so scripts can
/// branch on it; 2 is a usage error as everywhere.
#[derive(Debug, Subcommand)]
pub enum ExplainCommand {
    /// Explain a file write to PATH (relative paths resolve against the workspace).
    Write {
        /// The path written to.
        path: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Explain a network connection to HOST or HOST:PORT (port 443 when omitted): the decision of
    /// the allow-list and the entry that decides (exit 0 allow, 1 deny, 3 ask).
    // The text is the command's help, where `HOST[:PORT]` is the usual notation, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    Connect {
        /// The host, with an optional port: `crates.io`, `github.com:22`, `[::1]:8080`.
        #[arg(value_name = "HOST[:PORT]")]
        target: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Explain running a command: `bridle policy explain exec -- git push origin main`.
    Exec {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// The command and its arguments (`--` only when the command starts with `-`).
        #[arg(required = true, value_name = "CMD", trailing_var_arg = true)]
        argv: Vec<String>,
    },
    /// Explain a bash command line as the `bash` tool, the terminal and `bridle run` decide it:
    /// `bridle policy explain bash 'cd x && git push'`.
    Bash {
        /// The command line, as one argument.
        #[arg(value_name = "COMMAND_LINE")]
        command: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

impl ExplainCommand {
    fn wants_json(&self) -> bool {
        match self {
            ExplainCommand::Write { json, .. }
            | ExplainCommand::Exec { json, .. }
            | ExplainCommand::Bash { json, .. }
            | ExplainCommand::Connect { json, .. } => *json,
        }
    }
}

impl ConfineArgs {
    /// The profile overrides these flags make. Each `--allow-write` must name an existing
    /// directory: it is made absolute against the current directory and resolved (symlinks
    /// followed), so a typo is an error rather than a root that silently grants nothing.
    pub fn overrides(&self) -> Result<bridle_policy::Overrides, crate::UsageError> {
        let allow_write = self
            .allow_write
            .iter()
            .map(|p| resolve_writable_root(p).map(|r| r.display().to_string()))
            .collect::<Result<_, _>>()?;
        Ok(bridle_policy::Overrides {
            mode: self.mode,
            network: self.network,
            timeout_secs: self
                .timeout
                .map(|t| t.as_secs() + u64::from(t.subsec_nanos() > 0)),
            allow_write,
            env: self
                .env
                .iter()
                .map(|e| bridle_policy::EnvOverride {
                    name: e.name.clone(),
                    value: e.value.clone(),
                })
                .collect(),
        })
    }
}

/// One `--allow-write DIR`, resolved: it must exist and be a directory.
fn resolve_writable_root(dir: &std::path::Path) -> Result<PathBuf, crate::UsageError> {
    let bad = |why: String| crate::UsageError(format!("--allow-write `{}`: {why}", dir.display()));
    let real = std::fs::canonicalize(dir).map_err(|e| {
        bad(if e.kind() == std::io::ErrorKind::NotFound {
            "no such directory".to_owned()
        } else {
            e.to_string()
        })
    })?;
    if !real.is_dir() {
        return Err(bad(format!("`{}` is not a directory", real.display())));
    }
    Ok(real)
}
