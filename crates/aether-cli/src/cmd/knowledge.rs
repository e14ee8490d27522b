//! `aether knowledge import DIR --pack NAME` (and `search`): fills the knowledge index from a
//! folder of documents, with a progress bar. Dot-directories and dot-files are skipped, as are
//! files that are not UTF-8 text or are larger than 1 MiB; a document already imported from the
//! same path into the same pack is replaced.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use aether_store::KnowledgeDoc;
use anyhow::{Context, Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::setup::{self, Common};

/// The largest file imported.
const MAX_FILE: u64 = 1 << 20;
/// Documents per transaction.
const BATCH: usize = 500;

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Import every text file under DIR into pack NAME.
    Import(ImportArgs),
    /// Search a pack (or several) as search_knowledge would.
    Search(SearchArgs),
}

#[derive(ClapArgs, Debug)]
pub struct ImportArgs {
    #[command(flatten)]
    common: Common,
    dir: PathBuf,
    /// The pack's name (agents read it when their team or they list it in knowledge_packs).
    #[arg(long)]
    pack: String,
}

#[derive(ClapArgs, Debug)]
pub struct SearchArgs {
    #[command(flatten)]
    common: Common,
    query: String,
    /// The packs to search (repeat).
    #[arg(long = "pack", required = true)]
    packs: Vec<String>,
    #[arg(long, default_value_t = 10)]
    limit: usize,
}

/// A document's title: its first Markdown heading, else its file name.
fn title_of(path: &Path, body: &str) -> String {
    body.lines()
        .find_map(|l| l.strip_prefix("# ").map(|t| t.trim().to_string()))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Import(args) => import(args).await,
        Command::Search(args) => {
            let store = setup::existing_store(&args.common)?;
            let scopes = args.packs.iter().map(|p| format!("pack:{p}")).collect();
            let hits = store
                .knowledge_search(scopes, &args.query, args.limit, 0.0)
                .await?;
            if hits.is_empty() {
                say!("No document matches.");
            }
            for h in hits {
                say!(
                    "{:.2}  {} ({}{}): {}",
                    h.score,
                    h.title,
                    h.source,
                    h.line.map(|l| format!(":{l}")).unwrap_or_default(),
                    h.snippet
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn import(args: ImportArgs) -> Result<ExitCode> {
    if !aether_policy::is_plain_name(&args.pack) {
        bail!(
            "{:?} is not a pack name (1-64 of letters, digits, '.', '-', '_')",
            args.pack
        );
    }
    if !args.dir.is_dir() {
        bail!("{} is not a folder", args.dir.display());
    }
    let loaded = setup::load(&args.common)?;
    let store = setup::open_store(
        &setup::store_url(&args.common, &loaded, &loaded.base),
        &loaded,
    )?;
    let files: Vec<PathBuf> = walkdir::WalkDir::new(&args.dir)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    let bar = indicatif::ProgressBar::new(files.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} importing [{bar:30}] {pos}/{len} files ({per_sec}, {eta} left)",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let (mut imported, mut skipped) = (0usize, 0usize);
    let mut batch = Vec::with_capacity(BATCH);
    for path in &files {
        bar.inc(1);
        let meta = std::fs::metadata(path)?;
        let body = if meta.len() <= MAX_FILE {
            std::fs::read(path)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
        } else {
            None
        };
        let Some(body) = body.filter(|b| !b.contains('\0')) else {
            skipped += 1;
            continue;
        };
        let rel = path
            .strip_prefix(&args.dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned();
        batch.push(KnowledgeDoc {
            scope: format!("pack:{}", args.pack),
            source: rel,
            title: title_of(path, &body),
            body,
        });
        if batch.len() >= BATCH {
            imported += store
                .knowledge_put(std::mem::take(&mut batch))
                .await
                .context("indexing failed")?;
        }
    }
    if !batch.is_empty() {
        imported += store
            .knowledge_put(batch)
            .await
            .context("indexing failed")?;
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    say!(
        "Imported {imported} document(s) into pack {} in {secs:.1} s ({:.0}/s); skipped {skipped} (not UTF-8 text, or over 1 MiB).",
        args.pack,
        imported as f64 / secs.max(0.001)
    );
    Ok(ExitCode::SUCCESS)
}
