//! The `aether` command line: parses flags, loads configuration, runs one subcommand, prints
//! errors with their causes and picks the exit code. The only crate that uses `anyhow`.

/// `println!` for the operator's terminal: the text passes through [`terminal_safe`]. Every
/// line the CLI prints can hold what an agent, a tool or an upstream wrote. A reader that went
/// away (`aether audit tail | head`) ends the command quietly.
macro_rules! say {
    () => { $crate::out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out(format_args!("{}\n", $crate::terminal_safe(&format!($($t)*)))) };
}

/// `print!` through [`terminal_safe`].
macro_rules! say_inline {
    ($($t:tt)*) => { $crate::out(format_args!("{}", $crate::terminal_safe(&format!($($t)*)))) };
}

/// `eprintln!` through [`terminal_safe`].
macro_rules! tell {
    ($($t:tt)*) => { eprintln!("{}", $crate::terminal_safe(&format!($($t)*))) };
}

mod cmd;
mod columns;
mod progress;
mod setup;
mod telemetry;

/// Writes to stdout; when its reader has gone (a closed pipe), the command ends at once with
/// success, as `head` expects of the program before it, instead of panicking mid-line.
#[doc(hidden)]
pub fn out(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text) {
        stdout_gone(e);
    }
}

/// `--json`, one style for every command: each item of a list on a line of its own (JSON
/// Lines: an empty list prints nothing, and a list reads the same whether it is printed whole
/// or streamed, as `audit tail --follow` streams it).
#[doc(hidden)]
pub fn json_lines<T: serde::Serialize>(
    items: impl IntoIterator<Item = T>,
) -> serde_json::Result<()> {
    for item in items {
        json_line(&item)?;
    }
    Ok(())
}

/// `--json` of one thing (a report, a definition, a run's outcome): one line.
#[doc(hidden)]
pub fn json_line(value: &impl serde::Serialize) -> serde_json::Result<()> {
    say!("{}", serde_json::to_string(value)?);
    Ok(())
}

fn stdout_gone(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("aether: cannot write to standard output: {e}");
    std::process::exit(1);
}

use std::borrow::Cow;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Text made safe for a terminal: control characters other than newline and tab (escape
/// sequences that move the cursor, rewrite earlier lines, retitle the window or write to the
/// clipboard; a carriage return that hides a line's start), and the invisible characters that
/// reorder or hide text (bidirectional overrides and isolates, zero-width characters) are
/// shown as `\uXXXX` escapes (JSON's, so `--json` output stays valid JSON).
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
    };
    // A carriage return that ends a line (CSV's `\r\n`) is kept.
    let bare_cr = |at: usize| text[at..].starts_with('\r') && !text[at..].starts_with("\r\n");
    if !text
        .char_indices()
        .any(|(at, c)| unsafe_char(c) && (c != '\r' || bare_cr(at)))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (at, c) in text.char_indices() {
        if unsafe_char(c) && (c != '\r' || bare_cr(at)) {
            // JSON's escape: valid inside the strings of `--json` output, plain elsewhere.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[derive(Parser, Debug)]
#[command(
    name = "aether",
    version,
    about = "Aether: a governed tool host for AI agents (MCP)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve MCP over Streamable HTTP (and the admin API) on 127.0.0.1:8484.
    Serve(cmd::serve::Args),
    /// Serve MCP over stdio, for an MCP host that starts Aether itself (Claude Desktop, LM Studio).
    McpServe(cmd::mcp_serve::Args),
    /// What a server started here would run with, what the store says now, and every problem
    /// found with its fix. Reads only.
    Status(cmd::status::Args),
    /// `status`, exiting 1 when a problem is found (for scripts and CI).
    Doctor(cmd::status::Args),
    /// Read and check the audit trail.
    #[command(subcommand)]
    Audit(cmd::audit::Command),
    /// Emergency halt: no new call is admitted anywhere until `aether resume`.
    Halt(cmd::halt::Args),
    /// Lift an emergency halt.
    Resume(cmd::halt::Args),
    /// Inspect the tool catalog as an agent sees it.
    #[command(subcommand)]
    Tools(cmd::tools::Command),
    /// The roots, and sealing a sealed root.
    #[command(subcommand)]
    Roots(cmd::roots::Command),
    /// The journal of file changes.
    #[command(subcommand)]
    Journal(cmd::journal::Command),
    /// Undo every file change one call made (journalled and audited itself).
    Undo(cmd::journal::UndoArgs),
    /// The command log: every command run_command and run_shell ran, newest first.
    Commands(cmd::commands::Args),
    /// Which tool definitions are approved: list, show, approve, withdraw, undo, history.
    #[command(subcommand)]
    Registry(cmd::registry::Command),
    /// Calls waiting for a person: list, approve, deny.
    #[command(subcommand)]
    Approvals(cmd::approvals::Command),
    /// The operator's rules (permissions.yaml): check a file, replay past calls against a draft.
    #[command(subcommand)]
    Policy(cmd::policy::Command),
    /// Bearer tokens for HTTP callers and the admin API.
    #[command(subcommand)]
    Tokens(cmd::tokens::Command),
    /// What people let OAuth clients do through Aether's own authorization server: grants,
    /// and revoking them.
    #[command(subcommand)]
    Oauth(cmd::oauth::Command),
    /// Upstream MCP servers: status, refresh, approve; their tables (data sets) and reports.
    #[command(subcommand)]
    Sources(cmd::sources::Command),
    /// The vault of upstream credentials (encrypted at rest): set, list, remove.
    #[command(subcommand)]
    Credentials(cmd::credentials::Command),
    /// Console accounts: create, list, role, password, remove, setup-link.
    #[command(subcommand)]
    Accounts(cmd::accounts::Command),
    /// The knowledge index: import a folder as a pack, search packs.
    #[command(subcommand)]
    Knowledge(cmd::knowledge::Command),
    /// Model connections for agent runs: list, check (what the server offers).
    #[command(subcommand)]
    Models(cmd::models::Command),
    /// Run an agent: a model loop whose every tool call goes through the pipeline.
    #[command(subcommand)]
    Agent(cmd::agent::Command),
    /// Agent runs: list, show (the full transcript), stop.
    #[command(subcommand)]
    Runs(cmd::runs::Command),
}

/// Runs the command line and returns the process exit code.
pub fn run() -> ExitCode {
    // No other process of this user reads Aether's memory, environment or view of the files
    // through `/proc/PID` (an upstream server or a command could otherwise find its keys).
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    let cli = Cli::parse();
    // One stdio session is one stream of messages: a single-threaded runtime answers it with
    // fewer cross-thread wake-ups (file work still goes to the blocking pool). Everything else
    // serves many clients at once and gets a worker per core.
    let mut builder = match cli.command {
        Command::McpServe(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("aether: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => cmd::serve::run(args).await,
            Command::McpServe(args) => cmd::mcp_serve::run(args).await,
            Command::Status(args) => cmd::status::run(args, false).await,
            Command::Doctor(args) => cmd::status::run(args, true).await,
            Command::Audit(c) => cmd::audit::run(c).await,
            Command::Commands(args) => cmd::commands::run(args).await,
            Command::Halt(args) => cmd::halt::run(args, true).await,
            Command::Resume(args) => cmd::halt::run(args, false).await,
            Command::Tools(c) => cmd::tools::run(c).await,
            Command::Roots(c) => cmd::roots::run(c).await,
            Command::Journal(c) => cmd::journal::run(c).await,
            Command::Undo(args) => cmd::journal::undo(args).await,
            Command::Registry(c) => cmd::registry::run(c).await,
            Command::Approvals(c) => cmd::approvals::run(c).await,
            Command::Policy(c) => cmd::policy::run(c).await,
            Command::Tokens(c) => cmd::tokens::run(c).await,
            Command::Oauth(c) => cmd::oauth::run(c).await,
            Command::Sources(c) => cmd::sources::run(c).await,
            Command::Credentials(c) => cmd::credentials::run(c).await,
            Command::Accounts(c) => cmd::accounts::run(c).await,
            Command::Knowledge(c) => cmd::knowledge::run(c).await,
            Command::Models(c) => cmd::models::run(c).await,
            Command::Agent(c) => cmd::agent::run(c).await,
            Command::Runs(c) => cmd::runs::run(c).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            tell!("aether: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    #[test]
    fn terminal_output_shows_control_characters_escaped() {
        assert_eq!(terminal_safe("plain\ttext\n"), "plain\ttext\n");
        // Clearing the screen, an OSC 52 clipboard write, a carriage return that hides the
        // start of a line, a bidirectional override.
        assert_eq!(
            terminal_safe("tool\u{1b}[2J\u{1b}]52;c;ZWNobw==\u{7}"),
            "tool\\u001b[2J\\u001b]52;c;ZWNobw==\\u0007"
        );
        assert_eq!(terminal_safe("denied\rallowed"), "denied\\u000dallowed");
        assert_eq!(terminal_safe("a\u{202e}b\u{9b}c"), "a\\u202eb\\u009bc");
        // `--json` output stays JSON: what serde_json leaves raw comes back as the same text.
        let json = serde_json::to_string(&serde_json::json!({"tool": "x\u{202e}\u{7f}y"})).unwrap();
        let shown = terminal_safe(&json);
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back["tool"], "x\u{202e}\u{7f}y");
        // CSV's line ends stay.
        assert_eq!(terminal_safe("a,b\r\nc,d\r\n"), "a,b\r\nc,d\r\n");
    }
}
