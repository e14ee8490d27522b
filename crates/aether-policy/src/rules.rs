//! The operator's permission rules (`permissions.yaml`): parsed, checked, compiled, evaluated.
//!
//! A rule names the calls it is about and what happens to them:
//!
//! ```yaml
//! rules:
//!   - name: no-destructive-shell      # optional; "rule #N" (1-based) when left out
//!     match:                          # every condition given must hold; a list inside one is OR
//!       tool: run_shell               # glob(s) over tool names: "upstream__*", "*_file"
//!       team: core                    # name(s)
//!       agent: [coder, reviewer]      # name(s)
//!       arg_pattern: "rm -rf|dd if="  # regex searched in every string anywhere in the arguments
//!       args:                         # regex per argument: a top-level name or a JSON pointer
//!         command: "^sudo\\b"         #   ("/opts/0"); a non-string is matched as compact JSON
//!       path: "secrets/**"            # glob(s) over the paths the call names; `*` stops at `/`
//!       url_host: "*.example.com"     # host(s): exact, or "*." for sub-domains only
//!     action: always_deny             # always_deny | ask_user | always_allow
//!     reason: "Destructive shell pattern blocked by policy"   # optional, shown to the caller
//! ```
//!
//! **Precedence.** Every rule is tried. A matching `always_deny` wins over a matching
//! `ask_user`, which wins over a matching `always_allow`; within one action the first rule in
//! the file is the one named. File order never lets an allow overtake a deny, so an operator
//! can append a narrow deny without re-reading the allows above it.
//!
//! **Paths and hosts are matched conservatively.** A call can name several paths (and reach
//! several hosts). For `always_deny` and `ask_user` the condition holds if *any* of them
//! matches; for `always_allow` only if there is at least one and *every* one matches, so an
//! allow is never obtained by naming one allowed path beside a forbidden one. For the same
//! reason path globs of deny and ask rules ignore case (`Secrets/KEY` is `secrets/key` on a
//! case-insensitive disk) while those of allow rules do not. `arg_pattern` has no such
//! safeguard (it holds when any string matches), so an allow rule may not use it: it names its
//! argument with `args` instead.
//!
//! Like `config`, this is the first of two steps: text in, checked and compiled values out,
//! every problem reported with where it is. Nothing here reads a file. The facts a call is
//! judged on ([`CallFacts`]) are computed by the caller, reading the call through its tool's
//! declaration (`crate::arguments`); [`url_host`] spells a host as a client reaches it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use regex::{Regex, RegexBuilder};
use serde::de::{self, DeserializeOwned, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_yaml_ng::Value as Yaml;

pub use crate::arguments::url_host;

/// The name the operator's rule file goes by in messages.
pub const RULES_FILE: &str = "permissions.yaml";

/// The most memory one compiled regex may take: enough for any sensible pattern, and a clear
/// error instead of a slow start for a pathological one (`(a{1000}){1000}`).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What a matching rule does to a call. Ordered by precedence: the least is the strongest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    AlwaysDeny,
    AskUser,
    AlwaysAllow,
}

impl Action {
    pub const ALL: [Action; 3] = [Action::AlwaysDeny, Action::AskUser, Action::AlwaysAllow];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::AlwaysDeny => "always_deny",
            Action::AskUser => "ask_user",
            Action::AlwaysAllow => "always_allow",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Whether a condition over several paths or hosts needs every one of them to match (an
    /// allow) rather than any one (a deny or an ask).
    fn needs_every(self) -> bool {
        self == Action::AlwaysAllow
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a call is judged on. Everything is computed by the caller; nothing is read here.
#[derive(Clone, Copy, Debug)]
pub struct CallFacts<'a> {
    pub tool: &'a str,
    pub agent: &'a str,
    pub team: Option<&'a str>,
    pub arguments: &'a Value,
    /// Every path the call names, relative to its root and cleaned (the caller computes these;
    /// there can be several forms of one path, e.g. as written and after symlinks are
    /// resolved).
    pub paths: &'a [String],
    /// The paths among them that are folders on disk, and `""` for a root a call walks
    /// without naming a path. A deny or ask rule's path condition also holds for a folder
    /// that may hold something its globs match (`secrets/**` holds for `secrets` and for the
    /// root): a search, a listing or a move of the folder would reach it.
    pub dirs: &'a [String],
    /// Every host the call would reach (lower-case, no trailing dot; the caller computes these).
    pub hosts: &'a [String],
}

/// The rule that decided a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict<'a> {
    pub action: Action,
    pub rule: &'a str,
    pub reason: Option<&'a str>,
}

/// One rule as `aether policy check` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSummary<'a> {
    /// 1-based place in the file.
    pub position: usize,
    pub name: &'a str,
    pub action: Action,
    /// The match on one line, e.g. `tool in {run_shell} and agent in {coder}`.
    pub matches: &'a str,
    pub reason: Option<&'a str>,
}

/// Everything wrong with a rule file, each with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesError {
    pub problems: Vec<String>,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{RULES_FILE} has {} problem(s):", self.problems.len())?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RulesError {}

/// The operator's rules, compiled.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    /// In precedence order: denies, then asks, then allows, each in file order. The first rule
    /// in this order that matches a call is the verdict.
    rules: Vec<Rule>,
    /// Every rule's tool globs in one set, the prefilter: a rule is only tried on a tool one of
    /// its globs matches.
    tool_globs: GlobSet,
    /// For each glob of `tool_globs`, the index of its rule (ascending, as globs are added in
    /// rule order).
    glob_rule: Vec<usize>,
    /// Rules without a tool condition (ascending): tried on every tool.
    any_tool: Vec<usize>,
    /// Indices into `rules` in file order, for printing.
    file_order: Vec<usize>,
}

#[derive(Clone, Debug)]
struct Rule {
    position: usize,
    name: String,
    action: Action,
    reason: Option<String>,
    /// The match on one line, for [`RuleSummary`].
    described: String,
    tools: Vec<Glob>,
    teams: Option<Vec<String>>,
    agents: Option<Vec<String>>,
    arg_pattern: Option<Regex>,
    args: Vec<(ArgKey, Regex)>,
    paths: Option<PathGlobs>,
    hosts: Option<Vec<HostPattern>>,
}

/// Where `args` looks for one argument.
#[derive(Clone, Debug)]
enum ArgKey {
    Name(String),
    Pointer(String),
}

/// One `url_host` entry: a host, or (from `*.example.com`) `.example.com`, whose strict
/// sub-domains match.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    Subdomains(String),
}

impl RuleSet {
    /// Parses and compiles a rule file. An empty file, or `rules: []`, has no rules.
    pub fn parse(text: &str) -> Result<RuleSet, RulesError> {
        let mut problems = Vec::new();
        let raw = raw_rules(text, &mut problems);
        let mut rules = Vec::new();
        let mut names = BTreeSet::new();
        for (i, value) in raw.into_iter().enumerate() {
            // Checked on the YAML, so that a rule with other problems is not left out.
            if let Some(name) = value.get("name").and_then(Yaml::as_str)
                && !names.insert(name.to_string())
            {
                problems.push(format!(
                    "rules[{i}] ({name}): the name is already used by an earlier rule"
                ));
            }
            rules.extend(Rule::from_yaml(i, value, &mut problems));
        }
        if !problems.is_empty() {
            return Err(RulesError { problems });
        }
        RuleSet::build(rules).map_err(|p| RulesError { problems: vec![p] })
    }

    fn build(mut rules: Vec<Rule>) -> Result<RuleSet, String> {
        rules.sort_by_key(|r| (r.action, r.position));
        let mut set = GlobSetBuilder::new();
        let (mut glob_rule, mut any_tool) = (Vec::new(), Vec::new());
        for (i, rule) in rules.iter().enumerate() {
            if rule.tools.is_empty() {
                any_tool.push(i);
            }
            for glob in &rule.tools {
                set.add(glob.clone());
                glob_rule.push(i);
            }
        }
        let tool_globs = set
            .build()
            .map_err(|e| format!("match.tool: the tool globs together: {e}"))?;
        let mut file_order: Vec<usize> = (0..rules.len()).collect();
        file_order.sort_by_key(|&i| rules[i].position);
        Ok(RuleSet {
            rules,
            tool_globs,
            glob_rule,
            any_tool,
            file_order,
        })
    }

    /// The rule that decides this call, or `None` when no rule matches.
    pub fn evaluate(&self, facts: &CallFacts) -> Option<Verdict<'_>> {
        self.first_match(facts.tool, |rule| rule.matches(facts))
            .map(Rule::verdict)
    }

    /// The `always_deny` rule, if any, that refuses `tool` to this agent whatever its
    /// arguments: one whose conditions are only on tool, team and agent. The catalog hides such
    /// tools, so what an agent is offered is what it can run.
    pub fn denies_outright(
        &self,
        tool: &str,
        agent: &str,
        team: Option<&str>,
    ) -> Option<Verdict<'_>> {
        self.first_match(tool, |rule| {
            rule.action == Action::AlwaysDeny
                && rule.is_identity_only()
                && rule.matches_identity(agent, team)
        })
        .map(Rule::verdict)
    }

    /// Whether any rule that could apply to `tool` (for this agent and team) looks at the
    /// call's paths: the caller works them out (a few system calls) only then.
    pub fn looks_at_paths(&self, tool: &str, agent: &str, team: Option<&str>) -> bool {
        self.first_match(tool, |rule| {
            rule.paths.is_some() && rule.matches_identity(agent, team)
        })
        .is_some()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Every rule in file order, for printing.
    pub fn rules(&self) -> impl Iterator<Item = RuleSummary<'_>> {
        self.file_order.iter().map(|&i| self.rules[i].summary())
    }

    /// The first rule, in precedence order, whose tool condition holds for `tool` and that
    /// `accept`s. Walks the prefilter's hits and the tool-less rules together, in order.
    fn first_match(&self, tool: &str, accept: impl Fn(&Rule) -> bool) -> Option<&Rule> {
        GLOB_HITS.with_borrow_mut(|hits| {
            self.tool_globs.matches_into(tool, hits);
            let (mut g, mut a, mut last) = (0, 0, None);
            loop {
                let from_glob = hits.get(g).map(|&h| self.glob_rule[h]);
                let next = match (from_glob, self.any_tool.get(a)) {
                    (Some(r), Some(&t)) if r < t => take(&mut g, r),
                    (_, Some(&t)) => take(&mut a, t),
                    (Some(r), None) => take(&mut g, r),
                    (None, None) => return None,
                };
                // A rule with several tool globs is hit once per glob; try it once.
                if last != Some(next) && accept(&self.rules[next]) {
                    return Some(&self.rules[next]);
                }
                last = Some(next);
            }
        })
    }
}

thread_local! {
    /// The prefilter's scratch space, so that evaluating a call does not allocate.
    static GLOB_HITS: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Advances a cursor, yielding the rule it was on.
fn take(cursor: &mut usize, rule: usize) -> usize {
    *cursor += 1;
    rule
}

impl Rule {
    fn verdict(&self) -> Verdict<'_> {
        Verdict {
            action: self.action,
            rule: &self.name,
            reason: self.reason.as_deref(),
        }
    }

    fn summary(&self) -> RuleSummary<'_> {
        RuleSummary {
            position: self.position,
            name: &self.name,
            action: self.action,
            matches: &self.described,
            reason: self.reason.as_deref(),
        }
    }

    /// Everything but the tool condition, which the prefilter has checked. Cheapest first.
    fn matches(&self, facts: &CallFacts) -> bool {
        self.matches_identity(facts.agent, facts.team)
            && self.hosts.as_ref().is_none_or(|patterns| {
                self.quantified(facts.hosts, |h| patterns.iter().any(|p| p.matches(h)))
            })
            && self.paths.as_ref().is_none_or(|globs| {
                if self.action.needs_every() {
                    self.quantified(facts.paths, |p| globs.set.is_match(p))
                } else {
                    // A deny or an ask holds for a path inside what it names, as a .gitignore
                    // entry does (`secrets` and `secrets/*` hold for `secrets/sub/key`), and
                    // for a folder that may hold what it names.
                    self.quantified(facts.paths, |p| {
                        globs.set.is_match(p) || ancestors(p).any(|a| globs.set.is_match(a))
                    }) || facts.dirs.iter().any(|d| globs.could_hold(d))
                }
            })
            && self.args.iter().all(|(key, re)| {
                key.lookup(facts.arguments)
                    .is_some_and(|v| value_matches(re, v))
            })
            && self
                .arg_pattern
                .as_ref()
                .is_none_or(|re| any_string_matches(re, facts.arguments))
    }

    fn matches_identity(&self, agent: &str, team: Option<&str>) -> bool {
        self.agents.as_ref().is_none_or(|a| contains(a, agent))
            && self
                .teams
                .as_ref()
                .is_none_or(|t| team.is_some_and(|team| contains(t, team)))
    }

    /// Whether the rule looks only at who calls which tool, never at what the call says.
    fn is_identity_only(&self) -> bool {
        self.arg_pattern.is_none()
            && self.args.is_empty()
            && self.paths.is_none()
            && self.hosts.is_none()
    }

    /// A condition over several paths or hosts: any one for a deny or an ask, every one (and at
    /// least one) for an allow.
    fn quantified(&self, items: &[String], matches: impl Fn(&str) -> bool) -> bool {
        if items.is_empty() {
            false
        } else if self.action.needs_every() {
            items.iter().all(|i| matches(i))
        } else {
            items.iter().any(|i| matches(i))
        }
    }
}

fn contains(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

impl ArgKey {
    fn lookup<'v>(&self, args: &'v Value) -> Option<&'v Value> {
        match self {
            ArgKey::Name(name) => args.get(name),
            ArgKey::Pointer(pointer) => args.pointer(pointer),
        }
    }
}

/// A string is searched as it is; anything else as its compact JSON (`3`, `true`, `["a"]`).
fn value_matches(re: &Regex, value: &Value) -> bool {
    match value {
        Value::String(s) => re.is_match(s),
        other => re.is_match(&other.to_string()),
    }
}

/// Whether any string anywhere in `value` (through nested arrays and objects) matches.
fn any_string_matches(re: &Regex, value: &Value) -> bool {
    match value {
        Value::String(s) => re.is_match(s),
        Value::Array(items) => items.iter().any(|v| any_string_matches(re, v)),
        Value::Object(map) => map.values().any(|v| any_string_matches(re, v)),
        _ => false,
    }
}

impl HostPattern {
    /// `example.com`, `*.example.com`, an IP address, or `[::1]`; spelled as [`url_host`]
    /// spells hosts (lower-case ASCII, IDNA applied, no trailing dot).
    fn parse(pattern: &str) -> Result<HostPattern, String> {
        match pattern.strip_prefix("*.") {
            Some(domain) => match parse_host(domain)? {
                url::Host::Domain(d) => Ok(HostPattern::Subdomains(format!(".{d}"))),
                _ => Err("`*.` goes before a domain name, not an IP address".into()),
            },
            None => Ok(HostPattern::Exact(parse_host(pattern)?.to_string())),
        }
    }

    fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').as_bytes();
        match self {
            HostPattern::Exact(h) => host.eq_ignore_ascii_case(h.as_bytes()),
            HostPattern::Subdomains(suffix) => {
                let suffix = suffix.as_bytes();
                host.len() > suffix.len()
                    && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
            }
        }
    }
}

/// A host as the `url` crate reads one, refusing what it would accept silently: a wildcard
/// anywhere but a leading `*.`, and nothing left once trailing dots are gone.
fn parse_host(text: &str) -> Result<url::Host, String> {
    let text = text.trim_end_matches('.');
    if text.contains('*') {
        return Err("a host is exact, or `*.` and a domain; no other wildcard".into());
    }
    if text.is_empty() {
        return Err("the host is empty".into());
    }
    if !text.starts_with('[') && text.contains([':', '/', '@']) {
        return Err("a host name only: no scheme, user, port or path".into());
    }
    url::Host::parse(text).map_err(|e| format!("not a host: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Parsing and checking.

/// The file as written: only `rules`, each rule kept as YAML until [`Rule::from_yaml`] checks
/// it, so that one bad rule does not hide the problems of the next.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with a `rules` list")]
struct RawFile {
    rules: Option<Yaml>,
}

/// Every field kept as YAML and converted one by one, so that a problem names its field.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a rule: a mapping with `match`, `action` and optionally `name` and `reason`"
)]
struct RawRule {
    name: Option<Yaml>,
    #[serde(rename = "match")]
    matches: Option<Yaml>,
    action: Option<Yaml>,
    reason: Option<Yaml>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of conditions")]
struct RawMatch {
    tool: Option<Yaml>,
    team: Option<Yaml>,
    agent: Option<Yaml>,
    arg_pattern: Option<Yaml>,
    args: Option<Yaml>,
    path: Option<Yaml>,
    url_host: Option<Yaml>,
}

/// The rules of a file, as YAML; structural problems go to `problems`.
fn raw_rules(text: &str, problems: &mut Vec<String>) -> Vec<Yaml> {
    let document: Yaml = match serde_yaml_ng::from_str(text) {
        Ok(d) => d,
        Err(e) => {
            problems.push(format!("not valid YAML: {e}"));
            return Vec::new();
        }
    };
    // Nothing, or a `rules:` with nothing after it, is what a file cut short or caught
    // half-written looks like: never read as "no rules" (that would drop every rule).
    let missing = "the file has no `rules:` list (an empty or cut-short file keeps the last good rules; write `rules: []` for no rules)";
    if document.is_null() {
        problems.push(missing.into());
        return Vec::new();
    }
    let rules = match RawFile::deserialize(document) {
        Ok(RawFile { rules: Some(r) }) if !r.is_null() => Some(r),
        Ok(_) => {
            problems.push(missing.into());
            return Vec::new();
        }
        Err(e) => {
            problems.push(format!("top level: {e}"));
            return Vec::new();
        }
    };
    let mut place = Place {
        at: "rules".into(),
        problems,
    };
    place.field("", rules).unwrap_or_default()
}

/// Where problems are reported from: `rules[2] (no-sudo)` and the problems found so far.
struct Place<'p> {
    at: String,
    problems: &'p mut Vec<String>,
}

impl Place<'_> {
    /// Records a problem at `field` (`""`, `.action`, `.match.args.command`).
    fn report(&mut self, field: &str, problem: impl fmt::Display) {
        self.problems.push(format!("{}{field}: {problem}", self.at));
    }

    /// Converts a field that may be absent; a value of the wrong shape is reported.
    fn field<T: DeserializeOwned>(&mut self, field: &str, value: Option<Yaml>) -> Option<T> {
        match T::deserialize(value?) {
            Ok(v) => Some(v),
            Err(e) => {
                self.report(field, e);
                None
            }
        }
    }
}

impl Rule {
    /// Checks and compiles rule `index`; every problem goes to `problems`.
    fn from_yaml(index: usize, value: Yaml, problems: &mut Vec<String>) -> Option<Rule> {
        let mut place = Place {
            at: rule_place(index, &value),
            problems,
        };
        let raw = match RawRule::deserialize(value) {
            Ok(raw) => raw,
            Err(e) => {
                place.report("", e);
                return None;
            }
        };
        let before = place.problems.len();
        let name = rule_name(&mut place, index, raw.name);
        let action = rule_action(&mut place, raw.action);
        let reason: Option<String> = place.field(".reason", raw.reason);
        let conditions = Conditions::from_yaml(&mut place, raw.matches, action);
        if action == Some(Action::AlwaysAllow) && conditions.as_ref().is_some_and(|c| c.is_empty())
        {
            place.report(
                ".match",
                "always_allow with an empty match would wave through every call, Restricted ones included",
            );
        }
        if action == Some(Action::AlwaysAllow)
            && conditions.as_ref().is_some_and(|c| c.arg_pattern.is_some())
        {
            // One extra string anywhere in the arguments would satisfy it: an allow must name
            // the argument it trusts.
            place.report(
                ".match.arg_pattern",
                "always_allow cannot use arg_pattern (any string anywhere would satisfy it); name the argument under args",
            );
        }
        if place.problems.len() > before {
            return None;
        }
        let c = conditions?;
        Some(Rule {
            position: index + 1,
            name,
            action: action?,
            reason,
            described: c.described,
            tools: c.tools,
            teams: c.teams,
            agents: c.agents,
            arg_pattern: c.arg_pattern,
            args: c.args,
            paths: c.paths,
            hosts: c.hosts,
        })
    }
}

/// `rules[2]`, with the rule's name when it has a readable one: `rules[2] (no-sudo)`.
fn rule_place(index: usize, value: &Yaml) -> String {
    match value.get("name").and_then(Yaml::as_str) {
        Some(name) => format!("rules[{index}] ({name})"),
        None => format!("rules[{index}]"),
    }
}

/// The rule's name, or `rule #N`: the `#` keeps a default apart from every name one can write.
fn rule_name(place: &mut Place, index: usize, value: Option<Yaml>) -> String {
    let default = || format!("rule #{}", index + 1);
    match place.field::<String>(".name", value) {
        Some(name) if is_rule_name(&name) => name,
        Some(_) => {
            place.report(".name", "a rule name is 1-64 of A-Z a-z 0-9 space _ . : -");
            default()
        }
        None => default(),
    }
}

pub fn is_rule_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" _.:-".contains(&b))
}

fn rule_action(place: &mut Place, value: Option<Yaml>) -> Option<Action> {
    let expected = "always_deny, ask_user or always_allow";
    if value.is_none() {
        place.report(".action", format_args!("missing; one of {expected}"));
        return None;
    }
    let text: String = place.field(".action", value)?;
    let action = Action::parse(&text);
    if action.is_none() {
        place.report(
            ".action",
            format_args!("{text:?} is not an action; one of {expected}"),
        );
    }
    action
}

/// A rule's `match`, checked and compiled.
#[derive(Default)]
struct Conditions {
    described: String,
    tools: Vec<Glob>,
    teams: Option<Vec<String>>,
    agents: Option<Vec<String>>,
    arg_pattern: Option<Regex>,
    args: Vec<(ArgKey, Regex)>,
    paths: Option<PathGlobs>,
    hosts: Option<Vec<HostPattern>>,
}

impl Conditions {
    fn from_yaml(place: &mut Place, value: Option<Yaml>, action: Option<Action>) -> Option<Self> {
        let raw = match value.map(RawMatch::deserialize).transpose() {
            Ok(raw) => raw.unwrap_or_default(),
            Err(e) => {
                place.report(".match", e);
                return None;
            }
        };
        let mut describe = Description::default();
        let tools = place.field::<Strings>(".match.tool", raw.tool);
        let teams = place.field::<Strings>(".match.team", raw.team);
        let agents = place.field::<Strings>(".match.agent", raw.agent);
        let arg_pattern = place.field::<String>(".match.arg_pattern", raw.arg_pattern);
        let args = place.field::<BTreeMap<String, String>>(".match.args", raw.args);
        let paths = place.field::<Strings>(".match.path", raw.path);
        let hosts = place.field::<Strings>(".match.url_host", raw.url_host);
        // Deny and ask path globs ignore case (see the module docs); allow globs do not.
        let fold_case = action != Some(Action::AlwaysAllow);
        let every = if fold_case { "any" } else { "every" };
        Some(Conditions {
            tools: tool_globs(place, &mut describe, tools),
            teams: names(place, &mut describe, "team", teams),
            agents: names(place, &mut describe, "agent", agents),
            arg_pattern: arg_pattern_regex(place, &mut describe, arg_pattern),
            args: arg_regexes(place, &mut describe, args),
            paths: path_globs(place, &mut describe, paths, fold_case, every),
            hosts: host_patterns(place, &mut describe, hosts, every),
            described: describe.finish(),
        })
    }

    fn is_empty(&self) -> bool {
        self.tools.is_empty()
            && self.teams.is_none()
            && self.agents.is_none()
            && self.arg_pattern.is_none()
            && self.args.is_empty()
            && self.paths.is_none()
            && self.hosts.is_none()
    }
}

/// The one-line description of a match, built as its conditions are checked.
#[derive(Default)]
struct Description(Vec<String>);

impl Description {
    fn list(&mut self, what: &str, items: &[String]) {
        self.0.push(format!("{what} in {{{}}}", items.join(", ")));
    }

    fn finish(self) -> String {
        if self.0.is_empty() {
            "every call".into()
        } else {
            self.0.join(" and ")
        }
    }
}

/// Non-empty strings, each checked; `None` when the condition is absent or had a problem.
fn checked_items(place: &mut Place, field: &str, items: Option<Strings>) -> Option<Vec<String>> {
    let items = items?.0;
    let mut ok = !items.is_empty();
    if items.is_empty() {
        place.report(
            field,
            "an empty list matches nothing; leave the condition out",
        );
    }
    for (i, item) in items.iter().enumerate() {
        if item.trim().is_empty() {
            place.report(&format!("{field}[{i}]"), "empty");
            ok = false;
        }
    }
    ok.then_some(items)
}

fn tool_globs(place: &mut Place, describe: &mut Description, tools: Option<Strings>) -> Vec<Glob> {
    let Some(tools) = checked_items(place, ".match.tool", tools) else {
        return Vec::new();
    };
    describe.list("tool", &tools);
    tools
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            Glob::new(t)
                .map_err(|e| place.report(&format!(".match.tool[{i}]"), e))
                .ok()
        })
        .collect()
}

fn names(
    place: &mut Place,
    describe: &mut Description,
    what: &str,
    names: Option<Strings>,
) -> Option<Vec<String>> {
    let names = checked_items(place, &format!(".match.{what}"), names)?;
    describe.list(what, &names);
    Some(names)
}

fn arg_pattern_regex(
    place: &mut Place,
    describe: &mut Description,
    pattern: Option<String>,
) -> Option<Regex> {
    let pattern = pattern?;
    describe
        .0
        .push(format!("any string argument matches /{pattern}/"));
    compile_regex(&pattern)
        .map_err(|e| place.report(".match.arg_pattern", e))
        .ok()
}

fn arg_regexes(
    place: &mut Place,
    describe: &mut Description,
    args: Option<BTreeMap<String, String>>,
) -> Vec<(ArgKey, Regex)> {
    let mut compiled = Vec::new();
    for (key, pattern) in args.into_iter().flatten() {
        let field = format!(".match.args.{key}");
        describe.0.push(format!("args {key} matches /{pattern}/"));
        let key = match arg_key(&key) {
            Ok(key) => key,
            Err(e) => {
                place.report(&field, e);
                continue;
            }
        };
        match compile_regex(&pattern) {
            Ok(re) => compiled.push((key, re)),
            Err(e) => place.report(&field, e),
        }
    }
    compiled
}

/// A top-level argument name, or a JSON pointer (RFC 6901) when it starts with `/`.
fn arg_key(key: &str) -> Result<ArgKey, String> {
    if key.is_empty() {
        return Err("an empty argument name".into());
    }
    if !key.starts_with('/') {
        return Ok(ArgKey::Name(key.to_string()));
    }
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err("in a JSON pointer `~` is written `~0` and `/` inside a name `~1`".into());
        }
    }
    Ok(ArgKey::Pointer(key.to_string()))
}

/// The folders above `path`, nearest first (`a/b/c` gives `a/b`, then `a`).
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let (parent, _) = rest.rsplit_once('/')?;
        rest = parent;
        Some(parent)
    })
}

/// A rule's path globs: the set that matches paths, and each glob split into its components,
/// to tell whether a folder may hold something the set matches.
#[derive(Clone, Debug)]
struct PathGlobs {
    set: GlobSet,
    components: Vec<Vec<Part>>,
}

/// One component of a path glob.
#[derive(Clone, Debug)]
enum Part {
    /// `**`, or anything whose reach across `/` is not known (`{a,b/c}`): may match any depth.
    Deep,
    /// A name, with or without wildcards (`secrets`, `*.key`), folded as the set folds it.
    Pattern(globset::GlobMatcher),
}

impl PathGlobs {
    /// Whether something under the folder `dir` (`""`: the root) may match one of the globs:
    /// the folder's components fit the start of a glob.
    fn could_hold(&self, dir: &str) -> bool {
        self.components.iter().any(|glob| {
            let mut parts = glob.iter();
            for name in dir.split('/').filter(|c| !c.is_empty()) {
                match parts.next() {
                    // The glob ends above this folder: all it matches lies elsewhere.
                    None => return false,
                    Some(Part::Deep) => return true,
                    Some(Part::Pattern(m)) if !m.is_match(name) => return false,
                    Some(_) => {}
                }
            }
            true
        })
    }
}

fn glob_components(glob: &str, fold_case: bool) -> Vec<Part> {
    if glob.contains('{') {
        return vec![Part::Deep];
    }
    glob.split('/')
        .filter(|c| !c.is_empty())
        .map(|c| {
            if c.contains("**") {
                Part::Deep
            } else {
                match GlobBuilder::new(c).case_insensitive(fold_case).build() {
                    Ok(g) => Part::Pattern(g.compile_matcher()),
                    Err(_) => Part::Deep,
                }
            }
        })
        .collect()
}

fn path_globs(
    place: &mut Place,
    describe: &mut Description,
    paths: Option<Strings>,
    fold_case: bool,
    every: &str,
) -> Option<PathGlobs> {
    let paths = checked_items(place, ".match.path", paths)?;
    describe.list(&format!("{every} path"), &paths);
    let mut set = GlobSetBuilder::new();
    let before = place.problems.len();
    for (i, glob) in paths.iter().enumerate() {
        let field = format!(".match.path[{i}]");
        if glob.starts_with('/') || glob.starts_with("./") {
            place.report(
                &field,
                format_args!("{glob:?}: paths are relative to their root and cleaned; write it without a leading / or ./"),
            );
            continue;
        }
        match GlobBuilder::new(glob)
            .literal_separator(true)
            .case_insensitive(fold_case)
            .build()
        {
            Ok(g) => {
                set.add(g);
            }
            Err(e) => place.report(&field, e),
        }
    }
    if place.problems.len() > before {
        return None;
    }
    let components = paths
        .iter()
        .map(|g| glob_components(g, fold_case))
        .collect();
    let set = set
        .build()
        .map_err(|e| place.report(".match.path", e))
        .ok()?;
    Some(PathGlobs { set, components })
}

fn host_patterns(
    place: &mut Place,
    describe: &mut Description,
    hosts: Option<Strings>,
    every: &str,
) -> Option<Vec<HostPattern>> {
    let hosts = checked_items(place, ".match.url_host", hosts)?;
    describe.list(&format!("{every} host"), &hosts);
    let before = place.problems.len();
    let patterns: Vec<HostPattern> = hosts
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            HostPattern::parse(h)
                .map_err(|e| {
                    place.report(&format!(".match.url_host[{i}]"), format_args!("{h:?}: {e}"))
                })
                .ok()
        })
        .collect();
    (place.problems.len() == before).then_some(patterns)
}

/// Compiles an operator's regex under [`REGEX_SIZE_LIMIT`].
fn compile_regex(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => {
                format!("the regex compiles to more than {limit} bytes; simplify it")
            }
            other => regex_syntax_problem(&other.to_string()),
        })
}

/// The parser's message is `regex parse error:`, the pattern, a caret under the fault, and
/// `error: WHAT`; this puts WHAT first and keeps the pattern and caret indented beneath it.
fn regex_syntax_problem(text: &str) -> String {
    let mut lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && *l != "regex parse error:")
        .collect();
    let what = lines.pop().unwrap_or_default();
    let mut problem = format!("invalid regex: {}", what.trim_start_matches("error: "));
    for line in lines {
        problem.push_str("\n      ");
        problem.push_str(line);
    }
    problem
}

/// One string or a list of strings, as a condition may be written.
#[derive(Debug, PartialEq)]
struct Strings(Vec<String>);

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OneOrMany;
        impl<'de> Visitor<'de> for OneOrMany {
            type Value = Strings;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Strings, E> {
                Ok(Strings(vec![s.to_string()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strings, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Strings(items))
            }
        }
        deserializer.deserialize_any(OneOrMany)
    }
}

// ---------------------------------------------------------------------------------------------
// Facts from arguments.

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A call by `coder` of team `core`, to be adjusted per test.
    struct Call {
        tool: &'static str,
        agent: &'static str,
        team: Option<&'static str>,
        arguments: Value,
        paths: Vec<String>,
        dirs: Vec<String>,
        hosts: Vec<String>,
    }

    fn call(tool: &'static str, arguments: Value) -> Call {
        Call {
            tool,
            agent: "coder",
            team: Some("core"),
            arguments,
            paths: Vec::new(),
            dirs: Vec::new(),
            hosts: Vec::new(),
        }
    }

    impl Call {
        fn paths(mut self, paths: &[&str]) -> Call {
            self.paths = paths.iter().map(|p| p.to_string()).collect();
            self
        }
        fn dirs(mut self, dirs: &[&str]) -> Call {
            self.dirs = dirs.iter().map(|p| p.to_string()).collect();
            self
        }
        fn hosts(mut self, hosts: &[&str]) -> Call {
            self.hosts = hosts.iter().map(|h| h.to_string()).collect();
            self
        }
        fn by(mut self, agent: &'static str, team: Option<&'static str>) -> Call {
            self.agent = agent;
            self.team = team;
            self
        }
    }

    /// The verdict of `rules` on `call`, as `(action, rule name)`.
    fn check(rules: &str, call: &Call) -> Option<(Action, String)> {
        let set = RuleSet::parse(rules).unwrap_or_else(|e| panic!("{e}"));
        let facts = CallFacts {
            tool: call.tool,
            agent: call.agent,
            team: call.team,
            arguments: &call.arguments,
            paths: &call.paths,
            dirs: &call.dirs,
            hosts: &call.hosts,
        };
        set.evaluate(&facts).map(|v| (v.action, v.rule.to_string()))
    }

    /// Whether a single rule with this `match` and action matches the call.
    fn matches(condition: &str, action: &str, call: &Call) -> bool {
        let rules = format!("rules:\n  - name: r\n    match: {condition}\n    action: {action}\n");
        check(&rules, call).is_some()
    }

    /// The problems of a file that must not parse, as one string.
    fn problems(rules: &str) -> String {
        match RuleSet::parse(rules) {
            Ok(_) => panic!("should not parse:\n{rules}"),
            Err(e) => e.to_string(),
        }
    }

    fn deny(c: &str, call: &Call) -> bool {
        matches(c, "always_deny", call)
    }

    fn allow(c: &str, call: &Call) -> bool {
        matches(c, "always_allow", call)
    }

    const MIXED: &str = r#"
rules:
  - name: allow-shell
    match: { tool: run_shell }
    action: always_allow
  - name: ask-shell
    match: { tool: "run_*" }
    action: ask_user
  - name: deny-rm
    match: { arg_pattern: "rm -rf" }
    action: always_deny
    reason: destructive
  - name: deny-shell
    match: { tool: run_shell }
    action: always_deny
"#;

    #[test]
    fn deny_beats_ask_beats_allow_whatever_the_file_order() {
        let rm = call("run_shell", json!({"command": "rm -rf /"}));
        assert_eq!(
            check(MIXED, &rm),
            Some((Action::AlwaysDeny, "deny-rm".into()))
        );
        let ls = call("run_shell", json!({"command": "ls"}));
        assert_eq!(
            check(MIXED, &ls),
            Some((Action::AlwaysDeny, "deny-shell".into()))
        );
        let without_deny = MIXED.split("  - name: deny-rm").next().unwrap();
        assert_eq!(
            check(without_deny, &ls),
            Some((Action::AskUser, "ask-shell".into()))
        );
        let only_allow = MIXED.split("  - name: ask-shell").next().unwrap();
        assert_eq!(
            check(only_allow, &ls),
            Some((Action::AlwaysAllow, "allow-shell".into()))
        );
        assert_eq!(check(MIXED, &call("read_file", json!({}))), None);
    }

    #[test]
    fn the_first_rule_of_the_winning_action_is_named_with_its_reason() {
        let set = RuleSet::parse(
            "rules:\n  - match: {tool: x}\n    action: ask_user\n  - match: {tool: x}\n    action: always_deny\n    reason: first\n  - name: second\n    match: {tool: '*'}\n    action: always_deny\n    reason: second\n",
        )
        .unwrap();
        let args = json!({});
        let facts = CallFacts {
            tool: "x",
            agent: "a",
            team: None,
            arguments: &args,
            paths: &[],
            dirs: &[],
            hosts: &[],
        };
        assert_eq!(
            set.evaluate(&facts),
            Some(Verdict {
                action: Action::AlwaysDeny,
                rule: "rule #2",
                reason: Some("first")
            })
        );
    }

    #[test]
    fn tool_globs_and_lists() {
        let c = call("upstream__search", json!({}));
        assert!(deny("{tool: 'upstream__*'}", &c));
        assert!(deny("{tool: [read_file, 'upstream__*']}", &c));
        assert!(!deny("{tool: [read_file, '*_file']}", &c));
        assert!(!deny("{tool: upstream}", &c));
        assert!(deny("{tool: '*_file'}", &call("read_file", json!({}))));
    }

    #[test]
    fn agent_and_team() {
        let c = call("x", json!({}));
        assert!(deny("{agent: coder}", &c));
        assert!(deny("{agent: [reviewer, coder]}", &c));
        assert!(!deny("{agent: [reviewer]}", &c));
        assert!(deny("{team: core}", &c));
        assert!(!deny("{team: [ops, qa]}", &c));
        assert!(!deny("{team: core}", &c.by("coder", None)), "no team");
        let c = call("x", json!({}));
        assert!(
            !deny("{agent: coder, team: ops}", &c),
            "conditions are ANDed"
        );
    }

    #[test]
    fn arg_pattern_searches_every_string_however_deep() {
        let c = call(
            "x",
            json!({"steps": [{"n": 1}, {"run": ["echo", {"cmd": "sudo rm -rf /"}]}]}),
        );
        assert!(deny("{arg_pattern: 'rm -rf'}", &c));
        assert!(!deny("{arg_pattern: 'mkfs'}", &c));
        assert!(
            !deny("{arg_pattern: '^1$'}", &call("x", json!({"n": 1}))),
            "numbers are not strings"
        );
        assert!(!deny("{arg_pattern: 'steps'}", &c), "keys are not searched");
    }

    #[test]
    fn args_by_name_and_by_pointer() {
        let c = call(
            "run_shell",
            json!({"command": "sudo ls", "opts": {"env": ["A=1", "B=2"], "n": 3, "force": true}}),
        );
        assert!(deny(r#"{args: {command: '^sudo\b'}}"#, &c));
        assert!(!deny(r#"{args: {command: '^ls'}}"#, &c));
        assert!(!deny("{args: {missing: ''}}", &c), "an absent argument");
        assert!(deny("{args: {/opts/env/1: '^B='}}", &c));
        assert!(!deny("{args: {/opts/env/0: '^B='}}", &c));
        assert!(deny("{args: {/opts/n: '^3$'}}", &c), "a number as JSON");
        assert!(deny("{args: {/opts/force: '^true$'}}", &c));
        assert!(
            deny(r#"{args: {opts: '"n":3'}}"#, &c),
            "an object as compact JSON"
        );
        assert!(
            !deny(r#"{args: {command: sudo, /opts/n: '4'}}"#, &c),
            "every args entry must hold"
        );
        let slash = call("x", json!({"a/b": {"c~d": "yes"}}));
        assert!(deny("{args: {/a~1b/c~0d: 'yes'}}", &slash));
    }

    #[test]
    fn a_folder_that_may_hold_a_denied_path_is_denied_too() {
        let deny = |rule: &str, c: &Call| matches(rule, "always_deny", c);
        let folder = |d: &[&str]| call("search_files", json!({})).paths(d).dirs(d);
        for (glob, held_by) in [
            ("secrets/**", vec!["", "secrets", "Secrets", "secrets/deep"]),
            ("**/*.key", vec!["", "src", "a/b/c"]),
            ("keys/*.pem", vec!["", "keys"]),
            ("a/*/secret.txt", vec!["", "a", "a/x"]),
            ("{a,b/c}/x", vec!["", "b", "zzz"]),
        ] {
            let rule = format!("{{path: {glob:?}}}");
            for dir in held_by {
                assert!(
                    deny(&rule, &folder(&[dir])),
                    "{glob} holds for folder {dir:?}"
                );
            }
        }
        for (glob, apart) in [
            ("secrets/**", vec!["src", "secretsx", "docs/secrets"]),
            ("keys/*.pem", vec!["keys/sub", "other"]),
            ("a/*/secret.txt", vec!["a/x/y", "b"]),
        ] {
            let rule = format!("{{path: {glob:?}}}");
            for dir in apart {
                assert!(
                    !deny(&rule, &folder(&[dir])),
                    "{glob} does not hold for folder {dir:?}"
                );
            }
        }
        // A file named like the folder is not in it; a file inside what a rule names is
        // (as in .gitignore); an allow never comes from a folder.
        let file = call("read_file", json!({})).paths(&["secrets"]);
        assert!(!deny("{path: 'secrets/**'}", &file));
        let inside = call("read_file", json!({})).paths(&["secrets/sub/key"]);
        assert!(deny("{path: secrets}", &inside));
        assert!(deny("{path: 'secrets/*'}", &inside));
        assert!(!matches("{path: secrets}", "always_allow", &inside));
        // Folders fold case as files do.
        let upper = |d: &[&str]| call("search_files", json!({})).paths(d).dirs(d);
        assert!(deny("{path: 'Secret/Sub/**'}", &upper(&["SECRET/sub"])));
    }

    #[test]
    fn paths_any_for_deny_every_for_allow() {
        let rule = "{path: 'secrets/**'}";
        let mixed = call("read_file", json!({})).paths(&["src/a.rs", "secrets/key"]);
        assert!(deny(rule, &mixed), "one forbidden path is enough to deny");
        assert!(matches(rule, "ask_user", &mixed));
        assert!(!allow(rule, &mixed), "one path outside blocks the allow");
        let inside = call("read_file", json!({})).paths(&["secrets/a", "secrets/b/c"]);
        assert!(allow(rule, &inside));
        let none = call("read_file", json!({}));
        assert!(!deny(rule, &none), "no paths, no match");
        assert!(!allow(rule, &none), "no paths, no allow");
        assert!(
            !deny("{path: '*.rs'}", &none.paths(&["src/a.rs"])),
            "* stops at /"
        );
        let c = call("x", json!({})).paths(&["Secrets/KEY"]);
        assert!(deny(rule, &c), "deny globs ignore case");
        assert!(!allow(rule, &c), "allow globs do not");
        assert!(deny("{path: [docs/**, 'secrets/**']}", &c));
    }

    #[test]
    fn hosts_exact_and_subdomains() {
        let on = |hosts: &[&str]| call("fetch", json!({})).hosts(hosts);
        assert!(deny("{url_host: example.com}", &on(&["example.com"])));
        assert!(deny("{url_host: Example.COM.}", &on(&["example.com"])));
        assert!(deny("{url_host: example.com}", &on(&["EXAMPLE.com."])));
        assert!(!deny("{url_host: example.com}", &on(&["api.example.com"])));
        let sub = "{url_host: '*.example.com'}";
        assert!(deny(sub, &on(&["api.example.com"])));
        assert!(deny(sub, &on(&["a.b.example.com"])));
        assert!(!deny(sub, &on(&["example.com"])), "not the bare domain");
        assert!(!deny(sub, &on(&["evilexample.com"])));
        assert!(!deny(sub, &on(&[])));
        assert!(deny(
            "{url_host: [a.test, '*.example.com']}",
            &on(&["a.test"])
        ));
        assert!(deny("{url_host: '[::1]'}", &on(&["[::1]"])));
        assert!(deny(
            "{url_host: 'bücher.example'}",
            &on(&["xn--bcher-kva.example"])
        ));
        let both = on(&["api.example.com", "evil.test"]);
        assert!(deny(sub, &both));
        assert!(!allow(sub, &both), "one host outside blocks the allow");
        assert!(allow(sub, &on(&["api.example.com", "www.example.com"])));
    }

    #[test]
    fn url_hosts_are_what_a_client_would_reach() {
        let host = |v: &str| url_host(v);
        assert_eq!(
            host("http://good.example@evil.test/").as_deref(),
            Some("evil.test")
        );
        assert_eq!(
            host("HTTP://EXAMPLE.COM./x").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            host("https://bücher.example/").as_deref(),
            Some("xn--bcher-kva.example")
        );
        assert_eq!(host("http://[::1]:8080/").as_deref(), Some("[::1]"));
        assert_eq!(host("http://0x7f.1/").as_deref(), Some("127.0.0.1"));
        assert_eq!(host("evil.test/x").as_deref(), Some("evil.test"));
        assert_eq!(
            host("ssh://Git@Host.Example/r").as_deref(),
            Some("host.example")
        );
        assert_eq!(host("http://[oops/"), None);
        assert_eq!(host("mailto:a@b.example"), None);
    }

    #[test]
    fn only_an_explicit_empty_list_is_no_rules() {
        for text in [
            "rules: []\n",
            "# none yet\nrules: []\n",
            "rules: [] # none\n",
        ] {
            let set = RuleSet::parse(text).unwrap();
            assert!(set.is_empty(), "{text:?}");
            assert_eq!(set.len(), 0);
        }
        // What a file cut short, caught half-written or emptied looks like: an error (the
        // last good rules stay), never "no rules".
        for text in [
            "",
            " ",
            "\n\n",
            "# nothing yet\n",
            "rules:\n",
            "rules: ~\n",
            "rules: null\n",
            "{}\n",
            "---\n",
            "rules:\n  - name: no-sudo\n    match: { tool: run_shell }\n",
            "rules:\n  - name: no-sudo\n    match: { tool: run_sh",
        ] {
            assert!(RuleSet::parse(text).is_err(), "{text:?} must not parse");
        }
        let text = problems("");
        assert!(text.contains("write `rules: []`"), "{text}");
    }

    #[test]
    fn an_empty_match_matches_every_call() {
        assert!(deny("{}", &call("anything", json!({}))));
        let set = RuleSet::parse("rules:\n  - action: ask_user\n").unwrap();
        assert_eq!(set.rules().next().unwrap().matches, "every call");
    }

    #[test]
    fn every_problem_names_its_place() {
        let text = problems(
            r#"
rules:
  - name: no-sudo
    match:
      args: { command: "(unclosed" }
      tool: ""
    action: always_deny
  - name: bad action
    match: { tool: x }
    action: maybe
  - name: no-sudo
    match: { tool: y }
    action: ask_user
  - name: wide open
    action: always_allow
  - name: stray
    match: { tool: x, colour: red }
    action: always_deny
  - name: typo
    match: { tool: x }
    acton: always_deny
  - match: { path: ["[", "/abs/**"], url_host: ["*.*.x", "a:1"], arg_pattern: "(a{1000}){1000}" }
    action: always_deny
  - name: "bad/name"
    match: { agent: 3 }
  - name: sneaky
    match: { tool: download_pdf, arg_pattern: "^https://docs\\." }
    action: always_allow
"#,
        );
        for needle in [
            "permissions.yaml has ",
            "rules[0] (no-sudo).match.args.command: invalid regex: unclosed group\n",
            "rules[0] (no-sudo).match.tool[0]: empty",
            "rules[1] (bad action).action: \"maybe\" is not an action; one of always_deny, ask_user or always_allow",
            "rules[2] (no-sudo): the name is already used",
            "rules[3] (wide open).match: always_allow with an empty match would wave through every call",
            "rules[8] (sneaky).match.arg_pattern: always_allow cannot use arg_pattern",
            "rules[4] (stray).match: unknown field `colour`",
            "rules[5] (typo): unknown field `acton`",
            "rules[6].match.path[0]: error parsing glob",
            "rules[6].match.path[1]: \"/abs/**\": paths are relative",
            "rules[6].match.url_host[0]",
            "rules[6].match.url_host[1]: \"a:1\": a host name only",
            "rules[6].match.arg_pattern: the regex compiles to more than 1048576 bytes",
            "rules[7] (bad/name).name: a rule name is",
            "rules[7] (bad/name).action: missing",
            "rules[7] (bad/name).match.agent: invalid type: integer `3`, expected a string or a list of strings",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
        }
    }

    #[test]
    fn structural_problems_name_their_place() {
        assert!(problems("rule: []\n").contains("top level: unknown field `rule`"));
        assert!(problems("rules: {}\n").contains("rules: invalid type: map"));
        assert!(
            problems("- a\n").contains("top level: invalid type: sequence, expected a mapping")
        );
        assert!(
            problems("rules:\n  - match: {tool: '['}\n    action: always_deny\n")
                .contains("rules[0].match.tool[0]: error parsing glob '['")
        );
        assert!(problems("rules: [x]\n").contains("rules[0]: invalid type: string \"x\""));
        let syntax = problems("rules:\n  - name: a\n   action: ask_user\n");
        assert!(
            syntax.contains("not valid YAML") && syntax.contains("line 3"),
            "{syntax}"
        );
    }

    #[test]
    fn denies_outright_only_for_identity_rules() {
        let set = RuleSet::parse(
            r#"
rules:
  - name: no-shell-for-interns
    match: { tool: run_shell, team: interns }
    action: always_deny
  - name: no-rm
    match: { tool: run_shell, arg_pattern: "rm" }
    action: always_deny
  - name: no-secrets
    match: { path: "secrets/**" }
    action: always_deny
  - name: no-evil
    match: { url_host: evil.test }
    action: always_deny
  - name: ask-fetch
    match: { tool: fetch }
    action: ask_user
"#,
        )
        .unwrap();
        let outright = |tool, team| set.denies_outright(tool, "a", team).map(|v| v.rule);
        assert_eq!(
            outright("run_shell", Some("interns")),
            Some("no-shell-for-interns")
        );
        assert_eq!(outright("run_shell", Some("core")), None);
        assert_eq!(outright("read_file", Some("interns")), None);
        assert_eq!(outright("fetch", None), None, "an ask is not a denial");
    }

    #[test]
    fn summaries_are_in_file_order() {
        let set = RuleSet::parse(MIXED).unwrap();
        let summaries: Vec<_> = set
            .rules()
            .map(|s| (s.position, s.name, s.action))
            .collect();
        assert_eq!(
            summaries,
            [
                (1, "allow-shell", Action::AlwaysAllow),
                (2, "ask-shell", Action::AskUser),
                (3, "deny-rm", Action::AlwaysDeny),
                (4, "deny-shell", Action::AlwaysDeny),
            ]
        );
        let set = RuleSet::parse(
            "rules:\n  - match: {tool: [a, b], agent: c, path: 'x/**', args: {n: '1'}}\n    action: always_allow\n",
        )
        .unwrap();
        assert_eq!(
            set.rules().next().unwrap().matches,
            "tool in {a, b} and agent in {c} and args n matches /1/ and every path in {x/**}"
        );
    }

    #[test]
    fn actions_round_trip() {
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(a));
            assert_eq!(serde_json::to_value(a).unwrap(), json!(a.as_str()));
        }
        assert_eq!(Action::parse("deny"), None);
    }

    #[test]
    fn rule_names() {
        assert!(is_rule_name("no-sudo: v2.1 final_"));
        assert!(!is_rule_name(""));
        assert!(!is_rule_name("rule #1"));
        assert!(!is_rule_name(&"a".repeat(65)));
    }
}
