//! How a program reads its argv: which arguments are options, which option takes the next
//! argument as its value, where its options end (`--`, as each program defines it), and what
//! each operand and value is — a path, text the program never opens (a pattern, a format, a
//! number), or a script in its own language.
//!
//! `run_command` judges what this finds: options by name against the entry's `flags`, paths
//! against the roots, scripts by what they do (`commands.rs`, `scripts.rs`). The reading is
//! only as good as what Aether knows of the program, so it is careful wherever it does not
//! know:
//!
//! - A program without a reading here is read **carefully** throughout: every argument that
//!   starts with `-` is an option wherever it stands, `--` included (whether `--` ends the
//!   options depends on whether the option before it takes a value, which only the program
//!   knows), and every other argument is a path.
//! - A known program is read as it reads itself (GNU `getopt_long` with permutation —
//!   `POSIXLY_CORRECT` is never in a command's environment —, `find`'s leading options,
//!   starting points and expression, `git`'s global options, subcommand and `--` before
//!   pathspecs) until an option it does not know, or an abbreviation of one: from there on it
//!   is read carefully.
//! - Text (a pattern, a format) is only ever an option's value the table names, or the
//!   first operand of a program that takes its pattern there (grep, rg, git grep) when no
//!   option gave one and nothing was read carefully; everything else that is not an option
//!   is a path.
//! - A program whose first operand is a script (sed, awk) needs its script found for
//!   certain: a careful reading, or an option that gives a script after the first operand
//!   (`sed p -e 'w x'`: GNU sed permutes, so `p` is a file there; a sed that does not takes
//!   `p` for the script), leaves the script unknown, and the call is refused.
//!
//! Architecture invariant: a table entry that says an option takes no value must be right
//! (a wrong one lets the next argument through unread); `tests/it/shell.rs` checks every
//! entry against the programs installed where the tests run.

use std::borrow::Cow;

/// What a value or an operand is to the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A file or folder name (or a URL): judged against the roots.
    Path,
    /// Text the program never opens: a pattern, a format, a number, a separator.
    Text,
    /// A script in the program's language.
    Script(Language),
}

/// The script languages Aether reads (`scripts.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Sed,
    Awk,
}

/// What one argument is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// An option, or a cluster of short ones: its names as an entry's `flags` list them
    /// (`["-q", "-n"]` for `-qn5`, `["--format"]` for `--format=%H`), and the kind of a value
    /// glued to it, if one is.
    Option {
        names: Vec<String>,
        glued: Option<Kind>,
    },
    /// The value of the option before it.
    Value(Kind),
    /// The `--` after which the program reads only operands.
    End,
    /// An operand.
    Operand(Kind),
}

/// A whole argv as the program reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading {
    /// One role per argument.
    pub roles: Vec<Role>,
    /// From which argument on the reading was careful, and why.
    pub careful_from: Option<(usize, String)>,
    /// Why the program's script cannot be found for certain, for a program that takes one.
    pub script_unknown: Option<String>,
}

impl Reading {
    /// Whether the argument at `at` was read carefully.
    pub fn careful_at(&self, at: usize) -> bool {
        self.careful_from
            .as_ref()
            .is_some_and(|(from, _)| at >= *from)
    }
}

/// How an option takes its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// None.
    No,
    /// Glued to it (`-n5`, `--lines=5`) or the next argument.
    Required,
    /// Only glued to it (`-i.bak`, `--color=never`): never the next argument.
    Glued,
}

/// A program's options, as `getopt_long` (or git's parse-options) reads them.
struct Spec {
    /// Short options (letters) without a value, with one, and with one only glued.
    flags: &'static str,
    valued: &'static str,
    glued: &'static str,
    /// `-NUM` is an option (grep's context, head's count, git log's count).
    numbers: bool,
    /// Long options and their arity.
    long: &'static [(&'static str, Arity)],
    /// The kind of an option's value, by any of its names; a value not listed is a path.
    values: &'static [(&'static str, Kind)],
    /// The first operand, when no option in `gives_first` was given: a pattern or a script.
    first: Option<Kind>,
    gives_first: &'static [&'static str],
    /// Whether the first operand may come after `--` (grep: yes; git grep: no).
    first_after_end: bool,
    /// Whether options may follow operands; if not, the first operand ends the options and
    /// the rest is read carefully.
    permutes: bool,
}

const fn spec() -> Spec {
    Spec {
        flags: "",
        valued: "",
        glued: "",
        numbers: false,
        long: &[],
        values: &[],
        first: None,
        gives_first: &[],
        first_after_end: true,
        permutes: true,
    }
}

use Arity::{Glued as G, No as N, Required as R};
use Kind::Text as T;

const HELP: [(&str, Arity); 2] = [("--help", N), ("--version", N)];

static GREP: Spec = Spec {
    flags: "EFGPiywxzsvVbnHhoqaIrRLlcTZU",
    valued: "efmdDABC",
    numbers: true,
    long: &[
        ("--extended-regexp", N),
        ("--fixed-strings", N),
        ("--basic-regexp", N),
        ("--perl-regexp", N),
        ("--regexp", R),
        ("--file", R),
        ("--ignore-case", N),
        ("--no-ignore-case", N),
        ("--word-regexp", N),
        ("--line-regexp", N),
        ("--null-data", N),
        ("--no-messages", N),
        ("--invert-match", N),
        ("--max-count", R),
        ("--byte-offset", N),
        ("--line-number", N),
        ("--line-buffered", N),
        ("--with-filename", N),
        ("--no-filename", N),
        ("--label", R),
        ("--only-matching", N),
        ("--quiet", N),
        ("--silent", N),
        ("--binary-files", R),
        ("--text", N),
        ("--directories", R),
        ("--devices", R),
        ("--recursive", N),
        ("--dereference-recursive", N),
        ("--include", R),
        ("--exclude", R),
        ("--exclude-from", R),
        ("--exclude-dir", R),
        ("--files-without-match", N),
        ("--files-with-matches", N),
        ("--count", N),
        ("--initial-tab", N),
        ("--null", N),
        ("--before-context", R),
        ("--after-context", R),
        ("--context", R),
        ("--group-separator", R),
        ("--no-group-separator", N),
        ("--color", G),
        ("--colour", G),
        ("--binary", N),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-e", T),
        ("--regexp", T),
        ("-m", T),
        ("--max-count", T),
        ("--label", T),
        ("--binary-files", T),
        ("-d", T),
        ("--directories", T),
        ("-D", T),
        ("--devices", T),
        ("--include", T),
        ("--exclude", T),
        ("--exclude-dir", T),
        ("-A", T),
        ("-B", T),
        ("-C", T),
        ("--before-context", T),
        ("--after-context", T),
        ("--context", T),
        ("--group-separator", T),
        ("--color", T),
        ("--colour", T),
    ],
    first: Some(T),
    gives_first: &["-e", "--regexp", "-f", "--file"],
    ..spec()
};

static RG: Spec = Spec {
    flags: "abcFHhiIlLnNopPqsSuUvVwxz0",
    valued: "ABCEefgjMmrtTd",
    long: &[
        ("--after-context", R),
        ("--before-context", R),
        ("--context", R),
        ("--color", R),
        ("--colors", R),
        ("--context-separator", R),
        ("--dfa-size-limit", R),
        ("--encoding", R),
        ("--engine", R),
        ("--file", R),
        ("--field-context-separator", R),
        ("--field-match-separator", R),
        ("--glob", R),
        ("--iglob", R),
        ("--hostname-bin", R),
        ("--hyperlink-format", R),
        ("--ignore-file", R),
        ("--max-columns", R),
        ("--max-count", R),
        ("--max-depth", R),
        ("--max-filesize", R),
        ("--path-separator", R),
        ("--pre", R),
        ("--pre-glob", R),
        ("--regex-size-limit", R),
        ("--regexp", R),
        ("--replace", R),
        ("--sort", R),
        ("--sortr", R),
        ("--threads", R),
        ("--type", R),
        ("--type-not", R),
        ("--type-add", R),
        ("--type-clear", R),
        ("--case-sensitive", N),
        ("--column", N),
        ("--count", N),
        ("--count-matches", N),
        ("--files", N),
        ("--files-with-matches", N),
        ("--files-without-match", N),
        ("--fixed-strings", N),
        ("--follow", N),
        ("--heading", N),
        ("--no-heading", N),
        ("--hidden", N),
        ("--ignore-case", N),
        ("--invert-match", N),
        ("--json", N),
        ("--line-number", N),
        ("--no-line-number", N),
        ("--line-regexp", N),
        ("--multiline", N),
        ("--no-filename", N),
        ("--with-filename", N),
        ("--no-ignore", N),
        ("--no-ignore-vcs", N),
        ("--no-messages", N),
        ("--null", N),
        ("--only-matching", N),
        ("--quiet", N),
        ("--smart-case", N),
        ("--stats", N),
        ("--text", N),
        ("--trim", N),
        ("--type-list", N),
        ("--vimgrep", N),
        ("--word-regexp", N),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-e", T),
        ("--regexp", T),
        ("-A", T),
        ("-B", T),
        ("-C", T),
        ("--after-context", T),
        ("--before-context", T),
        ("--context", T),
        ("--color", T),
        ("--colors", T),
        ("--context-separator", T),
        ("--dfa-size-limit", T),
        ("-E", T),
        ("--encoding", T),
        ("--engine", T),
        ("--field-context-separator", T),
        ("--field-match-separator", T),
        ("-g", T),
        ("--glob", T),
        ("--iglob", T),
        ("--hyperlink-format", T),
        ("-j", T),
        ("--threads", T),
        ("-M", T),
        ("--max-columns", T),
        ("-m", T),
        ("--max-count", T),
        ("-d", T),
        ("--max-depth", T),
        ("--max-filesize", T),
        ("--path-separator", T),
        ("--regex-size-limit", T),
        ("-r", T),
        ("--replace", T),
        ("--sort", T),
        ("--sortr", T),
        ("-t", T),
        ("--type", T),
        ("-T", T),
        ("--type-not", T),
        ("--type-add", T),
        ("--type-clear", T),
    ],
    first: Some(T),
    gives_first: &["-e", "--regexp", "-f", "--file", "--files", "--type-list"],
    ..spec()
};

static SED: Spec = Spec {
    flags: "nrEsuzb",
    valued: "efl",
    glued: "i",
    long: &[
        ("--quiet", N),
        ("--silent", N),
        ("--debug", N),
        ("--expression", R),
        ("--file", R),
        ("--follow-symlinks", N),
        ("--in-place", G),
        ("--line-length", R),
        ("--posix", N),
        ("--regexp-extended", N),
        ("--separate", N),
        ("--sandbox", N),
        ("--unbuffered", N),
        ("--null-data", N),
        ("--zero-terminated", N),
        ("--binary", N),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-e", Kind::Script(Language::Sed)),
        ("--expression", Kind::Script(Language::Sed)),
        ("-l", T),
        ("--line-length", T),
        ("-i", T),
        ("--in-place", T),
    ],
    first: Some(Kind::Script(Language::Sed)),
    gives_first: &["-e", "--expression", "-f", "--file"],
    ..spec()
};

/// gawk, mawk, the one true awk and busybox's: their options together. All stop at the
/// program (the first operand).
static AWK: Spec = Spec {
    flags: "bcCghkMnNOPrsStVYI",
    valued: "FfvWeEil",
    glued: "dDLop",
    long: &[
        ("--field-separator", R),
        ("--file", R),
        ("--assign", R),
        ("--source", R),
        ("--exec", R),
        ("--include", R),
        ("--load", R),
        ("--characters-as-bytes", N),
        ("--traditional", N),
        ("--copyright", N),
        ("--dump-variables", G),
        ("--debug", G),
        ("--gen-pot", N),
        ("--csv", N),
        ("--lint", G),
        ("--bignum", N),
        ("--non-decimal-data", N),
        ("--use-lc-numeric", N),
        ("--optimize", N),
        ("--no-optimize", N),
        ("--pretty-print", G),
        ("--profile", G),
        ("--posix", N),
        ("--re-interval", N),
        ("--sandbox", N),
        ("--lint-old", N),
        ("--trace", N),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-F", T),
        ("--field-separator", T),
        ("-v", T),
        ("--assign", T),
        ("-e", Kind::Script(Language::Awk)),
        ("--source", Kind::Script(Language::Awk)),
        ("--lint", T),
        ("-L", T),
    ],
    first: Some(Kind::Script(Language::Awk)),
    gives_first: &[
        "-f",
        "--file",
        "-e",
        "--source",
        "-E",
        "--exec",
        "-i",
        "--include",
    ],
    permutes: false,
    ..spec()
};

static HEAD: Spec = Spec {
    flags: "qvz",
    valued: "cn",
    numbers: true,
    long: &[
        ("--bytes", R),
        ("--lines", R),
        ("--quiet", N),
        ("--silent", N),
        ("--verbose", N),
        ("--zero-terminated", N),
        HELP[0],
        HELP[1],
    ],
    values: &[("-c", T), ("-n", T), ("--bytes", T), ("--lines", T)],
    ..spec()
};

static TAIL: Spec = Spec {
    flags: "fFqvz",
    valued: "cns",
    numbers: true,
    long: &[
        ("--bytes", R),
        ("--lines", R),
        ("--follow", G),
        ("--retry", N),
        ("--pid", R),
        ("--quiet", N),
        ("--silent", N),
        ("--sleep-interval", R),
        ("--verbose", N),
        ("--zero-terminated", N),
        ("--max-unchanged-stats", R),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-c", T),
        ("-n", T),
        ("-s", T),
        ("--bytes", T),
        ("--lines", T),
        ("--follow", T),
        ("--pid", T),
        ("--sleep-interval", T),
        ("--max-unchanged-stats", T),
    ],
    ..spec()
};

static CAT: Spec = Spec {
    flags: "AbeEnstTuv",
    long: &[
        ("--show-all", N),
        ("--number-nonblank", N),
        ("--show-ends", N),
        ("--number", N),
        ("--squeeze-blank", N),
        ("--show-tabs", N),
        ("--show-nonprinting", N),
        HELP[0],
        HELP[1],
    ],
    ..spec()
};

static WC: Spec = Spec {
    flags: "cmlLw",
    long: &[
        ("--bytes", N),
        ("--chars", N),
        ("--lines", N),
        ("--max-line-length", N),
        ("--words", N),
        ("--files0-from", R),
        HELP[0],
        HELP[1],
    ],
    ..spec()
};

static LS: Spec = Spec {
    flags: "aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1",
    valued: "ITw",
    long: &[
        ("--all", N),
        ("--almost-all", N),
        ("--author", N),
        ("--escape", N),
        ("--block-size", R),
        ("--ignore-backups", N),
        ("--color", G),
        ("--directory", N),
        ("--dired", N),
        ("--classify", G),
        ("--file-type", N),
        ("--format", R),
        ("--full-time", N),
        ("--group-directories-first", N),
        ("--no-group", N),
        ("--human-readable", N),
        ("--si", N),
        ("--dereference-command-line", N),
        ("--dereference-command-line-symlink-to-dir", N),
        ("--hide", R),
        ("--hyperlink", G),
        ("--indicator-style", R),
        ("--inode", N),
        ("--ignore", R),
        ("--kibibytes", N),
        ("--dereference", N),
        ("--numeric-uid-gid", N),
        ("--literal", N),
        ("--hide-control-chars", N),
        ("--show-control-chars", N),
        ("--quote-name", N),
        ("--quoting-style", R),
        ("--reverse", N),
        ("--recursive", N),
        ("--size", N),
        ("--sort", R),
        ("--time", R),
        ("--time-style", R),
        ("--tabsize", R),
        ("--width", R),
        ("--context", N),
        ("--zero", N),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-I", T),
        ("-T", T),
        ("-w", T),
        ("--block-size", T),
        ("--color", T),
        ("--classify", T),
        ("--format", T),
        ("--hide", T),
        ("--hyperlink", T),
        ("--indicator-style", T),
        ("--ignore", T),
        ("--quoting-style", T),
        ("--sort", T),
        ("--time", T),
        ("--time-style", T),
        ("--tabsize", T),
        ("--width", T),
    ],
    ..spec()
};

static SORT: Spec = Spec {
    flags: "bdfgiMhnRrVcCmsuz",
    valued: "kotST",
    long: &[
        ("--ignore-leading-blanks", N),
        ("--dictionary-order", N),
        ("--ignore-case", N),
        ("--general-numeric-sort", N),
        ("--ignore-nonprinting", N),
        ("--month-sort", N),
        ("--human-numeric-sort", N),
        ("--numeric-sort", N),
        ("--random-sort", N),
        ("--random-source", R),
        ("--reverse", N),
        ("--sort", R),
        ("--version-sort", N),
        ("--batch-size", R),
        ("--check", G),
        ("--compress-program", R),
        ("--debug", N),
        ("--files0-from", R),
        ("--key", R),
        ("--merge", N),
        ("--output", R),
        ("--stable", N),
        ("--buffer-size", R),
        ("--field-separator", R),
        ("--temporary-directory", R),
        ("--parallel", R),
        ("--unique", N),
        ("--zero-terminated", N),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-k", T),
        ("--key", T),
        ("-t", T),
        ("--field-separator", T),
        ("-S", T),
        ("--buffer-size", T),
        ("--sort", T),
        ("--batch-size", T),
        ("--parallel", T),
        ("--check", T),
    ],
    ..spec()
};

static UNIQ: Spec = Spec {
    flags: "cdDiuz",
    valued: "fsw",
    long: &[
        ("--count", N),
        ("--repeated", N),
        ("--all-repeated", G),
        ("--skip-fields", R),
        ("--group", G),
        ("--ignore-case", N),
        ("--skip-chars", R),
        ("--unique", N),
        ("--zero-terminated", N),
        ("--check-chars", R),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-f", T),
        ("-s", T),
        ("-w", T),
        ("--all-repeated", T),
        ("--skip-fields", T),
        ("--group", T),
        ("--skip-chars", T),
        ("--check-chars", T),
    ],
    ..spec()
};

static CUT: Spec = Spec {
    flags: "nsz",
    valued: "bcdf",
    long: &[
        ("--bytes", R),
        ("--characters", R),
        ("--delimiter", R),
        ("--fields", R),
        ("--complement", N),
        ("--only-delimited", N),
        ("--output-delimiter", R),
        ("--zero-terminated", N),
        HELP[0],
        HELP[1],
    ],
    values: &[
        ("-b", T),
        ("-c", T),
        ("-d", T),
        ("-f", T),
        ("--bytes", T),
        ("--characters", T),
        ("--delimiter", T),
        ("--fields", T),
        ("--output-delimiter", T),
    ],
    ..spec()
};

// git: the options every subcommand below shares with `git log` (revisions and diffs), then
// one table per subcommand. Checked against git 2.4x by `tests/it/shell.rs`.

const GIT_LOG_LONG: &[(&str, Arity)] = &[
    ("--oneline", N),
    ("--format", G),
    ("--pretty", G),
    ("--abbrev-commit", N),
    ("--no-abbrev-commit", N),
    ("--abbrev", G),
    ("--decorate", G),
    ("--no-decorate", N),
    ("--author", R),
    ("--committer", R),
    ("--grep", R),
    ("--since", R),
    ("--after", R),
    ("--until", R),
    ("--before", R),
    ("--max-count", R),
    ("--skip", R),
    ("--date", R),
    ("--all", N),
    ("--branches", G),
    ("--tags", G),
    ("--remotes", G),
    ("--first-parent", N),
    ("--merges", N),
    ("--no-merges", N),
    ("--reverse", N),
    ("--date-order", N),
    ("--author-date-order", N),
    ("--topo-order", N),
    ("--graph", N),
    ("--follow", N),
    ("--stat", G),
    ("--shortstat", N),
    ("--numstat", N),
    ("--summary", N),
    ("--name-only", N),
    ("--name-status", N),
    ("--patch", N),
    ("--no-patch", N),
    ("--raw", N),
    ("--color", G),
    ("--no-color", N),
    ("--word-diff", G),
    ("--ignore-all-space", N),
    ("--ignore-space-change", N),
    ("--ignore-blank-lines", N),
    ("--no-renames", N),
    ("--find-renames", G),
    ("--relative", G),
    ("--full-index", N),
    ("--binary", N),
    ("--text", N),
    ("--minimal", N),
    ("--patience", N),
    ("--histogram", N),
    ("--no-ext-diff", N),
    ("--no-textconv", N),
    ("--cached", N),
    ("--staged", N),
    ("--quiet", N),
    ("--exit-code", N),
    ("--check", N),
    ("--name-status", N),
    ("--diff-filter", R),
    ("--src-prefix", R),
    ("--dst-prefix", R),
    ("--no-prefix", N),
    HELP[0],
];

const GIT_LOG_VALUES: &[(&str, Kind)] = &[
    ("-n", T),
    ("--max-count", T),
    ("--skip", T),
    ("-S", T),
    ("-G", T),
    ("--author", T),
    ("--committer", T),
    ("--grep", T),
    ("--since", T),
    ("--after", T),
    ("--until", T),
    ("--before", T),
    ("--date", T),
    ("--format", T),
    ("--pretty", T),
    ("--diff-filter", T),
    ("--src-prefix", T),
    ("--dst-prefix", T),
];

/// `log`, `show`, `diff`, `whatchanged`.
static GIT_LOG: Spec = Spec {
    flags: "puszwbaRmriEFPDWg",
    valued: "nSGLOl",
    glued: "UMCB",
    numbers: true,
    long: GIT_LOG_LONG,
    values: GIT_LOG_VALUES,
    ..spec()
};

static GIT_STATUS: Spec = Spec {
    flags: "sbvz",
    glued: "uM",
    long: &[
        ("--short", N),
        ("--branch", N),
        ("--show-stash", N),
        ("--porcelain", G),
        ("--long", N),
        ("--verbose", N),
        ("--untracked-files", G),
        ("--ignore-submodules", G),
        ("--ignored", G),
        ("--no-renames", N),
        ("--renames", N),
        ("--find-renames", G),
        ("--ahead-behind", N),
        ("--no-ahead-behind", N),
        ("--column", G),
        ("--no-column", N),
        HELP[0],
    ],
    ..spec()
};

static GIT_GREP: Spec = Spec {
    flags: "aiIwvhHEGPFnlLOzcoqWrp",
    valued: "efmABC",
    numbers: true,
    long: &[
        ("--cached", N),
        ("--no-index", N),
        ("--untracked", N),
        ("--text", N),
        ("--ignore-case", N),
        ("--word-regexp", N),
        ("--invert-match", N),
        ("--full-name", N),
        ("--extended-regexp", N),
        ("--basic-regexp", N),
        ("--perl-regexp", N),
        ("--fixed-strings", N),
        ("--line-number", N),
        ("--column", N),
        ("--files-with-matches", N),
        ("--name-only", N),
        ("--files-without-match", N),
        ("--null", N),
        ("--only-matching", N),
        ("--count", N),
        ("--quiet", N),
        ("--break", N),
        ("--heading", N),
        ("--show-function", N),
        ("--function-context", N),
        ("--recursive", N),
        ("--max-depth", R),
        ("--max-count", R),
        ("--after-context", R),
        ("--before-context", R),
        ("--context", R),
        ("--threads", R),
        ("--and", N),
        ("--or", N),
        ("--not", N),
        ("--all-match", N),
        ("--color", G),
        ("--no-color", N),
        HELP[0],
    ],
    values: &[
        ("-e", T),
        ("-m", T),
        ("-A", T),
        ("-B", T),
        ("-C", T),
        ("--max-depth", T),
        ("--max-count", T),
        ("--after-context", T),
        ("--before-context", T),
        ("--context", T),
        ("--threads", T),
    ],
    first: Some(T),
    gives_first: &["-e", "-f"],
    first_after_end: false,
    ..spec()
};

static GIT_LS_FILES: Spec = Spec {
    flags: "cdomsuktvfzi",
    valued: "xX",
    long: &[
        ("--cached", N),
        ("--deleted", N),
        ("--modified", N),
        ("--others", N),
        ("--ignored", N),
        ("--stage", N),
        ("--unmerged", N),
        ("--killed", N),
        ("--directory", N),
        ("--no-empty-directory", N),
        ("--eol", N),
        ("--full-name", N),
        ("--recurse-submodules", N),
        ("--error-unmatch", N),
        ("--exclude", R),
        ("--exclude-from", R),
        ("--exclude-per-directory", R),
        ("--exclude-standard", N),
        ("--abbrev", G),
        ("--debug", N),
        ("--deduplicate", N),
        ("--format", R),
        HELP[0],
    ],
    values: &[
        ("-x", T),
        ("--exclude", T),
        ("--exclude-per-directory", T),
        ("--format", T),
    ],
    ..spec()
};

/// git's global options (before the subcommand). Those with values are all refused by
/// name (`-C`, `-c`, `--git-dir`, …); they are read here so that their values are.
static GIT_GLOBAL: Spec = Spec {
    flags: "pPhv",
    valued: "Cc",
    long: &[
        ("--paginate", N),
        ("--no-pager", N),
        ("--no-replace-objects", N),
        ("--no-lazy-fetch", N),
        ("--no-optional-locks", N),
        ("--no-advice", N),
        ("--bare", N),
        ("--literal-pathspecs", N),
        ("--glob-pathspecs", N),
        ("--noglob-pathspecs", N),
        ("--icase-pathspecs", N),
        ("--git-dir", R),
        ("--work-tree", R),
        ("--namespace", R),
        ("--super-prefix", R),
        ("--config-env", R),
        ("--attr-source", R),
        ("--exec-path", G),
        ("--html-path", N),
        ("--man-path", N),
        ("--info-path", N),
        HELP[0],
        HELP[1],
    ],
    ..spec()
};

fn git_subcommand(name: &str) -> Option<&'static Spec> {
    match name {
        "log" | "show" | "diff" | "whatchanged" => Some(&GIT_LOG),
        "status" => Some(&GIT_STATUS),
        "grep" => Some(&GIT_GREP),
        "ls-files" => Some(&GIT_LS_FILES),
        _ => None,
    }
}

/// The reading for a program (by the name `commands::program_name` gives), if Aether has
/// one.
fn known(program: &str) -> Option<&'static Spec> {
    Some(match program {
        "grep" | "egrep" | "fgrep" => &GREP,
        "rg" => &RG,
        "sed" | "gsed" => &SED,
        "awk" | "gawk" | "mawk" | "nawk" => &AWK,
        "head" => &HEAD,
        "tail" => &TAIL,
        "cat" => &CAT,
        "wc" => &WC,
        "ls" => &LS,
        "sort" => &SORT,
        "uniq" => &UNIQ,
        "cut" => &CUT,
        _ => return None,
    })
}

/// Every option Aether's tables know for `program` (and for git, `git SUBCOMMAND`), with its
/// arity: for tests that hold the tables to the programs themselves.
pub fn known_options(program: &str) -> Vec<(String, Arity)> {
    let spec = match program.strip_prefix("git ") {
        Some(sub) => git_subcommand(sub),
        None if program == "git" => Some(&GIT_GLOBAL),
        None => known(program),
    };
    let Some(spec) = spec else {
        return Vec::new();
    };
    let short = |letters: &str, arity| {
        letters
            .chars()
            .map(move |c| (format!("-{c}"), arity))
            .collect::<Vec<_>>()
    };
    let mut out = short(spec.flags, Arity::No);
    out.extend(short(spec.valued, Arity::Required));
    out.extend(short(spec.glued, Arity::Glued));
    out.extend(spec.long.iter().map(|(name, a)| (name.to_string(), *a)));
    out
}

/// Reads `args` (everything after the executable) as `program` reads them.
pub fn read(program: &str, args: &[String]) -> Reading {
    let mut reader = Reader {
        args,
        roles: Vec::with_capacity(args.len()),
        careful_from: None,
        script_unknown: None,
    };
    match program {
        "find" => reader.find(),
        "git" => reader.git(),
        _ => match known(program) {
            Some(spec) => reader.getopt(spec, 0),
            None => reader.careful(
                0,
                format!("Aether has no reading of {program}'s options"),
                program,
            ),
        },
    }
    reader.finish()
}

struct Reader<'a> {
    args: &'a [String],
    roles: Vec<Role>,
    careful_from: Option<(usize, String)>,
    script_unknown: Option<String>,
}

/// What reading one option word found.
enum Word {
    /// An option (names), with a glued value's kind, and whether it takes the next word.
    Option(Vec<String>, Option<Kind>, Option<Kind>),
    /// An option this table does not know (or an abbreviation).
    Unknown(String),
}

impl<'a> Reader<'a> {
    fn finish(mut self) -> Reading {
        self.roles.truncate(self.args.len());
        Reading {
            roles: self.roles,
            careful_from: self.careful_from,
            script_unknown: self.script_unknown,
        }
    }

    /// Reads from `from` on the careful way: options wherever a `-` starts them, `--`
    /// included; everything else a path. tar's first argument without a dash is a bundle
    /// of options (`tar tIf PROG x.tar`).
    fn careful(&mut self, from: usize, why: String, program: &str) {
        self.roles.truncate(from);
        if self.careful_from.is_none() {
            self.careful_from = Some((from, why));
        }
        let tar = matches!(program, "tar" | "gtar" | "bsdtar");
        for (at, arg) in self.args.iter().enumerate().skip(from) {
            let old_style = tar && at == 0 && !arg.is_empty() && !arg.starts_with('-');
            let role = if old_style {
                Role::Option {
                    names: vec![format!("-{arg}")],
                    glued: None,
                }
            } else if arg == "--" {
                Role::Option {
                    names: vec!["--".into()],
                    glued: None,
                }
            } else if arg.starts_with('-') && arg.len() > 1 {
                Role::Option {
                    names: vec![option_name(arg).to_string()],
                    glued: None,
                }
            } else {
                Role::Operand(Kind::Path)
            };
            self.roles.push(role);
        }
    }

    /// One option word (`-abc`, `-n5`, `--name`, `--name=value`) by `spec`.
    fn option(spec: &Spec, arg: &str) -> Word {
        let value_kind = |name: &str| {
            spec.values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, k)| *k)
                .unwrap_or(Kind::Path)
        };
        if let Some(long) = arg.strip_prefix("--") {
            let (name, glued) = match long.split_once('=') {
                Some((name, _)) => (format!("--{name}"), true),
                None => (arg.to_string(), false),
            };
            let Some((_, arity)) = spec.long.iter().find(|(n, _)| *n == name) else {
                return Word::Unknown(name);
            };
            let kind = value_kind(&name);
            return match (arity, glued) {
                (Arity::Required, false) => Word::Option(vec![name], None, Some(kind)),
                (_, true) => Word::Option(vec![name], Some(kind), None),
                (_, false) => Word::Option(vec![name], None, None),
            };
        }
        let letters = &arg[1..];
        if spec.numbers && letters.chars().all(|c| c.is_ascii_digit()) {
            return Word::Option(vec![arg.to_string()], None, None);
        }
        let mut names = Vec::new();
        for (i, c) in letters.char_indices() {
            let name = format!("-{c}");
            let rest = &letters[i + c.len_utf8()..];
            if spec.flags.contains(c) && c.is_ascii_alphanumeric() {
                names.push(name);
                continue;
            }
            if (spec.valued.contains(c) || spec.glued.contains(c)) && c.is_ascii_alphanumeric() {
                let kind = value_kind(&name);
                names.push(name);
                return match (rest.is_empty(), spec.valued.contains(c)) {
                    (false, _) => Word::Option(names, Some(kind), None),
                    (true, true) => Word::Option(names, None, Some(kind)),
                    (true, false) => Word::Option(names, None, None),
                };
            }
            return Word::Unknown(name);
        }
        Word::Option(names, None, None)
    }

    /// GNU getopt_long's reading (with permutation unless `spec` says otherwise) from `from`.
    fn getopt(&mut self, spec: &Spec, from: usize) {
        let program = "";
        let mut at = from;
        let mut ended = false;
        let mut first: Option<usize> = None;
        let mut given_at: Option<usize> = None;
        while at < self.args.len() {
            let arg = &self.args[at];
            let option_word = !ended && arg.starts_with('-') && arg.len() > 1;
            if !ended && arg == "--" {
                self.roles.push(Role::End);
                ended = true;
                at += 1;
                continue;
            }
            if !option_word {
                if first.is_none() && (!ended || spec.first_after_end) {
                    first = Some(at);
                }
                self.roles.push(Role::Operand(Kind::Path));
                at += 1;
                if !spec.permutes && !ended && at < self.args.len() {
                    // The program reads no option after its first operand: what follows is
                    // read carefully (as options and as paths both, where it could be either).
                    self.careful(
                        at,
                        "arguments after the program's first operand".into(),
                        program,
                    );
                    break;
                }
                continue;
            }
            match Self::option(spec, arg) {
                Word::Unknown(name) => {
                    self.careful(
                        at,
                        format!("Aether does not know the option {name}"),
                        program,
                    );
                    break;
                }
                Word::Option(names, glued, next) => {
                    if given_at.is_none()
                        && names.iter().any(|n| spec.gives_first.contains(&n.as_str()))
                    {
                        given_at = Some(at);
                    }
                    self.roles.push(Role::Option { names, glued });
                    at += 1;
                    if let Some(kind) = next
                        && at < self.args.len()
                    {
                        self.roles.push(Role::Value(kind));
                        at += 1;
                    }
                }
            }
        }
        // Scripts and patterns: the first operand is one only when the reading leaves no
        // doubt, and no option gave one.
        let Some(kind) = spec.first else { return };
        if let Kind::Script(_) = kind {
            self.script_unknown = self.script_doubt(spec, first, given_at);
            if self.script_unknown.is_none()
                && given_at.is_none()
                && let Some(f) = first
            {
                self.roles[f] = Role::Operand(kind);
            }
        } else if self.careful_from.is_none()
            && given_at.is_none()
            && let Some(f) = first
        {
            self.roles[f] = Role::Operand(kind);
        }
    }

    /// Why a script program's script cannot be found for certain, if it cannot.
    fn script_doubt(
        &self,
        spec: &Spec,
        first: Option<usize>,
        given_at: Option<usize>,
    ) -> Option<String> {
        if let Some((from, why)) = &self.careful_from {
            if given_at.is_none() && first.is_none_or(|f| *from <= f) {
                return Some(format!("the script cannot be found for certain: {why}"));
            }
            // Where options are read after operands, or an argument there looks like one, an
            // option read carefully may give more script (or make the first operand a file).
            let option_after = self.args[*from..]
                .iter()
                .any(|a| a.starts_with('-') && a.len() > 1);
            if spec.permutes || option_after {
                return Some(format!(
                    "{} cannot be read for certain ({why}), and could give a script",
                    bounded(&self.args[*from])
                ));
            }
        }
        match (first, given_at) {
            (Some(f), Some(g)) if g > f => Some(
                "an option that gives a script comes after the first operand, which some \
                 implementations take for the script: put the options first"
                    .into(),
            ),
            (None, None) => Some("no script is given".into()),
            _ => None,
        }
    }

    /// find: leading options (`-H`, `-L`, `-P`, `-D opts`, `-O3`, then `--`), starting
    /// points (up to the first argument that starts with `-`, or is `(`, `)`, `!` or `,`),
    /// then the expression: primaries (options to the allowlist), their values, operators.
    fn find(&mut self) {
        let args = self.args;
        let mut at = 0;
        while at < args.len() {
            match args[at].as_str() {
                "-H" | "-L" | "-P" => self.roles.push(Role::Option {
                    names: vec![args[at].clone()],
                    glued: None,
                }),
                "-D" => {
                    self.roles.push(Role::Option {
                        names: vec!["-D".into()],
                        glued: None,
                    });
                    if at + 1 < args.len() {
                        self.roles.push(Role::Value(Kind::Text));
                        at += 1;
                    }
                }
                o if o.starts_with("-O") && o[2..].chars().all(|c| c.is_ascii_digit()) => {
                    self.roles.push(Role::Option {
                        names: vec!["-O".into()],
                        glued: Some(Kind::Text),
                    })
                }
                "--" => {
                    self.roles.push(Role::End);
                    at += 1;
                    break;
                }
                _ => break,
            }
            at += 1;
        }
        let expression =
            |a: &str| (a.starts_with('-') && a.len() > 1) || matches!(a, "(" | ")" | "!" | ",");
        while at < args.len() && !expression(&args[at]) {
            self.roles.push(Role::Operand(Kind::Path));
            at += 1;
        }
        while at < args.len() {
            let arg = args[at].as_str();
            if matches!(arg, "(" | ")" | "!" | ",") {
                self.roles.push(Role::Operand(Kind::Text));
                at += 1;
                continue;
            }
            if !arg.starts_with('-') || arg.len() < 2 {
                self.careful(
                    at,
                    format!("{arg:?} is not a primary find knows where one is expected"),
                    "find",
                );
                return;
            }
            let values: &[Kind] = match arg {
                "-print"
                | "-print0"
                | "-ls"
                | "-prune"
                | "-quit"
                | "-true"
                | "-false"
                | "-empty"
                | "-executable"
                | "-readable"
                | "-writable"
                | "-nouser"
                | "-nogroup"
                | "-depth"
                | "-d"
                | "-mount"
                | "-xdev"
                | "-noleaf"
                | "-follow"
                | "-ignore_readdir_race"
                | "-noignore_readdir_race"
                | "-daystart"
                | "-warn"
                | "-nowarn"
                | "-not"
                | "-and"
                | "-or"
                | "-a"
                | "-o"
                | "-help"
                | "--help"
                | "-version"
                | "--version" => &[],
                "-name" | "-iname" | "-path" | "-ipath" | "-wholename" | "-iwholename"
                | "-regex" | "-iregex" | "-lname" | "-ilname" | "-type" | "-xtype" | "-size"
                | "-perm" | "-user" | "-group" | "-uid" | "-gid" | "-mtime" | "-mmin"
                | "-atime" | "-amin" | "-ctime" | "-cmin" | "-used" | "-links" | "-inum"
                | "-maxdepth" | "-mindepth" | "-fstype" | "-printf" | "-regextype" | "-context" => {
                    &[Kind::Text]
                }
                "-newer" | "-anewer" | "-cnewer" | "-samefile" | "-files0-from" | "-fprint"
                | "-fprint0" | "-fls" => &[Kind::Path],
                "-fprintf" => &[Kind::Path, Kind::Text],
                newer if newer.starts_with("-newer") && newer.len() == 8 => {
                    // -newerXY: Y = t takes a date, else a file.
                    if newer.ends_with('t') {
                        &[Kind::Text]
                    } else {
                        &[Kind::Path]
                    }
                }
                other => {
                    self.careful(at, format!("Aether does not know find's {other}"), "find");
                    return;
                }
            };
            self.roles.push(Role::Option {
                names: vec![arg.to_string()],
                glued: None,
            });
            at += 1;
            for kind in values {
                if at < args.len() {
                    self.roles.push(Role::Value(*kind));
                    at += 1;
                }
            }
        }
    }

    /// git: global options, the subcommand, then its own reading (GNU-like: options anywhere
    /// before `--`, pathspecs after it).
    fn git(&mut self) {
        let args = self.args;
        let mut at = 0;
        while at < args.len() && args[at].starts_with('-') {
            match Self::option(&GIT_GLOBAL, &args[at]) {
                Word::Unknown(name) => {
                    return self.careful(at, format!("Aether does not know git's {name}"), "git");
                }
                Word::Option(names, glued, next) => {
                    self.roles.push(Role::Option { names, glued });
                    at += 1;
                    if let Some(kind) = next
                        && at < args.len()
                    {
                        self.roles.push(Role::Value(kind));
                        at += 1;
                    }
                }
            }
        }
        let Some(sub) = args.get(at) else { return };
        self.roles.push(Role::Operand(Kind::Text));
        match git_subcommand(sub) {
            Some(spec) => self.getopt(spec, at + 1),
            None => self.careful(
                at + 1,
                format!("Aether has no reading of git {sub}'s options"),
                "git",
            ),
        }
    }
}

/// The option's name as judged: `--format=%H` is `--format`.
pub fn option_name(arg: &str) -> &str {
    arg.split_once('=').map(|(name, _)| name).unwrap_or(arg)
}

/// `arg` with a cap on its length, for messages.
pub fn bounded(arg: &str) -> Cow<'_, str> {
    const MAX: usize = 120;
    if arg.chars().count() <= MAX {
        Cow::Borrowed(arg)
    } else {
        let head: String = arg.chars().take(MAX).collect();
        Cow::Owned(format!("{head}… ({} characters)", arg.chars().count()))
    }
}

/// The value glued to an option word read as `names` (`--expression=p` → `p`, `-nep` with
/// names `-n`, `-e` → `p`).
pub fn glued_value<'a>(arg: &'a str, names: &[String]) -> &'a str {
    if arg.starts_with("--") {
        return arg.split_once('=').map(|(_, v)| v).unwrap_or("");
    }
    // Each name of a short cluster is one ASCII letter (anything else reads carefully).
    arg.get(1 + names.len()..).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reading as one letter group per argument: `o` option (`o=t` with a text glued,
    /// `o=s` a script), `v:p`/`v:t`/`v:s` a value, `e` the end of options, `p`/`t`/`s` an
    /// operand; `~` marks where the careful reading starts.
    fn show(program: &str, argv: &[&str]) -> String {
        let args: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let r = read(program, &args);
        let kind = |k: &Kind| match k {
            Kind::Path => "p",
            Kind::Text => "t",
            Kind::Script(_) => "s",
        };
        r.roles
            .iter()
            .enumerate()
            .map(|(at, role)| {
                let mark = if r.careful_from.as_ref().is_some_and(|(f, _)| *f == at) {
                    "~"
                } else {
                    ""
                };
                let text = match role {
                    Role::Option { glued: None, .. } => "o".to_string(),
                    Role::Option { glued: Some(k), .. } => format!("o={}", kind(k)),
                    Role::Value(k) => format!("v:{}", kind(k)),
                    Role::End => "e".into(),
                    Role::Operand(k) => kind(k).into(),
                };
                format!("{mark}{text}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn each_program_is_read_as_it_reads_itself() {
        let cases: &[(&str, &[&str], &str)] = &[
            // grep: the pattern is text unless -e/-f gave one; files are paths.
            ("grep", &["-rn", "x", "src"], "o t p"),
            ("grep", &["x", "-i", "f"], "t o p"),
            ("grep", &["-e", "x", "f"], "o v:t p"),
            ("grep", &["f1", "-e", "x", "f2"], "p o v:t p"),
            ("grep", &["-f", "pats", "f"], "o v:p p"),
            ("grep", &["-e", "--", "-r", "."], "o v:t o p"),
            ("grep", &["--", "-r", "."], "e t p"),
            ("grep", &["-C2", "--context=3", "-5", "x"], "o=t o=t o t"),
            ("grep", &["--include", "*.rs", "x"], "o v:t t"),
            ("grep", &["--exclude-from", "ex", "x"], "o v:p t"),
            // An option the table lacks, or an abbreviation: careful from there, no text.
            ("grep", &["--frob", "x", "f"], "~o p p"),
            ("grep", &["x", "--reg", "y"], "p ~o p"),
            ("grep", &["-Q", "x"], "~o p"),
            // sed: the script is the first operand unless -e/-f gave one.
            ("sed", &["-n", "p", "f"], "o s p"),
            ("sed", &["-e", "p", "f"], "o v:s p"),
            ("sed", &["--expression=p", "f"], "o=s p"),
            ("sed", &["-nep", "f"], "o=s p"),
            ("sed", &["-i.bak", "p", "f"], "o=t s p"),
            ("sed", &["-i", "p", "f"], "o s p"),
            ("sed", &["--", "p", "-x"], "e s p"),
            // awk stops at its program: the rest is read carefully.
            ("awk", &["-F", ":", "{print}", "f"], "o v:t s ~p"),
            ("gawk", &["-e", "{print}", "f"], "o v:s p"),
            ("mawk", &["--", "{print}", "-x"], "e s p"),
            ("awk", &["{print}", "-v", "x=1"], "p ~o p"),
            // find: leading options, starting points, the expression.
            (
                "find",
                &["-L", ".", "src", "-name", "*.rs", "-newer", "f", "-print"],
                "o p p o v:t o v:p o",
            ),
            (
                "find",
                &["--", ".", "(", "-perm", "/222", ")"],
                "e p t o v:t t",
            ),
            ("find", &[".", "-frob", "x"], "p ~o p"),
            ("find", &["-D", "tree", "-O3", "."], "o v:t o=t p"),
            (
                "find",
                &[".", "-newermt", "2024-01-01", "-newerma", "f"],
                "p o v:t o v:p",
            ),
            // git: global options, the subcommand, its options, pathspecs.
            (
                "git",
                &["log", "--oneline", "-n", "5", "--", "-x"],
                "t o o v:t e p",
            ),
            (
                "git",
                &["--no-pager", "log", "--author", "--", "-p"],
                "o t o v:t o",
            ),
            ("git", &["log", "--format", "--", "-p"], "t o e p"),
            (
                "git",
                &["log", "--format=%H", "-S", "x", "main"],
                "t o=t o v:t p",
            ),
            ("git", &["-C", "..", "log"], "o v:p t"),
            ("git", &["grep", "-n", "pat", "--", "src"], "t o t e p"),
            ("git", &["grep", "-e", "pat", "HEAD"], "t o v:t p"),
            ("git", &["grep", "--", "pat"], "t e p"),
            ("git", &["blame", "--", "-x"], "t ~o o"),
            ("git", &["--frob", "log"], "~o p"),
            // Programs Aether does not know: careful throughout.
            ("echo", &["--", "-n", "x"], "~o o p"),
            ("cargo", &["test", "--", "--nocapture"], "~p o o"),
            ("tar", &["tIf", "x", "y"], "~o p p"),
            // head, sort, ls: values whole, glued or not.
            ("head", &["-n", "-5", "--", "-v"], "o v:t e p"),
            ("head", &["-qn5", "f"], "o=t p"),
            (
                "sort",
                &["-o", "out", "-k2", "-t", ",", "in"],
                "o v:p o=t o v:t p",
            ),
            (
                "ls",
                &["-la", "-I", "*.o", "--color=never", "."],
                "o o v:t o=t p",
            ),
        ];
        for (program, argv, want) in cases {
            assert_eq!(show(program, argv), *want, "{program} {argv:?}");
        }
    }

    #[test]
    fn a_script_programs_script_is_found_for_certain_or_not_at_all() {
        let unknown = |program: &str, argv: &[&str]| {
            let args: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            read(program, &args).script_unknown
        };
        for (program, argv) in [
            ("sed", &["p", "f"][..]),
            ("sed", &["-n", "-e", "p", "f"]),
            ("sed", &["--", "p"]),
            ("awk", &["{print}", "f", "x=1"]),
            ("gawk", &["-v", "x=1", "{print}"]),
        ] {
            assert_eq!(unknown(program, argv), None, "{program} {argv:?}");
        }
        for (program, argv, why) in [
            ("sed", &[][..], "no script"),
            ("sed", &["-n"], "no script"),
            ("sed", &["p", "-e", "w x"], "put the options first"),
            ("sed", &["--frob", "p"], "cannot be found"),
            ("sed", &["p", "--frob", "-e", "w x"], "could give a script"),
            ("sed", &["-s", "p", "--exp=w x"], "could give a script"),
            ("awk", &["{print}", "-e", "x"], "could give a script"),
            ("awk", &["-Q", "{print}"], "cannot be found"),
        ] {
            let got = unknown(program, argv).unwrap_or_else(|| panic!("{program} {argv:?}: found"));
            assert!(got.contains(why), "{program} {argv:?}: {got}");
        }
    }
}
