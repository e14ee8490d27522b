//! From flags and `aether.toml` to a running pipeline: find and check the configuration, open
//! the roots and the store, build the catalog.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aether_pipeline::{Pipeline, Rules, Settings};
use aether_policy::config::RawConfig;
use aether_policy::paths::{RootMode, RootSpec};
use aether_store::Store;
use aether_tools::{Roots, Tool};
use anyhow::{Context, Result, bail};
use clap::Args;

/// Flags every subcommand that opens the store shares.
#[derive(Args, Debug, Clone, Default)]
pub struct Common {
    /// The configuration file. Default: ./aether.toml if it exists, else the embedded default.
    #[arg(long, global = true, env = "AETHER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Where the store lives: sqlite://PATH, or postgres://USER@HOST:PORT/DATABASE for a store
    /// several replicas share. Default: .aether/aether.db beside the configuration (or in the
    /// current folder).
    #[arg(
        long = "store",
        alias = "database-url",
        global = true,
        env = "AETHER_STORE"
    )]
    pub store: Option<String>,
    /// How log lines (on stderr) are written: `text`, or `json`, one object per line.
    #[arg(long, global = true, env = "AETHER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The configuration as loaded, and the folder relative paths in it start from.
pub struct Loaded {
    pub raw: RawConfig,
    pub base: PathBuf,
    pub source: String,
    /// Whether a configuration file was read (else the embedded default is in use).
    pub from_file: bool,
    /// The configuration file read, if any.
    pub file: Option<PathBuf>,
}

pub fn load(common: &Common) -> Result<Loaded> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let path = match &common.config {
        Some(p) => Some(p.clone()),
        None => Some(cwd.join("aether.toml")).filter(|p| p.exists()),
    };
    match path {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let raw = RawConfig::parse(&text)
                .and_then(|raw| {
                    // What the file names that this build (and its upstreams) does not have.
                    let problems = raw.unknown_names(&tool_names());
                    match problems.is_empty() {
                        true => Ok(raw),
                        false => Err(aether_policy::config::ConfigError { problems }),
                    }
                })
                .with_context(|| format!("in {}", path.display()))?;
            let base = path
                .parent()
                .map(Path::to_path_buf)
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(cwd);
            Ok(Loaded {
                raw,
                base,
                source: path.display().to_string(),
                from_file: true,
                file: Some(path),
            })
        }
        None => Ok(Loaded {
            raw: RawConfig::default(),
            base: cwd,
            source: "embedded default".into(),
            from_file: false,
            file: None,
        }),
    }
}

/// The `aether.toml` files at the top of the roots that this process does not run with: a
/// stdio session a host started elsewhere, beside a project it would otherwise govern.
pub fn unused_configurations(loaded: &Loaded, roots: &[RootSpec]) -> Vec<PathBuf> {
    let in_use = loaded
        .file
        .as_ref()
        .and_then(|f| std::fs::canonicalize(f).ok());
    let mut found: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(Path::new(&r.path).join("aether.toml")).ok())
        .filter(|c| c.is_file() && Some(c) != in_use.as_ref())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The store URL: the flag, then the configuration, then `.aether/aether.db` under `base`.
pub fn store_url(common: &Common, loaded: &Loaded, base: &Path) -> String {
    if let Some(url) = &common.store {
        return url.clone();
    }
    if let Some(url) = &loaded.raw.store.url {
        return match url.strip_prefix("sqlite://") {
            Some(p) if Path::new(p).is_relative() => {
                format!("sqlite://{}", loaded.base.join(p).display())
            }
            _ => url.clone(),
        };
    }
    format!(
        "sqlite://{}",
        base.join(".aether").join("aether.db").display()
    )
}

/// Opens a store a server has already made: a command that reads or decides what a server
/// recorded must not make a fresh, empty store somewhere else and report that nothing is
/// there.
pub fn open_existing_store(url: &str, loaded: &Loaded) -> Result<Store> {
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        && !Path::new(path).exists()
    {
        bail!(
            "no store at {path}: no server has run here yet. Pass --store sqlite://PATH \
             (`aether mcp-serve` without a configuration keeps its store in its first root's .aether/)"
        );
    }
    let store = open_store(url, loaded)?;
    // Which store answered, on stderr (stdout stays the command's own, for pipes and --json):
    // a project's store and another's look alike.
    tell!("store: {}", store.location());
    Ok(store)
}

/// The store a server here has recorded into, found as `serve` finds it (see
/// [`open_existing_store`]).
pub fn existing_store(common: &Common) -> Result<Store> {
    let loaded = load(common)?;
    open_existing_store(&store_url(common, &loaded, &loaded.base), &loaded)
}

/// Opens a store for writing, its audit keyed under the vault's audit key (the key file is
/// made on first use): rows written without the key cannot pass `aether audit verify`.
pub fn open_store(url: &str, loaded: &Loaded) -> Result<Store> {
    let key = audit_key(loaded, true)?;
    Store::open(url, aether_store::Access::Write(key))
        .with_context(|| format!("cannot open the store {}", aether_store::redact_url(url)))
}

/// The vault's audit key; with `create`, the key file is made if there is none.
pub fn audit_key(loaded: &Loaded, create: bool) -> Result<Option<aether_store::AuditKey>> {
    let key_file = vault_key_file(loaded);
    if !create && !key_file.exists() {
        return Ok(None);
    }
    let vault = aether_store::Vault::open(&key_file, create)
        .with_context(|| "the audit is keyed with the vault's key".to_string())?;
    Ok(Some(vault.audit_key()))
}

/// The audit's witness file: `[store] witness` (relative to the configuration's folder), or
/// beside the vault key, `witness/STORE.log`, STORE a digest of the store's location.
pub fn witness_file(loaded: &Loaded, url: &str) -> PathBuf {
    if let Some(path) = &loaded.raw.store.witness {
        return loaded.base.join(path);
    }
    let location = match url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        Some(path) => std::path::absolute(path)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.to_string()),
        None => aether_store::redact_url(url),
    };
    let digest = aether_policy::sha256(location.as_bytes()).to_hex();
    let name = &digest[..16];
    vault_key_file(loaded)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| loaded.base.join(".aether"))
        .join("witness")
        .join(format!("{name}.log"))
}

/// A serving process's books (heartbeat, witness), kept from before it serves until
/// [`Books::close`].
pub struct Books {
    books: aether_pipeline::Books,
    stop: tokio_util::sync::CancellationToken,
}

impl Books {
    /// Records what a crash left unfinished as `interrupted` (before anything is served),
    /// then keeps the heartbeat and the witness.
    pub async fn open(loaded: &Loaded, url: &str, pipeline: &Pipeline) -> Result<Books> {
        let redo: aether_pipeline::Redo = Arc::new(|roots, entries, image| {
            use aether_tools::workspace::Redo;
            aether_tools::workspace::redo(roots, entries, image)
                .into_iter()
                .map(|(file, found)| {
                    let what = match found {
                        Redo::Held => "held".to_string(),
                        Redo::Written => "written".to_string(),
                        Redo::ChangedSince => {
                            "changed by someone else since its journalled write; left alone".into()
                        }
                        Redo::Failed(why) => why,
                    };
                    (file, what)
                })
                .collect()
        });
        let recovered = pipeline
            .recover_interrupted(Some(redo))
            .await
            .context("cannot put right what an earlier crash left")?;
        for file in &recovered.rewritten {
            tell!("aether: {file} had lost its last journalled write in a crash; written again");
        }
        for problem in &recovered.problems {
            tell!("aether: after a crash: {problem}");
        }
        let witness =
            audit_key(loaded, false)
                .ok()
                .flatten()
                .map(|key| aether_pipeline::WitnessSpec {
                    path: witness_file(loaded, url),
                    key,
                });
        let books = aether_pipeline::Books::new(pipeline, witness);
        books.witness_writers(&recovered.writers).await;
        let stop = tokio_util::sync::CancellationToken::new();
        books.run(stop.clone());
        Ok(Books { books, stop })
    }

    /// After the pipeline shut down: the last checkpoint, and the writer marked stopped if
    /// every call ended.
    pub async fn close(self, pipeline: &Pipeline) {
        self.stop.cancel();
        self.books.close(pipeline.calls_in_flight() == 0).await;
    }
}

/// Roots from the configuration, paths relative to its folder.
pub fn configured_roots(loaded: &Loaded) -> Vec<RootSpec> {
    loaded
        .raw
        .roots
        .iter()
        .map(|(name, r)| RootSpec {
            name: name.clone(),
            path: loaded.base.join(&r.path).display().to_string(),
            mode: r.mode,
            writable: r.writable.clone(),
            allow_delete: r.allow_delete,
        })
        .collect()
}

/// `--root` flags, or the configured roots, or (for `serve`) the current folder.
pub fn roots(flags: &[String], loaded: &Loaded, default_to_cwd: bool) -> Result<Vec<RootSpec>> {
    let mut specs = Vec::new();
    for flag in flags {
        specs.push(RootSpec::parse(flag, RootMode::ReadOnly).map_err(anyhow::Error::msg)?);
    }
    if specs.is_empty() {
        specs = configured_roots(loaded);
    }
    if specs.is_empty() {
        if !default_to_cwd {
            bail!("no roots: give --root NAME=PATH[:ro|rw|sealed], or [roots.NAME] in aether.toml");
        }
        let cwd = std::env::current_dir().context("cannot read the current folder")?;
        specs.push(RootSpec {
            name: "workspace".into(),
            path: cwd.display().to_string(),
            mode: RootMode::ReadWrite,
            writable: None,
            allow_delete: false,
        });
    }
    Ok(specs)
}

/// The name of every tool this build has (the conformance fixtures' too: a configuration may
/// name them for a test server).
pub fn tool_names() -> std::collections::BTreeSet<String> {
    tools(true).iter().map(|t| t.def().name.clone()).collect()
}

/// Every tool this process serves (the orchestration tools unbound: for their definitions).
pub fn tools(fixtures: bool) -> Vec<Arc<dyn Tool>> {
    tools_for(
        fixtures,
        None,
        aether_runner::Host::new(Default::default()),
        None,
    )
}

/// Every tool, with the configuration's research settings; the orchestration tools start
/// their runs through `host`; `tts_render` speaks through `speech` when there is one.
pub fn tools_for(
    fixtures: bool,
    searxng: Option<&str>,
    host: Arc<aether_runner::Host>,
    speech: Option<Arc<dyn aether_tools::Speech>>,
) -> Vec<Arc<dyn Tool>> {
    let mut tools = aether_tools::builtin_tools();
    if let Some(speech) = speech {
        // The same definitions, another backend: an approval holds for both.
        tools.retain(|t| !matches!(t.def().name.as_str(), "tts_render" | "tts_status"));
        tools.push(Arc::new(aether_tools::workspace::TtsRender::with_speech(
            speech.clone(),
        )));
        tools.push(Arc::new(aether_tools::workspace::TtsStatus::with_speech(
            speech,
        )));
    }
    tools.extend(aether_runner::orchestration::tools(host.clone()));
    tools.push(Arc::new(aether_runner::review::CodeReview::new(host)));
    let searxng = searxng.and_then(|u| url::Url::parse(u).ok());
    tools.extend(aether_net::tools_with(
        Arc::new(aether_net::SystemResolver),
        searxng,
    ));
    tools.extend(aether_net::saving_tools(
        Arc::new(aether_net::SystemResolver),
        aether_tools::workspace::saver(),
    ));
    if fixtures {
        tools.extend(aether_tools::fixtures::tools());
    }
    tools
}

/// The store for commands that act on what a server recorded: as `mcp-serve` finds it
/// (beside the first `--root` when no configuration is in use), else as `serve` does.
pub fn store_for_roots(
    common: &Common,
    loaded: &Loaded,
    roots: &[RootSpec],
) -> Result<(Store, String)> {
    let base = match (loaded.from_file, roots.first()) {
        (false, Some(first)) if common.store.is_none() => PathBuf::from(&first.path),
        _ => loaded.base.clone(),
    };
    let url = store_url(common, loaded, &base);
    // What a server recorded: a store that is not there is an error, never made empty.
    Ok((open_existing_store(&url, loaded)?, url))
}

/// The operator's speech server (`[tts]`), when one is configured: its key, if it has one, is
/// read from the vault in `store` at each use.
pub fn speech(loaded: &Loaded, store: &Store) -> Option<Arc<dyn aether_tools::Speech>> {
    let tts = &loaded.raw.tts;
    let base = url::Url::parse(tts.base_url.as_deref()?).ok()?;
    let key = tts.key.clone().map(|name| {
        Arc::new(VaultKey {
            store: store.clone(),
            key_file: vault_key_file(loaded),
            name,
        }) as Arc<dyn aether_net::speech::KeySource>
    });
    Some(Arc::new(aether_net::speech::OpenAiSpeech::new(
        base,
        tts.model.clone().unwrap_or_else(|| "tts-1".into()),
        tts.voices.clone(),
        key,
        std::time::Duration::from_secs(tts.timeout_seconds.unwrap_or(120)),
    )))
}

/// A credential in the vault, opened when asked for.
struct VaultKey {
    store: Store,
    key_file: PathBuf,
    name: String,
}

#[async_trait::async_trait]
impl aether_net::speech::KeySource for VaultKey {
    async fn key(&self) -> std::result::Result<String, String> {
        self.store
            .open_credential(&self.name, &self.key_file)
            .await?
            .ok_or_else(|| {
                format!(
                    "tts.key names {:?}, which is not in the vault (set it: aether credentials set {} < key.txt)",
                    self.name, self.name
                )
            })
    }
}

/// The vault's key file: `vault.key_file` (relative to the configuration's folder), else
/// `$XDG_CONFIG_HOME/aether/vault.key`, else `~/.config/aether/vault.key`.
pub fn vault_key_file(loaded: &Loaded) -> PathBuf {
    if let Some(path) = &loaded.raw.vault.key_file {
        return loaded.base.join(path);
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| loaded.base.join(".aether"));
    config.join("aether").join("vault.key")
}

/// The configuration's upstreams as the client takes them.
pub fn upstream_specs(loaded: &Loaded) -> Vec<aether_server::upstream::UpstreamSpec> {
    use aether_server::upstream::{Endpoint, UpstreamSpec};
    loaded
        .raw
        .upstreams
        .iter()
        .map(|(name, u)| UpstreamSpec {
            name: name.clone(),
            endpoint: match (&u.command, &u.url) {
                (_, Some(url)) => Endpoint::Http {
                    url: url.clone(),
                    headers: u.headers.clone(),
                    credential: u.credential.clone(),
                },
                (command, None) => Endpoint::Stdio {
                    command: command.clone().unwrap_or_default(),
                    args: u.args.clone(),
                    env: u.env.clone(),
                    env_credentials: u.env_credentials.clone(),
                    uncovered: u.uncovered,
                },
            },
            timeout: std::time::Duration::from_secs(u.timeout_seconds),
            group: u.group.clone().unwrap_or_else(|| name.clone()),
            tier: u.tier,
            fresh: u.session == aether_policy::config::UpstreamSession::Fresh,
            arguments: u.arguments.clone(),
        })
        .collect()
}

/// Connects the configuration's upstream MCP servers and lists them; an upstream that cannot
/// be reached is reported on stderr (and is tried again while Aether serves).
pub async fn upstreams(
    loaded: &Loaded,
    store: &Store,
    roots: &[RootSpec],
) -> (Arc<aether_server::upstream::Upstreams>, Vec<Arc<dyn Tool>>) {
    let key_file = vault_key_file(loaded);
    // The vault's key made now if there is none: a stdio upstream must find it there (and
    // covered), not be able to make one whose content it knows.
    if loaded.raw.upstreams.values().any(|u| u.url.is_none())
        && !key_file.exists()
        && let Err(e) = aether_store::Vault::open(&key_file, true)
    {
        tracing::warn!(error = %e, "cannot make the vault's key file");
    }
    let mut hidden = store.private_paths();
    hidden.push(key_file.clone());
    hidden.extend(loaded.file.iter().cloned());
    // The rules file too: an upstream that could rewrite it would grant itself (hot reload).
    // Made first if missing: only a file that exists can be covered.
    let (rules, required) = rules_path(loaded);
    ensure_rules_file(loaded, &rules, required);
    hidden.push(rules);
    // And every control file under the roots (another Aether's configuration or rules).
    if loaded.raw.upstreams.values().any(|u| u.url.is_none()) {
        let folders: Vec<PathBuf> = roots.iter().map(|r| PathBuf::from(&r.path)).collect();
        hidden.extend(
            tokio::task::spawn_blocking(move || aether_tools::shell::control_files_in(&folders))
                .await
                .unwrap_or_default(),
        );
    }
    let credentials = aether_server::upstream::Credentials {
        store: store.clone(),
        key_file,
        hidden,
    };
    let (upstreams, tools, problems) =
        aether_server::upstream::Upstreams::connect(upstream_specs(loaded), credentials).await;
    for p in problems {
        tell!("aether: {p}");
    }
    (upstreams, tools)
}

/// The configuration's model connections, for agent runs.
pub fn models(loaded: &Loaded) -> aether_runner::Models {
    aether_runner::Models {
        specs: loaded
            .raw
            .models
            .iter()
            .map(|(name, raw)| (name.clone(), raw.resolve(name).map_err(|p| p.join("; "))))
            .collect(),
        allowed: loaded
            .raw
            .agents
            .iter()
            .filter_map(|(name, a)| a.models.clone().map(|m| (name.clone(), m)))
            .collect(),
        key_file: vault_key_file(loaded),
        workers: loaded
            .raw
            .agents
            .iter()
            .map(|(name, a)| (name.clone(), a.workers.clone()))
            .collect(),
    }
}

/// Builds the pipeline. In fixtures mode every agent also reaches the conformance group.
/// `external`: tools from upstream servers (unapproved until an operator approves them).
pub async fn pipeline(
    loaded: &Loaded,
    roots: &[RootSpec],
    store: Store,
    fixtures: bool,
    external: Vec<Arc<dyn Tool>>,
) -> Result<Arc<Pipeline>> {
    Ok(pipeline_and_host(loaded, roots, store, fixtures, external)
        .await?
        .0)
}

/// [`pipeline`], and the host its orchestration tools start runs through.
pub async fn pipeline_and_host(
    loaded: &Loaded,
    roots: &[RootSpec],
    store: Store,
    fixtures: bool,
    external: Vec<Arc<dyn Tool>>,
) -> Result<(Arc<Pipeline>, Arc<aether_runner::Host>)> {
    let host = aether_runner::Host::new(models(loaded));
    let speech = speech(loaded, &store);
    let roots = Roots::open(roots).context("cannot open the roots")?;
    let mut agents = loaded.raw.agent_profiles();
    if fixtures {
        for agent in agents.values_mut() {
            agent
                .mcp_servers
                .get_or_insert_with(Default::default)
                .insert(aether_policy::tool::groups::CONFORMANCE.to_string());
        }
    }
    let pipeline = Pipeline::new(Settings {
        agents,
        roots,
        limits: loaded.raw.limits.clone(),
        store,
        tools: tools_for(
            fixtures,
            loaded.raw.research.searxng_url.as_deref(),
            host.clone(),
            speech,
        ),
        external_tools: external,
        journal: loaded.raw.journal.clone(),
        approval_window: std::time::Duration::from_secs(loaded.raw.approvals.window_seconds),
        rules: rules(loaded)?,
        screen: loaded.raw.registry.screen,
        // The configuration read, and the one a start here without --config would read: an
        // agent that could write either would configure Aether (or the CLI run here).
        undo: Arc::new(aether_tools::workspace::UndoCall::new()),
        tracer: crate::telemetry::tracer(),
        private: loaded
            .file
            .iter()
            .cloned()
            .chain([
                vault_key_file(loaded),
                loaded.base.join("aether.toml"),
                std::env::current_dir()
                    .unwrap_or_default()
                    .join("aether.toml"),
            ])
            .collect(),
    })
    .await
    .context("cannot start the pipeline")?;
    let pipeline = Arc::new(pipeline);
    host.bind(&pipeline);
    Ok((pipeline, host))
}

/// The rules file: `policy.rules` from the configuration (it must exist), else
/// `permissions.yaml` beside the configuration (if it exists now or appears later).
pub fn rules_path(loaded: &Loaded) -> (PathBuf, bool) {
    match &loaded.raw.policy.rules {
        Some(path) => (loaded.base.join(path), true),
        None => (loaded.base.join(aether_policy::rules::RULES_FILE), false),
    }
}

pub fn rules(loaded: &Loaded) -> Result<Rules> {
    let (path, required) = rules_path(loaded);
    // A rules file missing where one was set aside (a program made it, or moved the
    // operator's away): never start as if there were no rules.
    if let Some(aside) = set_aside_beside(&path) {
        bail!(
            "the rules file {} is missing and {aside} lies beside it (Aether set aside a rules \
                 file a program made there, or the one that was there was moved): restore the \
                 rules you mean, or write `rules: []` there, before starting",
            path.display()
        );
    }
    ensure_rules_file(loaded, &path, required);
    if required && std::fs::symlink_metadata(&path).is_err() {
        bail!(
            "policy.rules names {}, which is not there: write it (`rules: []` is a file with no \
             rules of its own), or leave policy.rules out to use permissions.yaml when there is one",
            path.display()
        );
    }
    Rules::load(&path, required).map_err(anyhow::Error::msg)
}

/// Whether this configuration starts programs that write where Aether's user can (stdio
/// upstreams, `run_command` entries) or shells that may write in the roots.
pub fn runs_programs(loaded: &Loaded) -> bool {
    loaded.raw.upstreams.values().any(|u| u.url.is_none())
        || loaded
            .raw
            .projects
            .values()
            .any(|p| !p.commands.is_empty() || p.shell.as_ref().is_some_and(|s| s.write))
}

/// While Aether runs programs that may write in the roots, the roots are watched for control
/// files they make (`aether_tools::shell::ControlGuard`). Started before any upstream; keep it
/// alive while serving.
pub async fn guard_control_files(
    loaded: &Loaded,
    roots: &[RootSpec],
) -> Option<aether_tools::shell::ControlGuard> {
    if !runs_programs(loaded) {
        return None;
    }
    let folders: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(&r.path).ok())
        .collect();
    let own: Vec<PathBuf> = loaded
        .file
        .iter()
        .cloned()
        .chain([rules_path(loaded).0])
        .collect();
    tokio::task::spawn_blocking(move || aether_tools::shell::ControlGuard::start(folders, own))
        .await
        .ok()
        .flatten()
}

/// What Aether writes into a rules file it makes (see [`ensure_rules_file`]).
pub const MADE_RULES: &str =
    "# The operator's rules for Aether (docs/GOVERNANCE.md); `rules: []` is no rules.
# Aether made this file because it starts programs (run_command, stdio upstreams) that
# could otherwise create it: a rules file that exists is covered from every one of them.
rules: []
";

/// Makes the default rules file (`rules: []`) when there is none and this configuration starts
/// programs that can write where Aether's user can (`run_command` entries, stdio upstreams):
/// a file that exists is covered from them, while a missing one could be created by them —
/// and a running Aether would load it. Told on stderr; a folder Aether cannot write to is
/// left as it is (no program it starts can write there either).
/// A set-aside copy beside a missing `path` (`NAME.set-aside-by-aether-…`), if there is one.
fn set_aside_beside(path: &Path) -> Option<String> {
    if std::fs::symlink_metadata(path).is_ok() {
        return None;
    }
    let (folder, name) = (path.parent()?, path.file_name()?);
    let prefix = format!(
        "{}{}",
        name.to_string_lossy(),
        aether_policy::paths::SET_ASIDE
    );
    std::fs::read_dir(folder).ok()?.flatten().find_map(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.starts_with(&prefix).then_some(n)
    })
}

fn ensure_rules_file(loaded: &Loaded, path: &Path, required: bool) {
    if required
        || !runs_programs(loaded)
        || std::fs::symlink_metadata(path).is_ok()
        || set_aside_beside(path).is_some()
    {
        return;
    }
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(MADE_RULES.as_bytes())?;
            f.sync_all()
        });
    match made {
        Ok(()) => tell!(
            "aether: made {} (rules: []): this configuration starts programs, which must not be able to create it",
            path.display()
        ),
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot make the rules file"),
    }
}

/// Logs go to stderr (stdout may be the MCP transport), as text or JSON lines
/// (`--log-format`). `RUST_LOG` overrides the default filter.
pub fn init_logging(default: &str, common: &Common) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only on a terminal: a log file or a pipe gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = match common.log_format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().try_init(),
    };
}

/// Who is running this command, for the "by" of a change.
pub fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("{user} (cli)")
}

/// An age such as `30m`, `24h`, `7d` in microseconds, for the command-line flag `flag`.
pub fn age_us(flag: &str, text: &str) -> Result<i64> {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: i64 = number
        .parse()
        .with_context(|| format!("{flag} {text:?}: a number and a unit, e.g. 30m, 24h, 7d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => bail!("{flag} {text:?}: the unit is s, m, h or d (e.g. 24h)"),
    };
    if n <= 0 || n > 3_650 * 86_400 / seconds {
        bail!("{flag} {text:?} must be positive and at most ten years");
    }
    Ok(n * seconds * 1_000_000)
}
