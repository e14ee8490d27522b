//! The scripts some programs take as an argument — a `sed` script, an `awk` program — read the
//! way the program reads them, and what in them runs a program, writes a file or reads one.
//!
//! `run_command` refuses a call whose script does any of these (`commands.rs`); `run_shell`'s
//! review asks a person about one that runs a program or writes a file (`shell.rs`). Both read
//! a script they cannot read with certainty as the worst case: it is refused, or asked about.
//!
//! | program | runs a program | writes a file | reads a file named in the script |
//! |---|---|---|---|
//! | `sed` | `e`, `s///e` | `w`, `W`, `s///w` | `r`, `R` |
//! | `awk` | `system(…)`, `print \| "cmd"`, `"cmd" \| getline`, `\|&` | `print > f`, `printf >> f` | `getline < f` |
//!
//! and for `awk` also `@load`, `@include` and gawk's indirect calls (`@f()`, which can call
//! `system`), refused as a class by their `@`.
//!
//! The `sed` reading is GNU sed's (4.9): commands separated by `;` or newlines, addresses
//! (`N`, `$`, `first~step`, `/re/I`, `\%re%`, `addr,+N`), `!`, blocks, comments, labels,
//! `a`/`i`/`c` text to the end of the line, `s` and `y` with any delimiter, the flags of `s`
//! (spaces allowed among them, `w` taking the rest of the line). A command letter it does not
//! know, characters after a command, a block left open, an unclosed `s`, or a delimiter
//! inside a bracket expression (`s/[/]/x/`: GNU sed reads the bracket, other seds end the
//! regex there) make the script unreadable.
//!
//! The `awk` reading is a tokenizer: strings, comments, and a `/` read as a regex only where
//! awk's grammar expects an operand (after an operator, `(`, `,`, `;`, a newline, `{`, `}`,
//! `print`, `return`, the `)` of an `if`/`while`/`for` head, …), else as division. A `/`
//! inside a bracket expression of a regex, a string or comment starting right after a
//! division, or a character awk has no use for make the program unreadable. Redirection is
//! told from comparison as awk tells it: a `>` at the top level of a `print`/`printf`
//! statement redirects (`print a > "f"`), one inside parentheses compares (`print (a > b)`).
//! `print … > "/dev/stdout"` and `"/dev/stderr"` (a literal, ending the statement) are not
//! writes.
//!
//! Known limits: this reads one dialect each (GNU sed; the awk grammar common to gawk, mawk
//! and the one true awk); a script that another implementation reads differently in a way
//! none of the rules above catch is not seen. The text judged is the text given: a script in
//! a file (`sed -f`, `awk -f`) is not read (those options are refused by `run_command`).

/// What a script does that the caller may not be allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Runs a program.
    Runs,
    /// Writes (or creates) a file.
    Writes,
    /// Reads a file it names.
    Reads,
}

/// One thing found in a script: what it does, the construct that does it, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub effect: Effect,
    /// The construct, as the refusal names it (`"e"`, `"s///w"`, `"system"`).
    pub construct: &'static str,
    /// Character offset in the script.
    pub at: usize,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.effect {
            Effect::Runs => "runs a program",
            Effect::Writes => "writes a file",
            Effect::Reads => "reads a file it names",
        };
        write!(f, "`{}` (at character {}) {what}", self.construct, self.at)
    }
}

/// Why a script could not be read with certainty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    pub at: usize,
    pub why: &'static str,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot be read with certainty at character {}: {}",
            self.at, self.why
        )
    }
}

/// The script's text as a refusal may quote it: at most 80 characters.
pub fn shown(script: &str) -> String {
    const MAX: usize = 80;
    if script.chars().count() <= MAX {
        format!("{script:?}")
    } else {
        let head: String = script.chars().take(MAX).collect();
        format!("{head:?}… ({} characters)", script.chars().count())
    }
}

// ---------------------------------------------------------------------------------------
// sed

/// Everything in a sed script that runs a program, writes a file or reads one, in order; or
/// why it cannot be read.
pub fn sed(script: &str) -> Result<Vec<Finding>, Unreadable> {
    SedReader {
        c: script.chars().collect(),
        i: 0,
        found: Vec::new(),
    }
    .read()
}

struct SedReader {
    c: Vec<char>,
    i: usize,
    found: Vec<Finding>,
}

impl SedReader {
    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    fn bad(&self, why: &'static str) -> Unreadable {
        Unreadable { at: self.i, why }
    }

    fn find(&mut self, effect: Effect, construct: &'static str, at: usize) {
        self.found.push(Finding {
            effect,
            construct,
            at,
        });
    }

    fn blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r')) {
            self.i += 1;
        }
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == '\n' {
                break;
            }
        }
    }

    fn read(mut self) -> Result<Vec<Finding>, Unreadable> {
        let mut depth = 0usize;
        loop {
            while matches!(self.peek(), Some(c) if c == ';' || c.is_whitespace()) {
                self.i += 1;
            }
            let Some(first) = self.peek() else { break };
            if first == '#' {
                self.skip_line();
                continue;
            }
            if self.address()? {
                self.blanks();
                if self.peek() == Some(',') {
                    self.i += 1;
                    self.blanks();
                    if matches!(self.peek(), Some('+' | '~')) {
                        self.i += 1;
                    }
                    if !self.address()? {
                        return Err(self.bad("a range without its second address"));
                    }
                }
            }
            self.blanks();
            if self.peek() == Some('!') {
                self.i += 1;
                self.blanks();
            }
            let at = self.i;
            let Some(cmd) = self.peek() else {
                return Err(self.bad("an address without a command"));
            };
            self.i += 1;
            match cmd {
                '{' => {
                    depth += 1;
                    continue;
                }
                '}' => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| self.bad("a `}` that closes no block"))?;
                }
                '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z'
                | 'F' => {}
                'l' | 'L' | 'q' | 'Q' => {
                    self.blanks();
                    while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
                        self.i += 1;
                    }
                }
                ':' | 'b' | 't' | 'T' | 'v' => {
                    self.blanks();
                    // A label ends at `;` or a blank (GNU sed 4.9).
                    while matches!(self.peek(), Some(c) if c != ';' && !c.is_whitespace()) {
                        self.i += 1;
                    }
                }
                'a' | 'i' | 'c' => {
                    self.text();
                    continue;
                }
                'e' => {
                    self.find(Effect::Runs, "e", at);
                    self.skip_line();
                    continue;
                }
                'w' | 'W' => {
                    self.find(Effect::Writes, if cmd == 'w' { "w" } else { "W" }, at);
                    self.skip_line();
                    continue;
                }
                'r' | 'R' => {
                    self.find(Effect::Reads, if cmd == 'r' { "r" } else { "R" }, at);
                    self.skip_line();
                    continue;
                }
                's' => {
                    let d = self.delimiter()?;
                    self.part(d, true)?;
                    self.part(d, false)?;
                    if self.flags(at)? {
                        continue;
                    }
                }
                'y' => {
                    let d = self.delimiter()?;
                    self.part(d, false)?;
                    self.part(d, false)?;
                }
                _ => {
                    return Err(Unreadable {
                        at,
                        why: "a command sed does not have (or Aether does not know)",
                    });
                }
            }
            self.end_of_command()?;
        }
        if depth > 0 {
            return Err(self.bad("a `{` block is not closed"));
        }
        Ok(self.found)
    }

    /// An address, if one starts here.
    fn address(&mut self) -> Result<bool, Unreadable> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
                    self.i += 1;
                }
                if self.peek() == Some('~') {
                    self.i += 1;
                    while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
                        self.i += 1;
                    }
                }
                Ok(true)
            }
            Some('$') => {
                self.i += 1;
                Ok(true)
            }
            Some('/') => {
                self.i += 1;
                self.part('/', true)?;
                self.regex_flags();
                Ok(true)
            }
            Some('\\') => {
                self.i += 1;
                let d = self.delimiter()?;
                self.part(d, true)?;
                self.regex_flags();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn regex_flags(&mut self) {
        while matches!(self.peek(), Some('I' | 'M')) {
            self.i += 1;
        }
    }

    fn delimiter(&mut self) -> Result<char, Unreadable> {
        match self.peek() {
            Some(d) if d != '\n' && d != '\\' => {
                self.i += 1;
                Ok(d)
            }
            _ => Err(self.bad("a delimiter that is missing, a newline or a backslash")),
        }
    }

    /// A delimited part, from just after its opening delimiter to just after its closing
    /// one. In a regex, a bracket expression is read as POSIX reads it; the delimiter inside
    /// one is refused (seds disagree on where such a regex ends).
    fn part(&mut self, d: char, regex: bool) -> Result<(), Unreadable> {
        loop {
            let Some(c) = self.peek() else {
                return Err(self.bad("an unclosed regex or replacement"));
            };
            self.i += 1;
            if c == '\\' {
                if self.peek().is_none() {
                    return Err(self.bad("a backslash at the end of the script"));
                }
                self.i += 1;
            } else if c == d {
                return Ok(());
            } else if c == '\n' && regex {
                return Err(self.bad("a newline inside a regex"));
            } else if c == '[' && regex {
                self.bracket(d)?;
            }
        }
    }

    /// A bracket expression, from just after its `[` to just after its `]`.
    fn bracket(&mut self, d: char) -> Result<(), Unreadable> {
        let start = self.i;
        if self.peek() == Some('^') {
            self.i += 1;
        }
        if self.peek() == Some(']') {
            self.i += 1;
        }
        loop {
            let Some(c) = self.peek() else {
                return Err(Unreadable {
                    at: start,
                    why: "an unclosed bracket expression",
                });
            };
            self.i += 1;
            match c {
                ']' => return Ok(()),
                '[' if matches!(self.peek(), Some(':' | '.' | '=')) => {
                    let close = self.peek().unwrap_or(':');
                    self.i += 1;
                    while !(self.peek() == Some(close) && self.c.get(self.i + 1) == Some(&']')) {
                        match self.peek() {
                            None | Some('\n') => {
                                return Err(self.bad("an unclosed class in a bracket expression"));
                            }
                            Some(x) if x == d => {
                                return Err(self.bad("the delimiter inside a bracket expression"));
                            }
                            _ => self.i += 1,
                        }
                    }
                    self.i += 2;
                }
                '\n' => return Err(self.bad("a newline inside a bracket expression")),
                // Seds disagree: GNU sed reads the bracket whole, others end the regex here.
                x if x == d => return Err(self.bad("the delimiter inside a bracket expression")),
                // POSIX takes a backslash literally in a bracket, some seds as an escape:
                // followed by `]` the two readings end the bracket at different places.
                '\\' if self.peek() == Some(']') => {
                    return Err(self.bad("a backslash before `]` in a bracket expression"));
                }
                _ => {}
            }
        }
    }

    /// `s` flags; true when `w` took the rest of the line (the command is over).
    fn flags(&mut self, at: usize) -> Result<bool, Unreadable> {
        loop {
            match self.peek() {
                Some('g' | 'p' | 'i' | 'I' | 'm' | 'M' | ' ' | '\t' | '\r') => self.i += 1,
                Some(c) if c.is_ascii_digit() => self.i += 1,
                Some('e') => {
                    self.find(Effect::Runs, "s///e", at);
                    self.i += 1;
                }
                Some('w') => {
                    self.find(Effect::Writes, "s///w", at);
                    self.skip_line();
                    return Ok(true);
                }
                None | Some(';' | '\n' | '}' | '#') => return Ok(false),
                Some(_) => return Err(self.bad("a flag `s` does not have")),
            }
        }
    }

    /// `a`, `i`, `c` text: GNU's one-line form or `\` and lines, each line but the last
    /// ending in a backslash; up to an unescaped newline.
    fn text(&mut self) {
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                '\\' => self.i += 1,
                '\n' => return,
                _ => {}
            }
        }
    }

    fn end_of_command(&mut self) -> Result<(), Unreadable> {
        self.blanks();
        match self.peek() {
            None | Some(';' | '\n' | '}' | '#') => Ok(()),
            Some(_) => Err(self.bad("characters after a command")),
        }
    }
}

// ---------------------------------------------------------------------------------------
// awk

/// Everything in an awk program that runs a program, writes or reads a file, in order; or
/// why it cannot be read.
pub fn awk(program: &str) -> Result<Vec<Finding>, Unreadable> {
    let tokens = awk_tokens(program)?;
    let mut found = Vec::new();
    let mut depth = 0usize;
    // The depth a `print`/`printf` statement started at, while in one.
    let mut print: Option<usize> = None;
    for (n, t) in tokens.iter().enumerate() {
        let at = t.at;
        let mut push = |effect, construct| {
            found.push(Finding {
                effect,
                construct,
                at,
            })
        };
        match &t.kind {
            Tok::Ident(name) if name == "system" => push(Effect::Runs, "system"),
            Tok::Ident(name) if name == "print" || name == "printf" => print = Some(depth),
            Tok::Ident(name) if name == "getline" => {
                // `getline [var] < file`: a `<` before the expression around it ends.
                let mut d = 0usize;
                for next in &tokens[n + 1..] {
                    match &next.kind {
                        Tok::Op("(" | "[") => d += 1,
                        Tok::Op(")" | "]") if d == 0 => break,
                        Tok::Op(")" | "]") => d -= 1,
                        Tok::Op(";" | "{" | "}" | "&&" | "||" | ",") | Tok::Newline if d == 0 => {
                            break;
                        }
                        Tok::Op("<") if d == 0 => {
                            push(Effect::Reads, "getline <");
                            break;
                        }
                        _ => {}
                    }
                }
            }
            Tok::At => push(Effect::Runs, "@ (a directive or an indirect call)"),
            Tok::Op("|" | "|&") => push(Effect::Runs, "| (a pipe to or from a command)"),
            Tok::Op(op @ (">" | ">>")) if print == Some(depth) => {
                let to_terminal = matches!(
                    tokens.get(n + 1).map(|t| &t.kind),
                    Some(Tok::Str(s)) if s == "/dev/stdout" || s == "/dev/stderr"
                ) && matches!(
                    tokens.get(n + 2).map(|t| &t.kind),
                    None | Some(Tok::Newline | Tok::Op(";" | "}"))
                );
                if !to_terminal {
                    push(
                        Effect::Writes,
                        if *op == ">" { "print >" } else { "print >>" },
                    );
                }
            }
            Tok::Op("(" | "[" | "{") => depth += 1,
            Tok::Op(")" | "]" | "}") => {
                depth = depth.saturating_sub(1);
                if t.kind == Tok::Op("}") && print.is_some_and(|p| p > depth) {
                    print = None;
                }
            }
            Tok::Op(";") if print == Some(depth) => print = None,
            // A newline ends a statement unless the line ends in a token that continues it.
            Tok::Newline if print == Some(depth) => {
                let continued = match n.checked_sub(1).map(|p| &tokens[p].kind) {
                    Some(Tok::Op("," | "&&" | "||" | "{")) => true,
                    Some(Tok::Ident(k)) => k == "do" || k == "else",
                    _ => false,
                };
                if !continued {
                    print = None;
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Number,
    Str(String),
    Regex,
    Op(&'static str),
    Newline,
    At,
}

#[derive(Debug)]
struct Token {
    kind: Tok,
    at: usize,
}

const AWK_OPS: &[&str] = &[
    "**=", "||", "&&", "|&", ">>", ">=", "<=", "==", "!=", "!~", "++", "--", "+=", "-=", "*=",
    "/=", "%=", "^=", "**", "|", ">", "<", "+", "-", "*", "%", "^", "!", "~", "=", "?", ":", ",",
    ";", "{", "}", "(", ")", "[", "]", "$", "/",
];

fn awk_tokens(program: &str) -> Result<Vec<Token>, Unreadable> {
    let c: Vec<char> = program.chars().collect();
    let mut out: Vec<Token> = Vec::new();
    // For each open `(`: whether it opened an `if`/`while`/`for` head, after whose `)` a
    // statement (and so a regex) may start.
    let mut parens: Vec<bool> = Vec::new();
    let mut after_head = false;
    let mut i = 0;
    let bad = |at, why| Unreadable { at, why };
    while i < c.len() {
        let ch = c[i];
        let at = i;
        let prev_is_division = matches!(
            out.last(),
            Some(Token {
                kind: Tok::Op("/" | "/="),
                ..
            })
        );
        let head_closed = std::mem::take(&mut after_head);
        match ch {
            ' ' | '\t' | '\r' => {
                i += 1;
                after_head = head_closed;
                continue;
            }
            '\\' if c.get(i + 1) == Some(&'\n') => {
                i += 2;
                after_head = head_closed;
                continue;
            }
            '\\' if c.get(i + 1) == Some(&'\r') && c.get(i + 2) == Some(&'\n') => {
                i += 3;
                after_head = head_closed;
                continue;
            }
            '\n' => {
                out.push(Token {
                    kind: Tok::Newline,
                    at,
                });
                i += 1;
                after_head = head_closed;
                continue;
            }
            '#' => {
                if prev_is_division {
                    return Err(bad(at, "a comment right after a `/` read as division"));
                }
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
                after_head = head_closed;
                continue;
            }
            '"' => {
                if prev_is_division {
                    return Err(bad(at, "a string right after a `/` read as division"));
                }
                let (s, end) = awk_string(&c, at)?;
                i = end;
                out.push(Token {
                    kind: Tok::Str(s),
                    at,
                });
            }
            '/' if regex_may_start(out.last().map(|t| &t.kind), head_closed) => {
                i = awk_regex_end(&c, at)?;
                out.push(Token {
                    kind: Tok::Regex,
                    at,
                });
            }
            '@' => {
                out.push(Token { kind: Tok::At, at });
                i += 1;
            }
            c0 if c0.is_ascii_alphabetic() || c0 == '_' => {
                let mut name = String::new();
                while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                    name.push(c[i]);
                    i += 1;
                }
                out.push(Token {
                    kind: Tok::Ident(name),
                    at,
                });
            }
            c0 if c0.is_ascii_digit()
                || (c0 == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                i = awk_number_end(&c, at);
                out.push(Token {
                    kind: Tok::Number,
                    at,
                });
            }
            _ => {
                let rest: String = c[i..c.len().min(i + 3)].iter().collect();
                let Some(op) = AWK_OPS.iter().find(|op| rest.starts_with(**op)) else {
                    return Err(bad(at, "a character awk has no use for here"));
                };
                i += op.chars().count();
                match *op {
                    "(" => {
                        let head = matches!(
                            out.last().map(|t| &t.kind),
                            Some(Tok::Ident(k)) if k == "if" || k == "while" || k == "for"
                        );
                        parens.push(head);
                    }
                    ")" => after_head = parens.pop().unwrap_or(false),
                    _ => {}
                }
                out.push(Token {
                    kind: Tok::Op(op),
                    at,
                });
            }
        }
    }
    Ok(out)
}

/// Reads the string whose `"` is at `at`: its text (escapes kept as written) and where the
/// next token may start.
fn awk_string(c: &[char], at: usize) -> Result<(String, usize), Unreadable> {
    let mut s = String::new();
    let mut i = at + 1;
    loop {
        match c.get(i) {
            None | Some('\n') => {
                return Err(Unreadable {
                    at,
                    why: "an unclosed string",
                });
            }
            Some('"') => break,
            Some('\\') => {
                if let Some(&n) = c.get(i + 1) {
                    s.push('\\');
                    s.push(n);
                }
                i += 2;
            }
            Some(&x) => {
                s.push(x);
                i += 1;
            }
        }
    }
    Ok((s, i + 1))
}

/// Where the next token may start after the regex whose `/` is at `at`.
fn awk_regex_end(c: &[char], at: usize) -> Result<usize, Unreadable> {
    let mut i = at + 1;
    loop {
        match c.get(i) {
            None | Some('\n') => {
                return Err(Unreadable {
                    at,
                    why: "an unclosed regex",
                });
            }
            Some('/') => break,
            Some('\\') => i += 2,
            Some('[') => i = regex_bracket_end(c, i, at)?,
            Some(_) => i += 1,
        }
    }
    Ok(i + 1)
}

/// Where a regex goes on after the bracket whose `[` is at `open` (the regex's `/` is at
/// `at`). Awks disagree on a `/` inside a bracket; none is allowed.
fn regex_bracket_end(c: &[char], open: usize, at: usize) -> Result<usize, Unreadable> {
    let mut i = open + 1;
    if c.get(i) == Some(&'^') {
        i += 1;
    }
    if c.get(i) == Some(&']') {
        i += 1;
    }
    loop {
        match c.get(i) {
            None | Some('\n') => {
                return Err(Unreadable {
                    at,
                    why: "an unclosed bracket in a regex",
                });
            }
            Some('/') => {
                return Err(Unreadable {
                    at: i,
                    why: "a `/` inside a bracket in a regex",
                });
            }
            Some(']') => break,
            Some('[') if matches!(c.get(i + 1), Some(':' | '.' | '=')) => {
                i = bracket_class_end(c, i)?;
            }
            Some('\\') => i += 2,
            Some(_) => i += 1,
        }
    }
    Ok(i + 1)
}

/// Where a bracket goes on after the class (`[:alpha:]`, `[.x.]`, `[=e=]`) whose `[` is at
/// `open`, up to its own `:]`.
fn bracket_class_end(c: &[char], open: usize) -> Result<usize, Unreadable> {
    let close = c[open + 1];
    let mut i = open + 2;
    while !(c.get(i) == Some(&close) && c.get(i + 1) == Some(&']')) {
        match c.get(i) {
            None | Some('\n' | '/') => {
                return Err(Unreadable {
                    at: i,
                    why: "a class in a regex's bracket left open",
                });
            }
            _ => i += 1,
        }
    }
    Ok(i + 2)
}

/// Where the next token may start after the number starting at `at`.
fn awk_number_end(c: &[char], at: usize) -> usize {
    let mut i = at;
    while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
        // An exponent's sign: `1e-5`.
        if matches!(c[i], 'e' | 'E') && matches!(c.get(i + 1), Some('+' | '-')) {
            i += 1;
        }
        i += 1;
    }
    i
}

/// Whether a `/` after `prev` starts a regex: where awk's grammar expects an operand. Where
/// it expects an operator (after a name, a number, a string, `)`, `]`, `++`), it divides;
/// taking a regex for a division only reads more of the program as code.
fn regex_may_start(prev: Option<&Tok>, after_head: bool) -> bool {
    match prev {
        None | Some(Tok::Newline) => true,
        Some(Tok::Op(")")) => after_head,
        Some(Tok::Op(op)) => !matches!(*op, "]" | "++" | "--" | "$"),
        Some(Tok::Ident(k)) => matches!(
            k.as_str(),
            "print" | "printf" | "return" | "case" | "else" | "do" | "exit"
        ),
        Some(Tok::Number | Tok::Str(_) | Tok::Regex | Tok::At) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sed_effects(script: &str) -> Vec<&'static str> {
        sed(script)
            .unwrap_or_else(|e| panic!("{script:?}: {e}"))
            .into_iter()
            .map(|f| f.construct)
            .collect()
    }

    fn awk_effects(program: &str) -> Vec<&'static str> {
        awk(program)
            .unwrap_or_else(|e| panic!("{program:?}: {e}"))
            .into_iter()
            .map(|f| f.construct)
            .collect()
    }

    #[test]
    fn sed_commands_that_run_write_or_read_are_found_in_every_shape() {
        let cases: &[(&str, &[&str])] = &[
            ("e id", &["e"]),
            ("1e id", &["e"]),
            ("$!e id", &["e"]),
            ("1!  e id", &["e"]),
            ("/x/e id", &["e"]),
            ("/x/I,+3e id", &["e"]),
            ("\\%x%e id", &["e"]),
            ("0,/x/ e id", &["e"]),
            ("1~2e", &["e"]),
            ("p;e id", &["e"]),
            ("p\ne id", &["e"]),
            ("1{e id\n}", &["e"]),
            ("1{p;e id\n}", &["e"]),
            ("s/a/b/e", &["s///e"]),
            ("s/a/b/ge", &["s///e"]),
            ("s/a/b/ e", &["s///e"]),
            ("s/a/b/3e", &["s///e"]),
            ("s|a|b|e", &["s///e"]),
            ("s,a,b,e", &["s///e"]),
            ("sxaxbxe", &["s///e"]),
            ("s/a\\/b/c/e", &["s///e"]),
            ("s/[]]/x/e", &["s///e"]),
            ("s/[[:alpha:]]/x/e", &["s///e"]),
            ("s/a/b\\\nc/e", &["s///e"]),
            ("y/ab/cd/;e id", &["e"]),
            ("w /tmp/x", &["w"]),
            ("1w out", &["w"]),
            ("W /tmp/x", &["W"]),
            ("s/a/b/w /tmp/x", &["s///w"]),
            ("s/a/b/gw /tmp/x", &["s///w"]),
            ("s/a/b/ w /tmp/x", &["s///w"]),
            ("s/a/b/pw x", &["s///w"]),
            ("r /etc/passwd", &["r"]),
            ("1R /etc/passwd", &["R"]),
            ("$r x", &["r"]),
            ("# comment\nr x", &["r"]),
            ("b end; :end\ne id", &["e"]),
            ("1!{\n  s/a/b/e\n}", &["s///e"]),
            ("s/x/y/;s/a/b/e;w f", &["s///e", "w"]),
            // The text of `a` ends at its line: what follows on the next line is a command.
            ("a foo\ne id", &["e"]),
            ("a\\\nfoo\ne id", &["e"]),
            ("1i\\\n  one\\\n  two\nw f", &["w"]),
        ];
        for (script, want) in cases {
            assert_eq!(sed_effects(script), *want, "{script:?}");
        }
    }

    #[test]
    fn ordinary_sed_scripts_do_nothing_of_the_kind() {
        for script in [
            "p",
            "s/a/b/",
            "s/a/b/g",
            "s/a/b/gi2p",
            "s/hello/world/g;p",
            "s|/usr/bin|/opt|g",
            "1d",
            "$d",
            "/^#/d",
            "/start/,/end/p",
            "1~3p",
            "-n",
            "y/abc/xyz/",
            "a text with e and w and ; semicolons",
            "1i\\\nheader line",
            "c\\\nreplaced",
            ":a;N;$!ba;s/\\n/ /g",
            "/x/{p;q}",
            "/x/{\n  s/a/b/\n  p\n}",
            "s/e/w/",
            "s/w/e/g",
            "l;l 20;q;q 3;Q 1",
            "=;F;z;h;H;g;G;x;n;N;D;P",
            "# w comment\np",
            "s/a/\\n/g",
            "",
            "  ;  ",
        ] {
            if script == "-n" {
                // Not a script (an option): unreadable, never passed as one.
                assert!(sed(script).is_err());
                continue;
            }
            assert_eq!(sed_effects(script), Vec::<&str>::new(), "{script:?}");
        }
    }

    #[test]
    fn sed_scripts_that_cannot_be_read_with_certainty_are_unreadable() {
        for script in [
            "s/a/b",
            "s/a",
            "s/a/b/x",
            "s/a/b/ d",
            "k",
            "1",
            "1,",
            "{p",
            "p}",
            "1{p}p",
            "s/[/]/x/",
            "s/[/]x//",
            "s/x/[/]",
            "s|[|]|x|",
            "/[/]/p",
            "s/[[:alpha:/]/x/",
            "s/[\\]/x/]/",
            "s/a/b/\\",
            "/unclosed",
            "y/ab/c",
            "pp",
            "s\\a\\b\\",
            "s\na\nb\n",
        ] {
            assert!(sed(script).is_err(), "{script:?} was read");
        }
    }

    #[test]
    fn awk_programs_that_run_write_or_read_are_found_in_every_shape() {
        let cases: &[(&str, &[&str])] = &[
            ("BEGIN{system(\"id\")}", &["system"]),
            ("BEGIN { system (\"id\") }", &["system"]),
            ("{ x = system; }", &["system"]),
            ("{print | \"sh\"}", &["| (a pipe to or from a command)"]),
            ("{print |& \"sh\"}", &["| (a pipe to or from a command)"]),
            (
                "BEGIN{\"id\" | getline x}",
                &["| (a pipe to or from a command)"],
            ),
            (
                "BEGIN{c=\"sh\"; print \"id\" | c}",
                &["| (a pipe to or from a command)"],
            ),
            ("{print > \"out\"}", &["print >"]),
            ("{print >> \"out\"}", &["print >>"]),
            ("{print $1 > \"out\"}", &["print >"]),
            ("{print $1, $2 > $3}", &["print >"]),
            ("{printf \"%s\", $1 > \"out\"}", &["print >"]),
            ("{printf(\"%s\", $1) > \"out\"}", &["print >"]),
            ("{print a,\n b > \"out\"}", &["print >"]),
            ("{if (x) print > \"f\"; else print}", &["print >"]),
            ("{print > \"/dev/stderr\" \"x\"}", &["print >"]),
            ("{print > \"/dev/tcp/1.2.3.4/80\"}", &["print >"]),
            ("BEGIN{getline line < \"/etc/passwd\"}", &["getline <"]),
            ("BEGIN{while ((getline l < f) > 0) n++}", &["getline <"]),
            ("BEGIN{getline < \"x\"}", &["getline <"]),
            (
                "@load \"filefuncs\"",
                &["@ (a directive or an indirect call)"],
            ),
            (
                "@include \"x.awk\"",
                &["@ (a directive or an indirect call)"],
            ),
            (
                "BEGIN{f=\"system\"; @f(\"id\")}",
                &["@ (a directive or an indirect call)"],
            ),
            // A regex where awk reads one; after an `if (…)` a statement may be a regex.
            ("/x/ {system(\"id\")}", &["system"]),
            ("{ if (x) /a/; system(\"id\") }", &["system"]),
            // Division is read as code: a `/` after an operand.
            ("{ a = b / 2; system(\"id\"); c = d / 3 }", &["system"]),
            ("{ a = b[1] / 2 / system(\"id\") }", &["system"]),
            ("{ a = (b) / 2; system(\"id\") / 3 }", &["system"]),
        ];
        for (program, want) in cases {
            assert_eq!(awk_effects(program), *want, "{program:?}");
        }
    }

    #[test]
    fn ordinary_awk_programs_do_nothing_of_the_kind() {
        for program in [
            "{print $1}",
            "{ print $1, $NF }",
            "-F",
            "$3 > 100 {print}",
            "$3 > 100 { print $1 }",
            "{ if ($3 > 100) print $1 }",
            "{ print ($1 > 2) }",
            "{ print ($1 > $2 ? $1 : $2) }",
            "{ x[$1 > 2] = 1 }",
            "NR > 1 && $2 >= 3",
            "/error|warn/ {n++} END {print n}",
            "/a\\/b/",
            "BEGIN{FS=\",\"} {s += $2} END {print s / NR}",
            "{ a = b / c / d }",
            "{ n = length / 2 }",
            "{ print > \"/dev/stderr\" }",
            "{ print \"x\" > \"/dev/stdout\"; next }",
            "{ while ((getline line) > 0) n++ }",
            "{ getline; print }",
            "{ print a || b }",
            "function f(x) { return x * 2 } { print f($1) }",
            "{ gsub(/[[:space:]]+/, \" \"); print }",
            "{ printf \"%d\\n\", $1 }",
            "# system(\"id\") in a comment\n{print}",
            "{ print \"system | > <\" }",
            "{ sub(/^[ \\t]+/, \"\") }",
            "END { print NR }",
        ] {
            if program == "-F" {
                assert!(awk(program).is_ok());
                continue;
            }
            assert_eq!(awk_effects(program), Vec::<&str>::new(), "{program:?}");
        }
    }

    #[test]
    fn awk_programs_that_cannot_be_read_with_certainty_are_unreadable() {
        for program in [
            "{print \"unclosed}",
            "{print \"a\nb\"}",
            "/unclosed",
            "/[/]/ {print}",
            "/[[:alpha:]/]/ {print}",
            "{ a = b /\"/; system(\"id\") }",
            "{ a = b /# system(\"id\")\n}",
            "{ print `id` }",
            "{ print 'x' }",
        ] {
            assert!(awk(program).is_err(), "{program:?} was read");
        }
    }

    #[test]
    fn refusals_quote_a_bounded_script() {
        let long = "s/a/b/;".repeat(10_000);
        let s = shown(&long);
        assert!(s.len() < 200, "{s}");
        assert!(s.contains("70000 characters"), "{s}");
        assert_eq!(shown("p"), "\"p\"");
    }
}
