//! `aether audit tail`, `verify`, `head` and `prune`.

use std::path::PathBuf;
use std::process::ExitCode;

use aether_store::{AuditQuery, AuditRecord};
use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The newest audit rows, oldest of them first.
    Tail(TailArgs),
    /// Walk the whole hash chain and check every receipt against its audit row; exit 1 if any
    /// row was edited, removed or inserted, or an admitted call has no audit row.
    Verify(VerifyArgs),
    /// Print the chain's head as SEQ:HASH. Keep it somewhere else; `verify --expect-head`
    /// later proves the chain still holds it (so it was not cut short or rewritten).
    Head(HeadArgs),
    /// Prune audit rows older than --older-than (and the receipts of their calls), leaving a
    /// checkpoint signed with the vault key: the rows kept still verify as one chain, and a
    /// cut made without the key shows.
    Prune(PruneArgs),
}

#[derive(ClapArgs, Debug)]
pub struct PruneArgs {
    #[command(flatten)]
    common: Common,
    /// Rows older than this go: a number and a unit, s, m, h or d (`90d`, `36h`, `30m`).
    #[arg(long)]
    older_than: String,
    /// Who prunes, for the checkpoint.
    #[arg(long, default_value = "operator")]
    by: String,
}

#[derive(ClapArgs, Debug)]
pub struct TailArgs {
    #[command(flatten)]
    common: Common,
    /// How many rows.
    #[arg(short = 'n', long, default_value_t = 20)]
    lines: usize,
    /// Only this agent's rows.
    #[arg(long)]
    agent: Option<String>,
    /// Only this tool's rows.
    #[arg(long)]
    tool: Option<String>,
    /// Only rows with this outcome (ok, tool_error, refused, cancelled, timed_out, panicked, failed).
    #[arg(long)]
    outcome: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Keep printing rows as they are written, until Ctrl-C (or the reader goes away).
    #[arg(long, short = 'f')]
    follow: bool,
}

#[derive(ClapArgs, Debug)]
pub struct HeadArgs {
    #[command(flatten)]
    common: Common,
}

#[derive(ClapArgs, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    common: Common,
    /// A head recorded earlier (SEQ:HASH, from `aether audit head`) that must still be in
    /// the chain, unchanged.
    #[arg(long)]
    expect_head: Option<String>,
    /// The witness file to check the audit against (default: `[store] witness`, else the
    /// one beside the vault key for this store). Give it when verifying a copy of a store.
    #[arg(long)]
    witness: Option<PathBuf>,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Tail(args) => tail(args).await,
        Command::Verify(args) => verify(args).await,
        Command::Head(args) => head(args).await,
        Command::Prune(args) => prune(args).await,
    }
}

async fn prune(args: PruneArgs) -> Result<ExitCode> {
    let age = setup::age_us("--older-than", &args.older_than)?;
    let loaded = setup::load(&args.common)?;
    let store = setup::open_existing_store(
        &setup::store_url(&args.common, &loaded, &loaded.base),
        &loaded,
    )?;
    let key_file = setup::vault_key_file(&loaded);
    let vault = std::sync::Arc::new(aether_store::Vault::open(&key_file, true)?);
    let working = crate::progress::spinner("pruning old audit rows behind a signed checkpoint");
    let cuts = store
        .prune_audit(aether_store::now_us() - age, &args.by, vault)
        .await?;
    drop(working);
    if cuts.is_empty() {
        say!(
            "no audit row is older than {}; nothing pruned",
            args.older_than
        );
    }
    for c in &cuts {
        let chain = match c.chain.is_empty() {
            true => String::new(),
            false => format!(" of chain {}", c.chain),
        };
        say!(
            "pruned {} audit rows{chain} up to row {}; checkpoint {}:{} signed with {}",
            c.pruned,
            c.seq,
            c.seq,
            c.hash,
            key_file.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn tail(args: TailArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    // A read: a store that is not there is an error naming where it was looked for, never
    // an empty one made by accident.
    let store = setup::open_existing_store(
        &setup::store_url(&args.common, &loaded, &loaded.base),
        &loaded,
    )?;
    let query = AuditQuery {
        agent: args.agent.clone(),
        tool: args.tool.clone(),
        outcome: args.outcome.clone(),
        ..Default::default()
    };
    let mut rows = store
        .audit_query(AuditQuery {
            limit: args.lines.max(1),
            newest_first: true,
            ..query.clone()
        })
        .await?;
    rows.reverse();
    // Aligned as printed; rows that come later (--follow) only widen a column.
    let mut columns = crate::columns::Columns::default();
    let mut show = |rows: &[AuditRecord]| -> Result<()> {
        if args.json {
            crate::json_lines(rows)?;
        } else {
            columns.print(&rows.iter().map(cells).collect::<Vec<_>>());
        }
        Ok(())
    };
    show(&rows)?;
    if rows.is_empty() && !args.json && !args.follow {
        say!("(no audit rows yet)");
    }
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    // The rows written since, as they come (every half second; on PostgreSQL the reads wait
    // for rows still committing, so none is stepped over).
    let mut after = match rows.last() {
        Some(row) => row.seq,
        None => store
            .audit_query(AuditQuery {
                limit: 1,
                newest_first: true,
                ..Default::default()
            })
            .await?
            .first()
            .map_or(0, |r| r.seq),
    };
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let fresh = store
            .audit_query(AuditQuery {
                after: Some(after),
                limit: 500,
                ..query.clone()
            })
            .await?;
        show(&fresh)?;
        after = fresh.iter().fold(after, |a, row| a.max(row.seq));
    }
}

/// An audit row's columns: number, time, agent, tool, outcome (and the refusing step), then
/// the reason, time taken and call id as free text.
fn cells(r: &AuditRecord) -> Vec<String> {
    let e = &r.event;
    let outcome = match &e.step {
        Some(step) => format!("{} [{step}]", e.outcome),
        None => e.outcome.clone(),
    };
    let mut rest = String::new();
    if let Some(reason) = &e.reason {
        rest.extend(reason.chars().take(120));
        rest.push_str("  ");
    }
    rest.push_str(&format!("({} µs, call {})", e.duration_us, e.call_id));
    vec![
        r.seq.to_string(),
        time_of(e.at_us),
        e.agent.clone(),
        e.tool.clone(),
        outcome,
        rest,
    ]
}

async fn verify(args: VerifyArgs) -> Result<ExitCode> {
    let expect = match &args.expect_head {
        Some(text) => Some(parse_head(text)?),
        None => None,
    };
    let loaded = setup::load(&args.common)?;
    let url = setup::store_url(&args.common, &loaded, &loaded.base);
    // Read-only: verify takes no lock, writes nothing, and works on a copy of the store.
    let store = aether_store::Store::open(&url, aether_store::Access::ReadOnly)
        .with_context(|| format!("cannot open the store {}", aether_store::redact_url(&url)))?;
    let key = setup::audit_key(&loaded, false)?;
    let witness = args
        .witness
        .clone()
        .unwrap_or_else(|| setup::witness_file(&loaded, &url));
    let working = crate::progress::spinner("walking the audit chain");
    let report = store
        .verify_audit_with(aether_store::VerifyOptions {
            expect_head: expect,
            key: key.clone(),
            witness: Some(witness.clone()),
        })
        .await
        .map_err(|e| match (&e, &key) {
            (aether_store::StoreError::Invalid(_), None) => anyhow::anyhow!(
                "{e}: no key file at {}",
                setup::vault_key_file(&loaded).display()
            ),
            _ => e.into(),
        })?;
    drop(working);
    let mut span = match (report.first_seq, report.last_seq) {
        (Some(a), Some(b)) => format!("{} rows, {a}..{b}", report.rows),
        _ => "no rows yet".to_string(),
    };
    if report.chains > 1 {
        span = format!("{span}, in {} writers' chains", report.chains);
    }
    // Checkpoints left by retention must carry the vault key's signature.
    let mut forged = None;
    if let Some(newest) = &report.checkpoint {
        let key_file = setup::vault_key_file(&loaded);
        let vault = match aether_store::Vault::open(&key_file, false) {
            Ok(vault) => vault,
            Err(e) => anyhow::bail!(
                "the audit was pruned up to row {} and its checkpoint cannot be checked without the vault key: {e}",
                newest.seq
            ),
        };
        span = format!("{span}, after a signed checkpoint at row {}", newest.seq);
        if let Some(c) = report
            .checkpoints
            .iter()
            .find(|c| !vault.verify(&c.signed_text(), &c.signature))
        {
            forged = Some(format!(
                "  checkpoint at row {}: its signature does not match the vault key ({}): rows were cut by someone without it",
                c.seq,
                key_file.display()
            ));
        }
    }
    if report.is_intact() && forged.is_none() {
        say!(
            "audit chain intact: {span}; {} receipts each with its audit row",
            report.receipts
        );
        match (report.keyed, report.witnessed) {
            (Some(_), Some((seq, at))) => say!(
                "  keyed; the witness ({}) holds {} checkpoints, the newest of row {seq} at {}",
                witness.display(),
                report.witness_lines,
                aether_store::time_text(at)
            ),
            (Some(_), None) => say!(
                "  keyed; no witness checkpoint at {} yet: rows cut from the end since the last checkpoint cannot show",
                witness.display()
            ),
            (None, _) => {
                say!("  not keyed: no Aether with the vault key has written to this store yet")
            }
        }
        if report.in_flight > 0 {
            say!(
                "  ({} calls are running: admitted, no audit row yet)",
                report.in_flight
            );
        }
        if report.interrupted > 0 {
            say!(
                "  ({} calls were interrupted by a crash; the next start records them as interrupted)",
                report.interrupted
            );
        }
        say!("head {}:{}", report.last_seq.unwrap_or(0), report.head);
        return Ok(ExitCode::SUCCESS);
    }
    say!("audit chain BROKEN ({}): {span}", store.location());
    if let Some(f) = &forged {
        say!("{f}");
    }
    for b in &report.breaks {
        say!("  row {}: {}", b.seq, b.problem);
    }
    if !report.unaudited.is_empty() {
        say!(
            "  {} admitted call(s) have no audit row (a crash mid-call, or rows deleted), e.g. {}",
            report.unaudited.len(),
            report
                .unaudited
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for m in &report.mismatched {
        say!("  {}", m.problem);
    }
    Ok(ExitCode::from(1))
}

/// `SEQ:HASH` as printed by `aether audit verify` or `aether audit head`.
fn parse_head(text: &str) -> Result<(i64, String)> {
    let (seq, hash) = text.split_once(':').ok_or_else(|| {
        anyhow::anyhow!("--expect-head takes SEQ:HASH, as `aether audit head` prints it")
    })?;
    let seq = seq
        .parse()
        .map_err(|_| anyhow::anyhow!("--expect-head: {seq:?} is not a sequence number"))?;
    Ok((seq, hash.to_string()))
}

async fn head(args: HeadArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let store = setup::open_existing_store(
        &setup::store_url(&args.common, &loaded, &loaded.base),
        &loaded,
    )?;
    let rows = store
        .audit_query(AuditQuery {
            limit: 1,
            newest_first: true,
            ..Default::default()
        })
        .await?;
    match rows.first() {
        Some(r) => say!("{}:{}", r.seq, r.hash),
        None => say!("0:{}", aether_store::GENESIS),
    }
    Ok(ExitCode::SUCCESS)
}

/// A time in microseconds since the epoch, as RFC 3339.
pub fn time_of(at_us: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(at_us as i128 * 1000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| at_us.to_string())
}
