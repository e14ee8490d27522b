//! Destinations: what a call reaches, as the rules (step 7) and egress (step 8) judge it —
//! the paths it names, relative to their roots, as written and as they really are after
//! links, which are folders, where a glob leads; the hosts of its URLs; each URL against the
//! agent's egress policy; and the rules held on every hop a network tool takes mid-call.

use std::sync::Arc;

use aether_policy::AgentProfile;
use aether_policy::decision::{Refusal, Step};
use aether_tools_core::{Root, Roots, ToolError};
use serde_json::Value;

use crate::admission::Call;
use crate::{Pipeline, SessionContext};

impl Pipeline {
    /// The rules' verdict on this call (none without rules, or when no rule matches). Where
    /// a rule looks at this call's paths, they are found (links resolved, folders told apart)
    /// here, with one `lstat` per component: a hop to the blocking pool cost more than the
    /// calls it would move (measured: docs/BENCHMARKS.md, thirteenth session), and each open
    /// is judged again where it lands (`RuledCall`).
    pub(crate) fn verdict<'r>(
        &self,
        rules: &'r aether_policy::rules::RuleSet,
        ctx: &SessionContext,
        def: &aether_policy::ToolDef,
        args: &Value,
    ) -> Option<aether_policy::rules::Verdict<'r>> {
        if rules.is_empty() {
            return None;
        }
        let known = if rules.looks_at_paths(&def.name, &ctx.agent.name, ctx.agent.team.as_deref()) {
            facts(&self.roots, def, args)
        } else {
            Facts {
                hosts: def.arguments.hosts_in(args),
                ..Facts::default()
            }
        };
        rules.evaluate(&aether_policy::rules::CallFacts {
            tool: &def.name,
            agent: &ctx.agent.name,
            team: ctx.agent.team.as_deref(),
            arguments: args,
            paths: &known.paths,
            dirs: &known.dirs,
            hosts: &known.hosts,
        })
    }

    /// Whether the rules in force now deny this call (asked again after a wait).
    pub(crate) fn denied_now(
        &self,
        ctx: &SessionContext,
        def: &aether_policy::ToolDef,
        args: &Value,
    ) -> Option<Refusal> {
        let rules = self.rules.current();
        let v = self.verdict(&rules, ctx, def, args)?;
        (v.action == aether_policy::rules::Action::AlwaysDeny).then(|| denial(&v, def))
    }
}

/// What the rules judge a call on: every path it names, relative to its root, as written
/// (cleaned) and, where it differs, as it really is after symlinks (so a link cannot walk
/// a call around a path rule); which of them are folders, plus the root itself when the
/// tool takes a `path` and the call left it out (it then walks the whole root); each
/// URL's host.
fn facts(roots: &Roots, def: &aether_policy::ToolDef, args: &Value) -> Facts {
    let mut facts = Facts {
        hosts: def.arguments.hosts_in(args),
        ..Facts::default()
    };
    let (root, named) = def.arguments.paths_in(args);
    for path in &named {
        let mut rel = String::new();
        match roots.locate(root, path, &mut rel) {
            Ok(loc) => {
                let rel = loc.rel.to_string();
                let (real, is_dir) = real_relative(loc.root, &rel);
                let mut forms = vec![rel.clone()];
                if let Some(real) = real
                    && real != rel
                {
                    forms.push(real);
                }
                in_other_roots(roots, loc.root, &mut forms);
                if is_dir {
                    facts.dirs.extend(forms.iter().cloned());
                }
                facts.paths.extend(forms);
            }
            // The tool refuses it anyway; the rules still see what was asked for.
            Err(_) => facts.paths.push(path.trim_start_matches("./").to_string()),
        }
    }
    let takes_path = def.input_schema["properties"].get("path").is_some();
    if named.is_empty() && takes_path {
        facts.dirs.push(String::new());
    }
    // A glob's literal part can move the folder walked (`../hr/*` from `docs` walks `hr`;
    // an absolute pattern names its own): that folder is judged as one the call names.
    let base = args.get("path").and_then(Value::as_str).unwrap_or("");
    for key in ["pattern", "glob"] {
        let Some(pattern) = args.get(key).and_then(Value::as_str) else {
            continue;
        };
        let mut rel = String::new();
        let Ok(loc) = roots.locate(root, base, &mut rel) else {
            continue;
        };
        if let Ok(place) =
            aether_policy::paths::confine_glob(loc.rel, pattern, &loc.root.path.to_string_lossy())
            && place.folder != loc.rel
        {
            let (real, _) = real_relative(loc.root, &place.folder);
            for folder in [Some(place.folder), real].into_iter().flatten() {
                facts.paths.push(folder.clone());
                facts.dirs.push(folder);
            }
        }
    }
    facts
}

/// Roots may nest: the same file is also judged relative to every other root that holds it,
/// so a rule written for one cannot be walked around through the other. Adds those forms of
/// `forms` (paths relative to `root`).
fn in_other_roots(roots: &Roots, root: &Root, forms: &mut Vec<String>) {
    let absolute: Vec<std::path::PathBuf> = forms.iter().map(|f| root.path.join(f)).collect();
    for other in roots.iter().filter(|r| r.name != root.name) {
        for abs in &absolute {
            if let Some(inner) = other.relative_of(abs) {
                let inner = inner.trim_start_matches('/').to_string();
                if !forms.contains(&inner) {
                    forms.push(inner);
                }
            }
        }
    }
}

/// The operator's rules on what a running call reaches that the pipeline could not judge
/// before it ran: each network hop ([`aether_tools_core::DestinationCheck`]) and each file or
/// folder an open really lands on ([`aether_tools_core::PathCheck`]). One per call, serving
/// both.
pub(crate) struct RuledCall {
    rules: Arc<aether_policy::rules::RuleSet>,
    roots: Arc<Roots>,
    tool: String,
    agent: Arc<AgentProfile>,
    /// The call's arguments, kept only when there are rules to judge them.
    arguments: Value,
    /// Which of them hold URLs (replaced by a hop's).
    urls: Vec<String>,
    approved_by_person: bool,
    allow_only: bool,
}

impl RuledCall {
    pub(crate) fn new(
        rules: Arc<aether_policy::rules::RuleSet>,
        roots: Arc<Roots>,
        call: &Call<'_>,
        def: &aether_policy::ToolDef,
    ) -> RuledCall {
        let arguments = match rules.is_empty() {
            true => Value::Null,
            false => call.args.clone(),
        };
        RuledCall {
            rules,
            roots,
            tool: def.name.clone(),
            agent: call.ctx.agent.clone(),
            arguments,
            urls: def.arguments.urls.clone(),
            approved_by_person: call.decision.starts_with("approved by"),
            allow_only: call.allowed_by_rule && def.tier == aether_policy::Tier::Restricted,
        }
    }
}

/// A file or folder an open really lands on is judged as the call's own paths were, so a path
/// swapped for a link between admission and the open meets the rules where it leads. An
/// `always_deny` refuses the open; so does an `ask_user` the call's person did not approve
/// (nobody can be asked mid-call), and, for a Restricted call an `always_allow` rule admitted
/// without a person, a landing that rule does not allow.
impl aether_tools_core::PathCheck for RuledCall {
    fn check(&self, root: &Root, real_rel: &str, is_dir: bool) -> Result<(), ToolError> {
        if self.rules.is_empty()
            || !self
                .rules
                .looks_at_paths(&self.tool, &self.agent.name, self.agent.team.as_deref())
        {
            return Ok(());
        }
        let mut forms = vec![real_rel.to_string()];
        in_other_roots(&self.roots, root, &mut forms);
        let dirs = if is_dir { forms.clone() } else { Vec::new() };
        let facts = aether_policy::rules::CallFacts {
            tool: &self.tool,
            agent: &self.agent.name,
            team: self.agent.team.as_deref(),
            arguments: &self.arguments,
            paths: &forms,
            dirs: &dirs,
            hosts: &[],
        };
        use aether_policy::rules::Action;
        let verdict = self.rules.evaluate(&facts);
        let refused = match &verdict {
            Some(v) if v.action == Action::AlwaysDeny => true,
            Some(v) if v.action == Action::AskUser => !self.approved_by_person,
            Some(v) if v.action == Action::AlwaysAllow => false,
            _ => self.allow_only,
        };
        if !refused {
            return Ok(());
        }
        let why = match verdict {
            Some(v) => format!("the operator's rule {:?} ({})", v.rule, v.action.as_str()),
            None => "no rule that admitted the call".into(),
        };
        Err(ToolError::denied(
            "rules",
            format!(
                "{} is where this open really lands, and it meets {why}; refused",
                root.display(real_rel)
            ),
        ))
    }
}

/// See [`Pipeline::facts`].
#[derive(Default)]
struct Facts {
    paths: Vec<String>,
    dirs: Vec<String>,
    hosts: Vec<String>,
}

/// `rel` under `root` as it really is: `None` when no component of it is a symbolic link (the
/// common case, found with one `lstat` per component below the root, whose own path is
/// already real), else its real path relative to the root (`None` if that leaves the root,
/// where the tool refuses it anyway). Also says whether it is a folder.
fn real_relative(root: &aether_tools_core::Root, rel: &str) -> (Option<String>, bool) {
    let mut full = root.path.clone();
    let mut is_dir = rel.is_empty();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        full.push(part);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => return resolved(root, rel),
            Ok(m) => is_dir = m.is_dir(),
            // Not there (yet): nothing below it can be a link.
            Err(_) => return (None, false),
        }
    }
    (None, is_dir)
}

/// The slow path of [`real_relative`]: the real path of the deepest existing ancestor, plus
/// the rest.
fn resolved(root: &aether_tools_core::Root, rel: &str) -> (Option<String>, bool) {
    let mut existing = root.path.join(rel);
    let mut rest = Vec::new();
    let real = loop {
        match std::fs::canonicalize(&existing) {
            Ok(real) => break real,
            Err(_) => {
                let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
                    return (None, false);
                };
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
        }
    };
    let is_dir = rest.is_empty() && real.is_dir();
    let mut full = real;
    for part in rest.into_iter().rev() {
        full.push(part);
    }
    (root.relative_of(&full), is_dir)
}

/// The operator's rules applied to a destination a tool reaches mid-call: a hop to a host a
/// rule denies, or would ask a person about, stops the call (a person cannot be asked in the
/// middle of a request). A hop is judged as the same call sent to the hop's URL, so a rule on
/// its method, body or any other argument holds on every hop as on the first.
impl aether_tools_core::DestinationCheck for RuledCall {
    fn check(&self, url: &str, host: &str) -> Result<(), ToolError> {
        if self.rules.is_empty() {
            return Ok(());
        }
        // The call as it would be to this hop: its own URL in place of the ones asked for.
        let mut arguments = match &self.arguments {
            Value::Object(map) => map.clone(),
            _ => serde_json::Map::new(),
        };
        for key in &self.urls {
            arguments.remove(key);
        }
        let key = self.urls.first().map_or("url", String::as_str);
        arguments.insert(key.into(), Value::String(url.to_string()));
        let arguments = Value::Object(arguments);
        // Spelled as the first hop's hosts are (IPv6 in brackets), so a host rule means the
        // same on every hop.
        let hosts = vec![aether_policy::rules::url_host(url).unwrap_or_else(|| host.to_string())];
        let facts = aether_policy::rules::CallFacts {
            tool: &self.tool,
            agent: &self.agent.name,
            team: self.agent.team.as_deref(),
            arguments: &arguments,
            paths: &[],
            dirs: &[],
            hosts: &hosts,
        };
        match self.rules.evaluate(&facts) {
            Some(v) if v.action != aether_policy::rules::Action::AlwaysAllow => {
                Err(ToolError::denied(
                    "rules",
                    format!(
                        "a redirect to {host} meets the operator's rule {:?} ({}); the request stopped there",
                        v.rule,
                        v.action.as_str()
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Step 8 for one call: the arguments' credential scan (`leak`, from when they were
/// recorded), then each URL it holds (its declared URL arguments, and any string that is a URL
/// by itself) and each declared host against the agent's egress policy. A refusal names the
/// rule, never the secret.
pub(crate) fn egress_check(
    ctx: &SessionContext,
    def: &aether_policy::ToolDef,
    args: &Value,
    leak: Option<aether_policy::dlp::Finding>,
) -> Result<(), Refusal> {
    if let Some(finding) = leak {
        return Err(Refusal::new(
            Step::Egress,
            finding.rule,
            format!("the call carries {finding}; nothing was sent"),
        ));
    }
    let policy = ctx
        .agent
        .egress()
        .map_err(|why| Refusal::new(Step::Egress, "egress:configuration", why))?;
    let kinds = &def.arguments;
    let hosts = kinds.strings_named(&kinds.hosts, args);
    let as_urls = hosts.iter().map(|h| format!("http://{h}/"));
    for url in kinds
        .urls_in(args)
        .into_iter()
        .map(str::to_string)
        .chain(as_urls)
    {
        let destination = aether_policy::egress::parse_destination(&url).map_err(Refusal::from)?;
        policy
            .check_destination(&destination)
            .map_err(Refusal::from)?;
    }
    Ok(())
}

/// The refusal of an `always_deny` verdict: its rule, and its reason or a plain one.
pub(crate) fn denial(
    v: &aether_policy::rules::Verdict<'_>,
    def: &aether_policy::ToolDef,
) -> Refusal {
    Refusal::new(
        Step::Rules,
        format!("rule:{}", v.rule),
        v.reason
            .map(String::from)
            .unwrap_or_else(|| format!("the operator's rules deny {} here", def.name)),
    )
}
