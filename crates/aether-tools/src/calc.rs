//! `calculate`: exact rational arithmetic over a whitelisted grammar, bounded in size and
//! time, with a hash receipt of the expression and its result.
//!
//! ```text
//! expr    := term (("+" | "-") term)*
//! term    := unary (("*" | "×" | "/" | "÷") unary)*
//! unary   := ("-" | "+" | "−") unary | power
//! power   := primary ("^" unary)?          (right-associative; the exponent an integer)
//! primary := number | "(" expr ")"
//! number  := digits ("." digits)?           (a decimal is exact: 0.1 is 1/10)
//! ```
//!
//! Nothing else is read: no names, no functions, no scientific notation. Every operand and
//! every intermediate result is bounded ([`MAX_BITS`]), as are the input's length, its
//! nesting, its literals' digits, an exponent's size and the time spent.

use std::time::{Duration, Instant};

use aether_policy::tool::groups;
use aether_policy::{Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};

/// The longest expression read.
pub const MAX_CHARS: usize = 2_000;
/// The most digits in one literal.
pub const MAX_DIGITS: usize = 500;
/// The deepest nesting of parentheses and signs.
pub const MAX_DEPTH: usize = 64;
/// The largest exponent, in absolute value.
pub const MAX_EXPONENT: u32 = 10_000;
/// The most bits a numerator or denominator may have at any step.
pub const MAX_BITS: u64 = 65_536;
/// The longest an evaluation may take.
pub const MAX_TIME: Duration = Duration::from_secs(2);
/// Significant digits shown of a decimal that does not end.
pub const DECIMAL_DIGITS: usize = 50;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The expression: integers, decimals, + - * / (or × ÷), ^ with an integer exponent,
    /// parentheses. For example `(1/3 + 0.25) * 2^10`.
    #[schemars(length(min = 1, max = 2000))]
    expression: String,
}

#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct Answer {
    /// The expression as read (spaces removed, operators normalised).
    pub expression: String,
    /// The exact result, `p/q` in lowest terms (or `p` for an integer).
    pub fraction: String,
    /// The result in decimal: exact when `exact`, else the first 50 significant digits
    /// followed by `…`.
    pub decimal: String,
    /// Whether `decimal` is the whole value.
    pub exact: bool,
    /// sha256 of `expression = fraction`: a receipt that this result came from this
    /// expression.
    pub receipt: String,
}

/// Why an expression was not evaluated (the message says where and what to change).
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct CalcError(pub String);

fn err<T>(message: impl Into<String>) -> Result<T, CalcError> {
    Err(CalcError(message.into()))
}

/// Evaluates `input` exactly.
pub fn evaluate(input: &str) -> Result<Answer, CalcError> {
    if input.trim().is_empty() {
        return err("the expression is empty");
    }
    if input.chars().count() > MAX_CHARS {
        return err(format!(
            "the expression is longer than {MAX_CHARS} characters"
        ));
    }
    let tokens = tokenize(input)?;
    let mut parser = Parser {
        tokens: &tokens,
        pos: 0,
        depth: 0,
        started: Instant::now(),
    };
    let value = parser.expr()?;
    if parser.pos != tokens.len() {
        return err(format!(
            "unexpected {} after a complete expression",
            tokens[parser.pos].describe()
        ));
    }
    let expression = tokens.iter().map(Token::text).collect::<String>();
    let fraction = if value.is_integer() {
        value.numer().to_string()
    } else {
        format!("{}/{}", value.numer(), value.denom())
    };
    let (decimal, exact) = decimal(&value);
    let receipt =
        aether_policy::sha256(format!("{expression} = {fraction}").as_bytes()).to_string();
    Ok(Answer {
        expression,
        fraction,
        decimal,
        exact,
        receipt,
    })
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(BigRational, String),
    Op(char),
    Open,
    Close,
}

impl Token {
    fn text(&self) -> String {
        match self {
            Token::Number(_, text) => text.clone(),
            Token::Op(c) => c.to_string(),
            Token::Open => "(".into(),
            Token::Close => ")".into(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Token::Number(_, text) => format!("the number {text}"),
            other => format!("{:?}", other.text()),
        }
    }
}

fn tokenize(input: &str) -> Result<Vec<Token>, CalcError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                tokens.push(Token::Number(number(&text)?, text));
            }
            '+' => {
                tokens.push(Token::Op('+'));
                i += 1;
            }
            '-' | '−' => {
                tokens.push(Token::Op('-'));
                i += 1;
            }
            '*' | '×' => {
                tokens.push(Token::Op('*'));
                i += 1;
            }
            '/' | '÷' => {
                tokens.push(Token::Op('/'));
                i += 1;
            }
            '^' => {
                tokens.push(Token::Op('^'));
                i += 1;
            }
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Token::Close);
                i += 1;
            }
            other => {
                return err(format!(
                    "{other:?} at character {} is not part of the grammar (digits, a decimal point, + - * / × ÷ ^ and parentheses)",
                    i + 1
                ));
            }
        }
    }
    Ok(tokens)
}

/// A literal: digits with at most one decimal point, exact.
fn number(text: &str) -> Result<BigRational, CalcError> {
    let digits = text.chars().filter(char::is_ascii_digit).count();
    if digits == 0 {
        return err(format!("{text:?} is not a number"));
    }
    if digits > MAX_DIGITS {
        return err(format!(
            "a number of {digits} digits is more than the {MAX_DIGITS} allowed"
        ));
    }
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => {
            if f.contains('.') {
                return err(format!("{text:?} has more than one decimal point"));
            }
            (w, f)
        }
        None => (text, ""),
    };
    let all = format!("{whole}{frac}");
    let numer: BigInt = if all.is_empty() {
        BigInt::zero()
    } else {
        all.parse()
            .map_err(|_| CalcError(format!("{text:?} is not a number")))?
    };
    let denom = num_traits::pow(BigInt::from(10), frac.len());
    Ok(BigRational::new(numer, denom))
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    depth: usize,
    started: Instant,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn enter(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(format!(
                "the expression nests deeper than {MAX_DEPTH} levels"
            ));
        }
        if self.started.elapsed() > MAX_TIME {
            return err(format!(
                "the evaluation took longer than {} s",
                MAX_TIME.as_secs()
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<BigRational, CalcError> {
        self.enter()?;
        let mut value = self.term()?;
        while let Some(Token::Op(op @ ('+' | '-'))) = self.peek() {
            let op = *op;
            self.pos += 1;
            let rhs = self.term()?;
            value = if op == '+' { value + rhs } else { value - rhs };
            bounded(&value)?;
        }
        self.depth -= 1;
        Ok(value)
    }

    fn term(&mut self) -> Result<BigRational, CalcError> {
        let mut value = self.unary()?;
        while let Some(Token::Op(op @ ('*' | '/'))) = self.peek() {
            let op = *op;
            self.pos += 1;
            let rhs = self.unary()?;
            if op == '*' {
                value *= rhs;
            } else {
                if rhs.is_zero() {
                    return err("division by zero");
                }
                value /= rhs;
            }
            bounded(&value)?;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<BigRational, CalcError> {
        self.enter()?;
        let value = match self.peek() {
            Some(Token::Op('-')) => {
                self.pos += 1;
                -self.unary()?
            }
            Some(Token::Op('+')) => {
                self.pos += 1;
                self.unary()?
            }
            _ => self.power()?,
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<BigRational, CalcError> {
        let base = self.primary()?;
        if let Some(Token::Op('^')) = self.peek() {
            self.pos += 1;
            let exponent = self.unary()?;
            if !exponent.is_integer() {
                return err(format!(
                    "the exponent {exponent} is not an integer (only integer powers are exact)"
                ));
            }
            let e = exponent.to_integer();
            let Some(e) = e.abs().to_u32().filter(|e| *e <= MAX_EXPONENT) else {
                return err(format!(
                    "the exponent {e} is larger than {MAX_EXPONENT} in size"
                ));
            };
            // The result's size is known before it is computed: refuse what would be too big.
            let bits = base.numer().bits().max(base.denom().bits());
            if bits.saturating_mul(u64::from(e)) > MAX_BITS {
                return err(format!(
                    "the result would have more than {MAX_BITS} bits; Aether bounds every number it computes"
                ));
            }
            if base.is_zero() && exponent.is_negative() {
                return err("division by zero (0 to a negative power)");
            }
            let mut value = num_traits::pow(base, e as usize);
            if exponent.is_negative() {
                value = value.recip();
            }
            bounded(&value)?;
            return Ok(value);
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<BigRational, CalcError> {
        match self.peek().cloned() {
            Some(Token::Number(value, _)) => {
                self.pos += 1;
                Ok(value)
            }
            Some(Token::Open) => {
                self.pos += 1;
                let value = self.expr()?;
                match self.peek() {
                    Some(Token::Close) => {
                        self.pos += 1;
                        Ok(value)
                    }
                    _ => err("a parenthesis is not closed"),
                }
            }
            Some(other) => err(format!(
                "expected a number or \"(\", found {}",
                other.describe()
            )),
            None => err("the expression ends where a number was expected"),
        }
    }
}

fn bounded(value: &BigRational) -> Result<(), CalcError> {
    if value.numer().bits() > MAX_BITS || value.denom().bits() > MAX_BITS {
        return err(format!(
            "a step's result has more than {MAX_BITS} bits; Aether bounds every number it computes"
        ));
    }
    Ok(())
}

/// The value in decimal, and whether that is all of it.
fn decimal(value: &BigRational) -> (String, bool) {
    let sign = if value.is_negative() { "-" } else { "" };
    let value = value.abs();
    let (numer, denom) = (value.numer().clone(), value.denom().clone());
    let whole = &numer / &denom;
    let mut rest = &numer % &denom;
    // A fraction whose denominator has only 2s and 5s ends.
    let mut d = denom.clone();
    let (two, five) = (BigInt::from(2), BigInt::from(5));
    while (&d % &two).is_zero() {
        d /= &two;
    }
    while (&d % &five).is_zero() {
        d /= &five;
    }
    let ends = d.is_one();
    let mut digits = String::new();
    let whole_digits = if whole.is_zero() {
        0
    } else {
        whole.to_string().len()
    };
    let budget = if ends {
        usize::MAX
    } else {
        DECIMAL_DIGITS.saturating_sub(whole_digits).max(1)
    };
    let mut significant = 0usize;
    let ten = BigInt::from(10);
    while !rest.is_zero() && significant < budget {
        rest *= &ten;
        let digit = &rest / &denom;
        rest %= &denom;
        digits.push_str(&digit.to_string());
        if whole_digits > 0 || significant > 0 || !digit.is_zero() {
            significant += 1;
        }
        if digits.len() > 100_000 {
            break;
        }
    }
    let mut text = format!("{sign}{whole}");
    if !digits.is_empty() {
        text.push('.');
        text.push_str(&digits);
    }
    if !ends {
        text.push('…');
    }
    (text, ends)
}

pub struct Calculate {
    def: ToolDef,
}

impl Default for Calculate {
    fn default() -> Calculate {
        Calculate::new()
    }
}

impl Calculate {
    pub fn new() -> Calculate {
        Calculate {
            def: ToolDef {
                name: "calculate".into(),
                title: "Calculate exactly".into(),
                group: groups::CALC.into(),
                tier: Tier::Standard,
                description: "Evaluate arithmetic exactly, as fractions: integers, decimals, + - * / (or × ÷), ^ with an integer exponent, parentheses. \
                     Returns the result as a fraction in lowest terms and in decimal, and a receipt (sha256 of expression and result). \
                     Nothing but that grammar is read; numbers are bounded in size."
                    .into(),
                input_schema: schema_of::<Args>(),
                output_schema: schema_of::<Answer>(),
                arguments: Default::default(),
                meta: ToolMeta {
                    idempotent: true,
                    ..ToolMeta::read_only()
                },
            },
        }
    }
}

#[async_trait]
impl Tool for Calculate {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, _cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let Args { expression } = parse_args(args)?;
        // Bounded, but not free: off the async threads.
        let answer = tokio::task::spawn_blocking(move || evaluate(&expression))
            .await
            .map_err(|e| ToolError::failed(format!("the calculation failed: {e}")))?
            .map_err(|e| ToolError::InvalidArguments(e.0))?;
        let text = format!(
            "{} = {}\n= {}\nreceipt {}",
            answer.expression, answer.fraction, answer.decimal, answer.receipt
        );
        Ok(ToolOutput {
            content: vec![crate::Content::Text(text)],
            structured: Some(serde_json::to_value(&answer).map_err(ToolError::failed)?),
            is_error: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frac(e: &str) -> String {
        evaluate(e).unwrap_or_else(|x| panic!("{e}: {x}")).fraction
    }

    #[test]
    fn arithmetic_is_exact() {
        assert_eq!(frac("1/3 + 1/6"), "1/2");
        assert_eq!(frac("0.1 + 0.2"), "3/10");
        assert_eq!(frac("2^10"), "1024");
        assert_eq!(frac("2^-2"), "1/4");
        assert_eq!(frac("-2^2"), "-4");
        assert_eq!(frac("(-2)^3"), "-8");
        assert_eq!(frac("2^3^2"), "512", "right-associative");
        assert_eq!(frac("6 ÷ 4 × 2 − 1"), "2");
        assert_eq!(frac("(1.5 + .5) * 3"), "6");
        assert_eq!(frac("10 - 4 - 3"), "3", "left-associative");
        let a = evaluate("1/3").unwrap();
        assert!(!a.exact);
        assert!(
            a.decimal.starts_with("0.3333333333") && a.decimal.ends_with('…'),
            "{}",
            a.decimal
        );
        assert_eq!(
            a.decimal.chars().filter(char::is_ascii_digit).count(),
            1 + DECIMAL_DIGITS
        );
        let b = evaluate("1/8").unwrap();
        assert!(b.exact);
        assert_eq!(b.decimal, "0.125");
        assert_eq!(evaluate("-7/4").unwrap().decimal, "-1.75");
    }

    #[test]
    fn the_receipt_binds_expression_and_result() {
        let a = evaluate("1 + 1").unwrap();
        let b = evaluate(" 1+1 ").unwrap();
        assert_eq!(
            a.receipt, b.receipt,
            "spaces do not change what was computed"
        );
        assert_ne!(a.receipt, evaluate("2").unwrap().receipt);
        assert_eq!(a.receipt, aether_policy::sha256(b"1+1 = 2").to_string());
    }

    #[test]
    fn anything_outside_the_grammar_or_the_bounds_is_refused_with_why() {
        for (bad, says) in [
            ("", "empty"),
            ("1/0", "division by zero"),
            ("0^-1", "division by zero"),
            ("2^0.5", "not an integer"),
            ("2^100000", "larger than"),
            ("10^10000 * 10^10000 * 10^10000", "bits"),
            ("99999999999^9999", "bits"),
            ("1e10", "not part of the grammar"),
            ("sqrt(4)", "not part of the grammar"),
            ("__import__('os')", "not part of the grammar"),
            ("1..2", "more than one decimal point"),
            ("(1 + 2", "not closed"),
            ("1 + ", "ends where a number"),
            ("1 2", "after a complete expression"),
            ("*3", "expected a number"),
        ] {
            let e = evaluate(bad)
                .err()
                .unwrap_or_else(|| panic!("accepted {bad:?}"));
            assert!(e.0.contains(says), "{bad:?}: {e}");
        }
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(evaluate(&deep).unwrap_err().0.contains("deeper"));
        let long_number = "9".repeat(MAX_DIGITS + 1);
        assert!(evaluate(&long_number).unwrap_err().0.contains("digits"));
        let signs = format!("{}1", "-".repeat(200));
        assert!(evaluate(&signs).unwrap_err().0.contains("deeper"));
        assert!(
            evaluate(&"1+".repeat(1500))
                .unwrap_err()
                .0
                .contains("longer than")
        );
    }
}
