//! `aether tools list|schemas`: the catalog as one agent sees it.

use std::process::ExitCode;

use aether_pipeline::Transport;
use aether_policy::Offer;
use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};

use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every tool, and whether this agent is offered it (and if not, why not).
    List(AgentArgs),
    /// The agent's catalog as OpenAI function schemas (`tools` of a chat completion).
    Schemas(AgentArgs),
    /// Every shipped tool as Markdown: what docs/TOOLS.md holds (a test fails when it is
    /// stale; regenerate with `aether tools docs > docs/TOOLS.md`).
    Docs,
}

#[derive(ClapArgs, Debug)]
pub struct AgentArgs {
    #[command(flatten)]
    common: Common,
    /// The agent (from aether.toml).
    #[arg(long, default_value = aether_policy::config::DEFAULT_AGENT)]
    agent: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    let (args, schemas) = match command {
        Command::List(a) => (a, false),
        Command::Schemas(a) => (a, true),
        Command::Docs => {
            say_inline!("{}", docs(&setup::tools(false)));
            return Ok(ExitCode::SUCCESS);
        }
    };
    let loaded = setup::load(&args.common)?;
    let store = setup::open_store(
        &setup::store_url(&args.common, &loaded, &loaded.base),
        &loaded,
    )?;
    let roots = setup::configured_roots(&loaded);
    let pipeline = setup::pipeline(&loaded, &roots, store, false, Vec::new()).await?;
    let ctx = pipeline.session(&args.agent, Transport::InProcess, "cli".into())?;
    if schemas {
        let functions = pipeline.openai_functions(&ctx);
        say!("{}", serde_json::to_string_pretty(&functions)?);
    } else {
        for entry in pipeline.catalog().iter() {
            let def = entry.def();
            match pipeline.offer(&ctx, entry) {
                Offer::Offered => say!(
                    "offered  {:<22} {:<10} {}",
                    def.name,
                    def.tier.as_str(),
                    def.group
                ),
                Offer::Hidden(h) => say!(
                    "hidden   {:<22} {}",
                    def.name,
                    h.explain(&def.name, &args.agent)
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The catalog as Markdown, generated from the definitions themselves (so the page cannot
/// drift from what the server offers).
pub fn docs(tools: &[std::sync::Arc<dyn aether_tools::Tool>]) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "# Tools\n\nGenerated from the catalog by `aether tools docs`; a test fails when this page \
         is stale. Tier: Standard runs at once with a summary in the audit; Elevated runs at once \
         with the full arguments and result in the audit; Restricted waits for a person. The \
         definition digest is what a registry approval pins.\n\n\
         | tool | group | tier | risk | read-only | network | destructive | idempotent |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let yes = |b: bool| if b { "yes" } else { "no" };
    for tool in tools {
        let d = tool.def();
        let risk = serde_json::to_value(d.meta.risk).unwrap_or_default();
        let _ = writeln!(
            out,
            "| [`{}`](#{}) | {} | {} | {} | {} | {} | {} | {} |",
            d.name,
            d.name,
            d.group,
            d.tier.as_str(),
            risk.as_str().unwrap_or("?"),
            yes(d.meta.read_only),
            yes(d.meta.reaches_network),
            yes(d.meta.destructive),
            yes(d.meta.idempotent)
        );
    }
    for tool in tools {
        let d = tool.def();
        let _ = write!(
            out,
            "\n## {}\n\n{}\n\nDefinition digest: `{}`\n\n",
            d.name,
            d.description,
            d.digest()
        );
        let required: Vec<&str> = d.input_schema["required"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let Some(props) = d.input_schema["properties"].as_object() else {
            out.push_str("No arguments.\n");
            continue;
        };
        out.push_str(
            "| argument | type | required | declared as | description |\n|---|---|---|---|---|\n",
        );
        let a = &d.arguments;
        let kind = |name: &str| {
            let has = |names: &Vec<String>| names.iter().any(|n| n == name);
            match () {
                _ if has(&a.paths) => "path",
                _ if has(&a.urls) => "URL",
                _ if has(&a.hosts) => "host",
                _ if has(&a.commands) => "command",
                _ => "",
            }
        };
        for (name, p) in props {
            let ty = type_text(p);
            let description = p["description"]
                .as_str()
                .unwrap_or("")
                .replace('|', "\\|")
                .replace('\n', " ");
            let _ = writeln!(
                out,
                "| `{name}` | {ty} | {} | {} | {description} |",
                yes(required.contains(&name.as_str())),
                kind(name)
            );
        }
    }
    out
}

/// A property's type as the tools page names it: `string`, `string or null` (a `type` list,
/// or `anyOf` alternatives), `any`.
fn type_text(p: &serde_json::Value) -> String {
    match (&p["type"], &p["anyOf"]) {
        (serde_json::Value::String(t), _) => t.clone(),
        (serde_json::Value::Array(a), _) => a
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
        (_, serde_json::Value::Array(alternatives)) => {
            let names: Vec<String> = alternatives.iter().map(type_text).collect();
            match names.iter().any(|n| n == "any") {
                true => "any".into(),
                false => names.join(" or "),
            }
        }
        _ => "any".into(),
    }
}
