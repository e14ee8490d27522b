//! The credential shapes the screen knows, one row each, and the checks a regex cannot express:
//! whether a match is a documented placeholder, a JWT, a generated key.
//!
//! A row names its rule (`dlp:github-token`), the literals a match starts with (the prefilter's
//! patterns), the regex tried where one is found, and the part of the match that must be
//! random (`(?P<s>…)`): that part is what the placeholder check reads, and the class written
//! first in it is what an assembled secret's randomness is judged against. A row may also give
//! a stricter *assembly form* ([`Assemble`]): the documented structure and length that pieces
//! given in any order are put together to.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

/// What the byte before a match may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Before {
    /// Anything: the literal is distinctive on its own (`-----BEGIN `, a webhook host).
    Any,
    /// Not an ASCII letter or digit, so `task-list` is not an `sk-` key.
    Word,
    /// As `Word`, or right after this text (`bot` in a Telegram Bot API URL).
    WordOr(&'static str),
}

impl Before {
    pub(super) fn allows(self, hay: &[u8], start: usize) -> bool {
        let Some(&b) = start.checked_sub(1).map(|i| &hay[i]) else {
            return true;
        };
        match self {
            Before::Any => true,
            Before::Word => !b.is_ascii_alphanumeric(),
            Before::WordOr(text) => {
                !b.is_ascii_alphanumeric() || hay[..start].ends_with(text.as_bytes())
            }
        }
    }

    /// As [`Before::allows`], or, for a piece of a split secret, where what comes before in the
    /// piece is the end of the allowed text (`t` of `bot`, its `bo` in another piece).
    pub(super) fn allows_in_piece(self, piece: &[u8], start: usize) -> bool {
        start == 0
            || self.allows(piece, start)
            || matches!(self, Before::WordOr(text) if text.as_bytes().ends_with(&piece[..start]))
    }
}

/// Where a match starts, given the text and where its literal was found.
pub(super) type Back = fn(&[u8], usize) -> Option<usize>;

/// One credential shape.
pub(super) struct Shape {
    pub rule: &'static str,
    /// Literals a match holds: the prefilter's patterns. A match starts with one, unless
    /// `back` says where it starts.
    pub starts: &'static [&'static str],
    /// The shape from its start, matched anchored there. `(?P<s>…)` is the part that must be
    /// random. A shape of fixed length ends with a word-end class, which consumes a byte.
    pub pattern: &'static str,
    pub before: Before,
    /// What the matched bytes must also satisfy.
    pub check: Option<fn(&[u8]) -> bool>,
    /// Where the match starts, given where its literal was found, for a shape whose
    /// distinctive literal is inside it (Azure's `Q~`, Telegram's `:AA`); `None`: at the
    /// literal.
    pub back: Option<Back>,
    /// How long the random part (`s`) is, at least and at most.
    pub len: (usize, usize),
    /// How pieces are assembled into this shape in any order ([`super::split`]).
    pub assemble: Assemble,
    /// Fixed text inside the random part (OpenAI's `T3BlbkFJ`): the parts on either side are
    /// judged as placeholders each.
    pub marker: Option<&'static str>,
    /// What a beginning of this shape must satisfy while pieces are put together (a JWT's
    /// header must decode to text), so that orders that cannot succeed are dropped early.
    pub viable: Option<fn(&[u8]) -> bool>,
    /// Whether the random part may be hex digits alone although its class is wider (Slack's
    /// user tokens end in hex): otherwise hex where letters beyond `f` are expected is a digest,
    /// not this secret, when pieces are put together.
    pub hex_ok: bool,
    /// Bytes after which the last piece of an assembled secret may go on past it (`/` for a
    /// bot token in a Bot API URL, `…/getMe`). Otherwise a piece ends where the secret does:
    /// a field holding anything else beside its piece (`https` of `https://…`) is not one.
    pub goes_on_after: &'static [u8],
}

/// How a shape is put together from pieces given in any order.
#[derive(Clone, Copy, Debug)]
pub(super) enum Assemble {
    /// To the shape's own pattern (without its word-end class).
    AsMatched,
    /// To a stricter pattern: the documented structure and length, so that a literal in one
    /// field is not completed by whatever random-looking fields a call happens to hold.
    Strict(&'static str),
    /// Not in any order: its literal holds a character fields are not cut at (`-----BEGIN `,
    /// `AccountKey=`), it is found by a name beside a value, or its literal lies inside it
    /// after a run any field could begin (Mailchimp's `-us`, Terraform's `.atlasv1.`, Entra
    /// ID's `Q~`). Found split only in order.
    InOrder,
}

const DEFAULT: Shape = Shape {
    rule: "",
    starts: &[],
    pattern: "",
    before: Before::Word,
    check: None,
    back: None,
    len: (16, 255),
    assemble: Assemble::AsMatched,
    marker: None,
    viable: None,
    hex_ok: false,
    goes_on_after: b"",
};

/// The AWS secret key's names as they are spelt in env files, config, JSON and headers. The
/// regex accepts any case; these literals decide where it is tried.
const AWS_SECRET_NAMES: &[&str] = &[
    "aws_secret",
    "AWS_SECRET",
    "Aws_Secret",
    "aws-secret",
    "AWS-SECRET",
    "Aws-Secret",
    "awsSecret",
    "AwsSecret",
    "secret_access_key",
    "SECRET_ACCESS_KEY",
    "Secret_Access_Key",
    "secret-access-key",
    "SECRET-ACCESS-KEY",
    "Secret-Access-Key",
    "secretAccessKey",
    "SecretAccessKey",
];

/// Datadog's API and application keys (32 and 40 hex digits) have no shape of their own: they
/// are found next to their names (`DD_API_KEY`, the `DD-API-KEY` header).
const DATADOG_NAMES: &[&str] = &[
    "dd_api_key",
    "DD_API_KEY",
    "dd-api-key",
    "DD-API-KEY",
    "Dd-Api-Key",
    "dd_app_key",
    "DD_APP_KEY",
    "dd-application-key",
    "DD-APPLICATION-KEY",
    "Dd-Application-Key",
    "datadog_api_key",
    "DATADOG_API_KEY",
    "datadog_app_key",
    "DATADOG_APP_KEY",
];

/// `SK` and a hex digit: three bytes, so that the prefilter is not woken by every `SK` in
/// upper-case text.
const TWILIO_STARTS: &[&str] = &[
    "SK0", "SK1", "SK2", "SK3", "SK4", "SK5", "SK6", "SK7", "SK8", "SK9", "SKa", "SKb", "SKc",
    "SKd", "SKe", "SKf",
];

/// Every shape, most specific first: where two can match at one place (`sk-ant-` and `sk-`),
/// the first one names the finding. A rule may have several rows.
pub(super) const SHAPES: &[Shape] = &[
    Shape {
        rule: "dlp:private-key",
        starts: &["-----BEGIN "],
        pattern: r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----",
        assemble: Assemble::InOrder,
        before: Before::Any,
        len: (0, 40),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:aws-access-key",
        starts: &["AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"(?:AKIA|ASIA|ABIA|ACCA)(?P<s>[A-Z0-9]{16})(?:[^A-Za-z0-9]|$)",
        len: (16, 16),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:aws-secret-key",
        starts: AWS_SECRET_NAMES,
        pattern: r#"(?i:aws[_-]?secret(?:[_-]?access)?(?:[_-]?key)?|secret[_-]?access[_-]?key)[ \t\r\n"':=>]{0,8}(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        assemble: Assemble::InOrder,
        before: Before::Any,
        len: (40, 40),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:datadog-key",
        starts: DATADOG_NAMES,
        pattern: r#"(?i:dd[_-]?(?:api|app|application)[_-]?key|datadog[_-]?(?:api|app)[_-]?key)[ \t\r\n"':=>]{0,8}(?P<s>[a-f0-9]{40}|[a-f0-9]{32})(?:[^A-Za-z0-9]|$)"#,
        assemble: Assemble::InOrder,
        before: Before::Any,
        len: (32, 40),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:google-api-key",
        starts: &["AIza"],
        pattern: r"AIza(?P<s>[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)",
        len: (35, 35),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:google-oauth-token",
        starts: &["ya29."],
        pattern: r"ya29\.(?P<s>[0-9A-Za-z_-]{20,})",
        assemble: Assemble::Strict(r"ya29\.[0-9A-Za-z_-]{20,1024}"),
        len: (20, 2048),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:github-token",
        starts: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        pattern: r"gh[pousr]_(?P<s>[A-Za-z0-9]{36,255})(?:[^A-Za-z0-9]|$)",
        assemble: Assemble::Strict(r"gh[pousr]_[A-Za-z0-9]{36}"),
        len: (36, 255),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:github-token",
        starts: &["github_pat_"],
        pattern: r"github_pat_(?P<s>[A-Za-z0-9_]{22,255})(?:[^A-Za-z0-9_]|$)",
        assemble: Assemble::Strict(r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
        len: (22, 255),
        ..DEFAULT
    },
    Shape {
        // Aether's own bearer tokens (agents' and operators'): 32 random bytes, base64url.
        rule: "dlp:aether-token",
        starts: &["aether_"],
        pattern: r"aether_(?P<s>[A-Za-z0-9_-]{43})(?:[^A-Za-z0-9_-]|$)",
        len: (43, 43),
        ..DEFAULT
    },
    Shape {
        // Personal, runner (`glrt-`, and the older registration token `GR1348941`), deploy,
        // pipeline-trigger, feed, incoming-mail, agent, CI job, SCIM, OAuth-application and
        // feature-flag tokens.
        rule: "dlp:gitlab-token",
        starts: &[
            "glpat-",
            "glrt-",
            "gldt-",
            "glptt-",
            "glft-",
            "glimt-",
            "glagent-",
            "glcbt-",
            "glsoat-",
            "gloas-",
            "glffct-",
            "GR1348941",
        ],
        pattern: r"(?:gl(?:pat|rt|dt|ptt|ft|imt|agent|cbt|soat|oas|ffct)-|GR1348941)(?P<s>[0-9A-Za-z_-]{20,300})",
        hex_ok: true,
        // The documented lengths: twenty characters, or the routable personal tokens' longer
        // form, hex pipeline-trigger tokens, CI job tokens with a partition, OAuth secrets.
        assemble: Assemble::Strict(concat!(
            r"(?:gl(?:pat|rt|dt|ft|imt|agent|soat|ffct)-|GR1348941)[0-9A-Za-z_-]{20}",
            r"|glpat-[0-9A-Za-z_-]{27,300}\.[0-9a-z]{2}\.[0-9a-z]{7,9}",
            r"|glptt-[0-9a-f]{40}|glcbt-(?:[0-9A-Za-z]{1,5}_)?[0-9A-Za-z_-]{20}",
            r"|gloas-[0-9A-Za-z_-]{64}",
        )),
        len: (20, 300),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:slack-webhook",
        starts: &["hooks.slack.com/"],
        pattern: r"hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Za-z0-9_]{6,}/[A-Za-z0-9_]{6,}/(?:[0-9]+/)?(?P<s>[A-Za-z0-9]{16,})",
        before: Before::Any,
        len: (16, 64),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:slack-token",
        starts: &["xox"],
        pattern: r"xox[bapres]-(?P<s>[0-9A-Za-z-]{10,})",
        hex_ok: true,
        assemble: Assemble::Strict(
            r"xox[bapres]-[0-9]{8,14}(?:-[0-9]{8,14}){1,2}-[0-9A-Za-z]{24,34}",
        ),
        // Slack tokens carry numeric team and user ids; `xoxs-and-hugs-forever` does not.
        check: Some(|m| m[5..].iter().any(u8::is_ascii_digit)),
        len: (10, 255),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:slack-token",
        starts: &["xapp-"],
        pattern: r"xapp-[0-9]-(?P<s>[A-Z0-9]+-[0-9]+-[A-Za-z0-9]{16,})",
        hex_ok: true,
        assemble: Assemble::Strict(r"xapp-[0-9]-[A-Z0-9]{9,13}-[0-9]{10,14}-[A-Za-z0-9]{32,64}"),
        len: (20, 255),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:anthropic-key",
        starts: &["sk-ant-"],
        pattern: r"sk-ant-(?:[a-z]+[0-9]{2}-)?(?P<s>[A-Za-z0-9_-]{20,})",
        assemble: Assemble::Strict(r"sk-ant-[a-z]{3,6}[0-9]{2}-[A-Za-z0-9_-]{90,100}"),
        len: (20, 255),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:openai-key",
        starts: &["sk-"],
        pattern: r"sk-(?:(?:proj|svcacct|admin)-)?(?P<s>[A-Za-z0-9_-]{20,})",
        // A generated key mixes cases and digits; a kebab-case name after `sk-` does not.
        check: Some(|m| {
            let body = &m[3..];
            if body.starts_with(b"ant-") {
                return false;
            }
            let body = ["proj-", "svcacct-", "admin-"]
                .iter()
                .find_map(|p| body.strip_prefix(p.as_bytes()))
                .unwrap_or(body);
            looks_generated(body)
        }),
        len: (20, 255),
        // Project, service-account and admin keys, and the older ones, all hold it.
        marker: Some("T3BlbkFJ"),
        assemble: Assemble::Strict(
            r"sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,160}T3BlbkFJ[A-Za-z0-9_-]{20,160}",
        ),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:ai-provider-key",
        starts: &["gsk_", "xai-", "r8_", "pplx-"],
        pattern: r"(?:gsk_|xai-|r8_|pplx-)(?P<s>[A-Za-z0-9]{32,})(?:[^A-Za-z0-9]|$)",
        assemble: Assemble::Strict(
            r"gsk_[A-Za-z0-9]{52}|xai-[A-Za-z0-9]{80}|r8_[A-Za-z0-9]{37}|pplx-[A-Za-z0-9]{48}",
        ),
        check: Some(|m| looks_generated(&m[3..])),
        len: (32, 255),
        ..DEFAULT
    },
    Shape {
        // Secret and restricted keys, live and test; webhook signing secrets.
        rule: "dlp:stripe-key",
        starts: &[
            "sk_live_", "rk_live_", "sk_test_", "rk_test_", "sk_prod_", "rk_prod_",
        ],
        pattern: r"[sr]k_(?:live|test|prod)_(?P<s>[0-9A-Za-z]{16,247})(?:[^A-Za-z0-9]|$)",
        assemble: Assemble::Strict(r"[sr]k_(?:live|test|prod)_(?:[0-9A-Za-z]{24}|[0-9A-Za-z]{99})"),
        len: (16, 247),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:stripe-key",
        starts: &["whsec_"],
        pattern: r"whsec_(?P<s>[A-Za-z0-9+/]{32,})",
        assemble: Assemble::Strict(r"whsec_[A-Za-z0-9+/]{32}"),
        len: (32, 255),
        ..DEFAULT
    },
    Shape {
        // OAuth access tokens and application secrets; access tokens (`EAAA`).
        rule: "dlp:square-token",
        starts: &["sq0atp-", "sq0csp-"],
        pattern: r"sq0(?:atp|csp)-(?P<s>[0-9A-Za-z_-]{22,60})",
        assemble: Assemble::Strict(r"sq0atp-[0-9A-Za-z_-]{22}|sq0csp-[0-9A-Za-z_-]{43}"),
        len: (22, 60),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:square-token",
        starts: &["EAAA"],
        pattern: r"EAAA(?P<s>[0-9A-Za-z_-]{60})(?:[^0-9A-Za-z_-]|$)",
        len: (60, 60),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:shopify-token",
        starts: &["shpat_", "shpca_", "shppa_", "shpss_"],
        pattern: r"shp(?:at|ca|pa|ss)_(?P<s>[a-fA-F0-9]{32})(?:[^A-Za-z0-9]|$)",
        len: (32, 32),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:npm-token",
        starts: &["npm_"],
        pattern: r"npm_(?P<s>[A-Za-z0-9]{36})(?:[^A-Za-z0-9]|$)",
        len: (36, 36),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:pypi-token",
        starts: &["pypi-AgE"],
        pattern: r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)(?P<s>[A-Za-z0-9_-]{50,})",
        assemble: Assemble::Strict(
            r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,300}",
        ),
        len: (50, 4096),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:docker-token",
        starts: &["dckr_pat_", "dckr_oat_"],
        pattern: r"dckr_(?:pat|oat)_(?P<s>[A-Za-z0-9_-]{27,})",
        assemble: Assemble::Strict(r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,36}"),
        len: (27, 255),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:huggingface-token",
        starts: &["hf_", "api_org_"],
        pattern: r"(?:hf_|api_org_)(?P<s>[A-Za-z]{30,})",
        assemble: Assemble::Strict(r"(?:hf_|api_org_)[A-Za-z]{34}"),
        // Tokens mix cases; a long snake-case word after `hf_` is all lower case.
        check: Some(|m| {
            m.iter().any(u8::is_ascii_uppercase) && m[3..].iter().any(u8::is_ascii_lowercase)
        }),
        len: (30, 255),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:sendgrid-key",
        starts: &["SG."],
        pattern: r"SG\.(?P<s>[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?:[^A-Za-z0-9_-]|$)",
        len: (66, 66),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:sendinblue-key",
        starts: &["xkeysib-", "xsmtpsib-"],
        pattern: r"x(?:keysib|smtpsib)-(?P<s>[a-f0-9]{64}-[A-Za-z0-9]{16})",
        len: (81, 81),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:twilio-key",
        starts: TWILIO_STARTS,
        pattern: r"SK(?P<s>[0-9a-f]{32})(?:[^A-Za-z0-9]|$)",
        len: (32, 32),
        ..DEFAULT
    },
    Shape {
        // Private API keys and public validation keys.
        rule: "dlp:mailgun-key",
        starts: &["key-", "pubkey-"],
        pattern: r"(?:pub)?key-(?P<s>[a-f0-9]{32})(?:[^A-Za-z0-9]|$)",
        len: (32, 32),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:mailchimp-key",
        starts: &["-us"],
        pattern: r"(?P<s>[a-f0-9]{32})-us[0-9]{1,2}(?:[^A-Za-z0-9]|$)",
        assemble: Assemble::InOrder,
        back: Some(|_, at| at.checked_sub(32)),
        len: (32, 32),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:databricks-token",
        starts: &["dapi"],
        pattern: r"dapi(?P<s>[a-f0-9]{32})(?:-[0-9])?(?:[^A-Za-z0-9]|$)",
        len: (32, 32),
        ..DEFAULT
    },
    Shape {
        // Storage account keys and Service Bus / Event Hubs keys in connection strings.
        rule: "dlp:azure-key",
        starts: &["AccountKey=", "SharedAccessKey="],
        pattern: r"(?:AccountKey|SharedAccessKey)=(?P<s>[A-Za-z0-9+/]{42,86})={0,2}",
        assemble: Assemble::InOrder,
        before: Before::Any,
        len: (42, 88),
        ..DEFAULT
    },
    Shape {
        // Entra ID (Azure AD) client secrets: three characters, a digit, `Q~`, and 31-34 more.
        // The digit is in the literals: two bytes would make the prefilter's fingerprints
        // shorter, and so much slower, for every literal grouped with them.
        rule: "dlp:azure-key",
        starts: &[
            "0Q~", "1Q~", "2Q~", "3Q~", "4Q~", "5Q~", "6Q~", "7Q~", "8Q~", "9Q~",
        ],
        pattern: r"[A-Za-z0-9_~.]{3}[0-9]Q~(?P<s>[A-Za-z0-9_~.-]{31,34})\.?(?:[^A-Za-z0-9_~.-]|$)",
        assemble: Assemble::InOrder,
        back: Some(|_, at| at.checked_sub(3)),
        len: (31, 34),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:alibaba-key",
        starts: &["LTAI"],
        pattern: r"LTAI(?P<s>[A-Za-z0-9]{12,20})(?:[^A-Za-z0-9]|$)",
        len: (12, 20),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:digitalocean-token",
        starts: &["dop_v1_", "doo_v1_", "dor_v1_"],
        pattern: r"do[opr]_v1_(?P<s>[a-f0-9]{64})(?:[^A-Za-z0-9]|$)",
        len: (64, 64),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:heroku-key",
        starts: &["HRKU-AA"],
        pattern: r"HRKU-AA(?P<s>[0-9A-Za-z_-]{58})(?:[^0-9A-Za-z_-]|$)",
        len: (58, 58),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:doppler-token",
        starts: &[
            "dp.pt.",
            "dp.st.",
            "dp.sa.",
            "dp.ct.",
            "dp.scim.",
            "dp.audit.",
        ],
        pattern: r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?P<s>[A-Za-z0-9]{40,44})(?:[^A-Za-z0-9]|$)",
        len: (40, 44),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:pulumi-token",
        starts: &["pul-"],
        pattern: r"pul-(?P<s>[a-f0-9]{40})(?:[^A-Za-z0-9]|$)",
        len: (40, 40),
        ..DEFAULT
    },
    Shape {
        // Service, batch and recovery tokens.
        rule: "dlp:vault-token",
        starts: &["hvs.", "hvb.", "hvr."],
        pattern: r"hv[sbr]\.(?P<s>[A-Za-z0-9_-]{24,})",
        assemble: Assemble::Strict(r"hv[sbr]\.[A-Za-z0-9_-]{24,256}"),
        len: (24, 1024),
        ..DEFAULT
    },
    Shape {
        // Cloud access policy tokens, service account tokens, and the older API keys (base64
        // of `{"k":"…`).
        rule: "dlp:grafana-token",
        starts: &["glc_", "eyJrIjoi"],
        pattern: r"(?:glc_|eyJrIjoi)(?P<s>[A-Za-z0-9+/]{32,}={0,2})",
        assemble: Assemble::Strict(r"(?:glc_|eyJrIjoi)[A-Za-z0-9+/]{32,400}={0,2}"),
        len: (32, 1024),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:grafana-token",
        starts: &["glsa_"],
        pattern: r"glsa_(?P<s>[A-Za-z0-9]{32})_[A-Fa-f0-9]{8}(?:[^A-Za-z0-9]|$)",
        len: (32, 32),
        ..DEFAULT
    },
    Shape {
        // Atlassian API tokens and Bitbucket app passwords.
        rule: "dlp:atlassian-token",
        starts: &["ATATT3", "ATBB"],
        pattern: r"(?:ATATT3|ATBB)(?P<s>[A-Za-z0-9_=.-]{32,})",
        assemble: Assemble::Strict(r"ATATT3[A-Za-z0-9_=.-]{150,250}|ATBB[A-Za-z0-9]{32}"),
        len: (32, 300),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:linear-key",
        starts: &["lin_api_", "lin_oauth_"],
        pattern: r"lin_(?:api|oauth)_(?P<s>[A-Za-z0-9]{40,64})(?:[^A-Za-z0-9]|$)",
        len: (40, 64),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:notion-token",
        starts: &["ntn_", "secret_"],
        pattern: r"(?:ntn_[0-9]{11}(?P<s>[A-Za-z0-9]{35})|secret_(?P<t>[A-Za-z0-9]{43}))(?:[^A-Za-z0-9]|$)",
        check: Some(|m| looks_generated(&m[4..])),
        len: (35, 43),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:postman-key",
        starts: &["PMAK-"],
        pattern: r"PMAK-(?P<s>[a-f0-9]{24}-[a-f0-9]{34})(?:[^A-Za-z0-9]|$)",
        len: (59, 59),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:sentry-token",
        starts: &["sntryu_", "sntrys_"],
        pattern: r"(?:sntryu_(?P<s>[a-f0-9]{64})|sntrys_(?P<t>eyJ[A-Za-z0-9+/=_]{60,}))",
        assemble: Assemble::Strict(r"sntryu_[a-f0-9]{64}|sntrys_eyJ[A-Za-z0-9+/=_]{60,400}"),
        len: (64, 1024),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:new-relic-key",
        starts: &["NRAK-", "NRAA-", "NRJS-", "NRII-"],
        pattern: r"NR(?:AK|AA|JS|II)-(?P<s>[A-Za-z0-9-]{19,40})(?:[^A-Za-z0-9-]|$)",
        hex_ok: true,
        len: (19, 40),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:discord-webhook",
        starts: &["discord.com/api/webhooks/", "discordapp.com/api/webhooks/"],
        pattern: r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/(?P<s>[A-Za-z0-9_-]{60,68})",
        before: Before::Any,
        len: (60, 68),
        ..DEFAULT
    },
    Shape {
        // `123456789:AA…`, bare or in a Bot API URL (`/bot123456789:AA…/`).
        rule: "dlp:telegram-bot-token",
        starts: &[":AA"],
        pattern: r"[0-9]{8,10}:(?P<s>AA[A-Za-z0-9_-]{33})(?:[^A-Za-z0-9_-]|$)",
        back: Some(|hay, at| {
            let digits = hay[..at]
                .iter()
                .rev()
                .take(11)
                .take_while(|b| b.is_ascii_digit());
            Some(at - digits.count())
        }),
        before: Before::WordOr("bot"),
        goes_on_after: b"/",
        len: (35, 35),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:age-secret-key",
        starts: &["AGE-SECRET-KEY-1"],
        pattern: r"AGE-SECRET-KEY-1(?P<s>[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})",
        len: (58, 58),
        ..DEFAULT
    },
    Shape {
        // Developer-platform tokens with a distinctive prefix, one row each below.
        rule: "dlp:1password-token",
        starts: &["ops_eyJ"],
        pattern: r"ops_(?P<s>eyJ[A-Za-z0-9+/]{100,}={0,3})",
        assemble: Assemble::Strict(r"ops_eyJ[A-Za-z0-9+/]{100,1000}={0,3}"),
        len: (100, 4096),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:artifactory-key",
        starts: &["AKCp"],
        pattern: r"AKCp(?P<s>[A-Za-z0-9]{69})(?:[^A-Za-z0-9]|$)",
        len: (69, 69),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:ci-token",
        // CircleCI personal tokens, Buildkite user tokens, Clojars deploy tokens.
        starts: &["CCIPAT_", "bkua_", "CLOJARS_"],
        pattern: r"(?:CCIPAT_[A-Za-z0-9]{22}_(?P<s>[a-f0-9]{40})|bkua_(?P<t>[a-f0-9]{40})|CLOJARS_(?P<u>[a-z0-9]{60}))(?:[^A-Za-z0-9]|$)",
        len: (40, 60),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:dynatrace-token",
        starts: &["dt0c01."],
        pattern: r"dt0c01\.(?P<s>[A-Z0-9]{24}\.[A-Z0-9]{64})(?:[^A-Za-z0-9]|$)",
        len: (89, 89),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:easypost-key",
        starts: &["EZAK", "EZTK"],
        pattern: r"EZ[AT]K(?P<s>[A-Za-z0-9]{54})(?:[^A-Za-z0-9]|$)",
        len: (54, 54),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:flutterwave-key",
        starts: &["FLWSECK-", "FLWSECK_TEST-"],
        pattern: r"FLWSECK(?:_TEST)?-(?P<s>[a-h0-9]{32})-X",
        hex_ok: true,
        len: (32, 32),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:flyio-token",
        starts: &["fo1_", "fm1a_", "fm1r_", "fm2_"],
        pattern: r"(?:fo1_(?P<s>[A-Za-z0-9_-]{43})|fm(?:1[ar]|2)_(?P<t>[A-Za-z0-9+/]{100,}={0,3}))",
        assemble: Assemble::Strict(
            r"fo1_[A-Za-z0-9_-]{43}|fm(?:1[ar]|2)_[A-Za-z0-9+/]{100,1000}={0,3}",
        ),
        len: (43, 4096),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:mapbox-token",
        starts: &["sk.eyJ"],
        pattern: r"sk\.(?P<s>eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,})",
        assemble: Assemble::Strict(r"sk\.eyJ[A-Za-z0-9_-]{20,200}\.[A-Za-z0-9_-]{20,200}"),
        len: (44, 1024),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:openshift-token",
        starts: &["sha256~"],
        pattern: r"sha256~(?P<s>[A-Za-z0-9_-]{43})(?:[^A-Za-z0-9_-]|$)",
        len: (43, 43),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:planetscale-token",
        starts: &["pscale_tkn_", "pscale_pw_", "pscale_oauth_"],
        pattern: r"pscale_(?:tkn|pw|oauth)_(?P<s>[A-Za-z0-9_.=-]{32,64})",
        len: (32, 64),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:prefect-key",
        starts: &["pnu_"],
        pattern: r"pnu_(?P<s>[A-Za-z0-9]{36})(?:[^A-Za-z0-9]|$)",
        len: (36, 36),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:rubygems-key",
        starts: &["rubygems_"],
        pattern: r"rubygems_(?P<s>[a-f0-9]{48})(?:[^A-Za-z0-9]|$)",
        len: (48, 48),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:shippo-key",
        starts: &["shippo_live_", "shippo_test_"],
        pattern: r"shippo_(?:live|test)_(?P<s>[a-fA-F0-9]{40})(?:[^A-Za-z0-9]|$)",
        len: (40, 40),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:sourcegraph-token",
        starts: &["sgp_"],
        pattern: r"sgp_(?:[a-fA-F0-9]{16}_|local_)?(?P<s>[a-fA-F0-9]{40})(?:[^A-Za-z0-9]|$)",
        len: (40, 40),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:terraform-token",
        starts: &[".atlasv1."],
        pattern: r"[A-Za-z0-9]{14}\.atlasv1\.(?P<s>[A-Za-z0-9_=-]{60,70})",
        assemble: Assemble::InOrder,
        back: Some(|_, at| at.checked_sub(14)),
        len: (60, 70),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:typeform-token",
        starts: &["tfp_"],
        pattern: r"tfp_(?P<s>[A-Za-z0-9_.=-]{59})",
        len: (59, 59),
        ..DEFAULT
    },
    Shape {
        rule: "dlp:jwt",
        starts: &["eyJ"],
        pattern: r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",
        assemble: Assemble::Strict(
            r"eyJ[A-Za-z0-9_-]{2,400}\.eyJ[A-Za-z0-9_-]{2,2000}\.[A-Za-z0-9_-]{16,400}",
        ),
        check: Some(is_jwt),
        viable: Some(jwt_so_far),
        len: (8, 8192),
        ..DEFAULT
    },
];

/// Mixed case and a digit: what a generated key has and a name does not.
pub(super) fn looks_generated(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_uppercase)
        && s.iter().any(u8::is_ascii_lowercase)
        && s.iter().any(u8::is_ascii_digit)
}

/// A JWS: a header that decodes to a JSON object with `alg`, a payload that decodes to a JSON
/// object. `eyJ` is only `{"` in base64, which many things start with.
fn is_jwt(token: &[u8]) -> bool {
    let mut segments = token.split(|&b| b == b'.');
    let (Some(header), Some(payload)) = (segments.next(), segments.next()) else {
        return false;
    };
    let object = |segment: &[u8]| {
        let mut json = Vec::with_capacity(segment.len());
        super::base64_into(segment, &mut json);
        match serde_json::from_slice::<serde_json::Value>(&json) {
            Ok(serde_json::Value::Object(members)) => Some(members),
            _ => None,
        }
    };
    object(header).is_some_and(|h| h.contains_key("alg")) && object(payload).is_some()
}

/// Whether the beginning of a JWT could still be one: each complete segment so far decodes to
/// a JSON object (the header with `alg`), and the segment being written decodes to the
/// beginning of one, or, once its object is closed, to one that is complete as a segment must
/// be (a closed header without `alg` cannot go on).
fn jwt_so_far(token: &[u8]) -> bool {
    let mut segments = token.split(|&b| b == b'.').peekable();
    let mut index = 0;
    let mut json = Vec::new();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        if index >= 2 {
            return true;
        }
        json.clear();
        super::base64_into(segment, &mut json);
        let text = json
            .iter()
            .all(|&b| matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e) || (index > 0 && b >= 0x80));
        // The header and the payload are JSON text (the payload may hold UTF-8).
        let complete = match object_so_far(&json) {
            _ if !text => return false,
            ObjectSoFar::Not => return false,
            ObjectSoFar::Open => false,
            ObjectSoFar::Closed => true,
        };
        if last && !complete {
            return true;
        }
        match serde_json::from_slice::<serde_json::Value>(&json) {
            Ok(serde_json::Value::Object(members)) if index > 0 || members.contains_key("alg") => {}
            _ => return false,
        }
        index += 1;
    }
    true
}

/// How far JSON text is into one object.
enum ObjectSoFar {
    /// Not the beginning of one (no `{` first, or more after the brace that closes it).
    Not,
    Open,
    Closed,
}

fn object_so_far(json: &[u8]) -> ObjectSoFar {
    let mut bytes = json.iter().skip_while(|b| b.is_ascii_whitespace());
    match bytes.next() {
        None => return ObjectSoFar::Open,
        Some(&b) if b != b'{' => return ObjectSoFar::Not,
        Some(_) => {}
    }
    let (mut depth, mut in_string, mut escaped) = (1usize, false, false);
    for &b in bytes {
        if depth == 0 {
            if !b.is_ascii_whitespace() {
                return ObjectSoFar::Not;
            }
        } else if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
        }
    }
    if depth == 0 {
        ObjectSoFar::Closed
    } else {
        ObjectSoFar::Open
    }
}

/// Words that documentation puts in place of a secret (`AKIAIOSFODNN7EXAMPLE`,
/// `sk_test_your_key_here`), matched in any case.
const PLACEHOLDER_WORDS: &[&str] = &[
    "example",
    "sample",
    "placeholder",
    "dummy",
    "changeme",
    "redacted",
    "replace",
    "insert",
    "your",
    "here",
];

/// Whether the random part of a match (`s`, at least `min` long) is a documented placeholder
/// rather than a secret: once the placeholder words are taken out, what is left is shorter than
/// the shape's secret, or its first `min` characters carry little information (one or a few
/// characters repeated, a run like `1234567890abcdef`, a short pattern over and over).
///
/// Only the first `min` characters are judged, so junk appended to a real secret does not make
/// it a placeholder; and words are taken out before the length is compared, so a real secret
/// with `EXAMPLE` glued after it is still one.
pub(super) fn is_placeholder(s: &[u8], min: usize) -> bool {
    let mut rest = s.to_vec();
    for word in PLACEHOLDER_WORDS {
        let mut i = 0;
        while i + word.len() <= rest.len() {
            if rest[i..i + word.len()].eq_ignore_ascii_case(word.as_bytes()) {
                rest.drain(i..i + word.len());
            } else {
                i += 1;
            }
        }
    }
    let min = min.max(1);
    if rest.len() < min {
        return true;
    }
    low_information(&rest[..min])
}

/// Whether a piece of a secret, judged on its own, is a placeholder's: it holds a placeholder
/// word, or its first 32 bytes (from eight) carry little information.
pub(super) fn holds_placeholder(text: &[u8]) -> bool {
    static WORDS: OnceLock<AhoCorasick> = OnceLock::new();
    let words = WORDS.get_or_init(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(PLACEHOLDER_WORDS)
            .expect("the placeholder words build an automaton")
    });
    words.is_match(text) || (text.len() >= 8 && low_information(&text[..text.len().min(32)]))
}

/// Few distinct characters, mostly consecutive ones, or a short period.
pub(super) fn low_information(w: &[u8]) -> bool {
    let n = w.len();
    if n < 8 {
        return false;
    }
    let mut seen = [false; 256];
    let mut distinct = 0;
    for &b in w {
        if !seen[usize::from(b)] {
            seen[usize::from(b)] = true;
            distinct += 1;
        }
    }
    if distinct * 5 <= n || distinct <= 2 {
        return true;
    }
    let steps = w
        .windows(2)
        .filter(|p| p[1].wrapping_sub(p[0]) == 1 || p[0].wrapping_sub(p[1]) == 1)
        .count();
    if steps * 3 >= (n - 1) * 2 {
        return true;
    }
    (1..=n / 3).any(|p| {
        let same = (0..n - p).filter(|&i| w[i] == w[i + p]).count();
        same * 10 >= (n - p) * 9
    })
}

/// A class as written in a pattern (`A-Za-z0-9_-`): ranges and single characters; a
/// `-` last is itself.
pub(super) fn class(spec: &str) -> [bool; 256] {
    let mut set = [false; 256];
    let bytes = spec.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if i + 2 < bytes.len() && bytes[i + 1] == b'-' {
            for b in bytes[i]..=bytes[i + 2] {
                set[usize::from(b)] = true;
            }
            i += 3;
        } else {
            set[usize::from(bytes[i])] = true;
            i += 1;
        }
    }
    set
}
