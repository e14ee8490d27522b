// The credential families the screen must find, as templates for real-shaped samples: each
// `{class:n}` is n random characters of the class. Shared (by `include!`) between the unit
// tests in `src/dlp/tests.rs` and the integration tests in `tests/it/dlp.rs`.
//
// Classes: `an` letters and digits, `AN` upper case and digits, `al` letters, `hex` and `HEX`,
// `ah` a-h and digits, `d` digits, `b64` base64, `url` base64url, `age` bech32 upper case.

/// Each rule with templates of what it must find.
const FAMILIES: &[(&str, &[&str])] = &[
    (
        "dlp:private-key",
        &[
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA{b64:40}",
            "-----BEGIN PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        ],
    ),
    ("dlp:aws-access-key", &["AKIA{AN:16}", "ASIA{AN:16}"]),
    (
        "dlp:aws-secret-key",
        &["aws_secret_access_key = {b64:40}", "AWS_SECRET_ACCESS_KEY={b64:40}"],
    ),
    ("dlp:cloud-secret-key", &["{b64:40}", "{an:40}"]),
    ("dlp:datadog-key", &["DD_API_KEY={hex:32}", "DD-APPLICATION-KEY: {hex:40}"]),
    ("dlp:google-api-key", &["AIza{url:35}"]),
    ("dlp:google-oauth-token", &["ya29.{url:60}"]),
    (
        "dlp:github-token",
        &["ghp_{an:36}", "gho_{an:36}", "ghs_{an:36}", "github_pat_11{AN:20}_{an:59}"],
    ),
    ("dlp:aether-token", &["aether_{url:43}"]),
    (
        "dlp:gitlab-token",
        &[
            "glpat-{url:20}",
            "glrt-{url:20}",
            "gldt-{url:20}",
            "glptt-{hex:40}",
            "GR1348941{url:20}",
            "glcbt-{an:3}_{url:20}",
            "gloas-{url:64}",
        ],
    ),
    ("dlp:slack-webhook", &["https://hooks.slack.com/services/T{AN:8}/B{AN:8}/{an:24}"]),
    (
        "dlp:slack-token",
        &["xoxb-{d:12}-{d:13}-{an:24}", "xoxp-{d:12}-{d:12}-{d:13}-{hex:32}", "xapp-1-A{AN:10}-{d:13}-{hex:64}"],
    ),
    ("dlp:anthropic-key", &["sk-ant-api03-{url:93}AA"]),
    ("dlp:openai-key", &["sk-proj-{url:74}T3BlbkFJ{url:74}", "sk-{an:20}T3BlbkFJ{an:20}"]),
    ("dlp:ai-provider-key", &["gsk_{an:52}", "xai-{an:80}", "r8_{an:37}", "pplx-{an:48}"]),
    ("dlp:stripe-key", &["sk_live_{an:24}", "sk_test_{an:99}", "rk_live_{an:24}", "whsec_{an:32}"]),
    ("dlp:square-token", &["sq0atp-{url:22}", "sq0csp-{url:43}", "EAAA{url:60}"]),
    ("dlp:shopify-token", &["shpat_{hex:32}", "shpss_{hex:32}"]),
    ("dlp:npm-token", &["npm_{an:36}"]),
    ("dlp:pypi-token", &["pypi-AgEIcHlwaS5vcmc{url:70}"]),
    ("dlp:docker-token", &["dckr_pat_{url:27}"]),
    ("dlp:huggingface-token", &["hf_{al:34}", "api_org_{al:34}"]),
    ("dlp:sendgrid-key", &["SG.{url:22}.{url:43}"]),
    ("dlp:sendinblue-key", &["xkeysib-{hex:64}-{an:16}"]),
    ("dlp:twilio-key", &["SK{hex:32}"]),
    ("dlp:mailgun-key", &["key-{hex:32}", "pubkey-{hex:32}"]),
    ("dlp:mailchimp-key", &["{hex:32}-us12"]),
    ("dlp:databricks-token", &["dapi{hex:32}"]),
    (
        "dlp:azure-key",
        &[
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={b64:86}==;EndpointSuffix=core.windows.net",
            "{an:3}{d:1}Q~{an:34}",
        ],
    ),
    ("dlp:alibaba-key", &["LTAI{an:20}"]),
    ("dlp:digitalocean-token", &["dop_v1_{hex:64}", "doo_v1_{hex:64}"]),
    ("dlp:heroku-key", &["HRKU-AA{url:58}"]),
    ("dlp:doppler-token", &["dp.pt.{an:43}", "dp.st.{an:43}"]),
    ("dlp:pulumi-token", &["pul-{hex:40}"]),
    ("dlp:vault-token", &["hvs.{url:95}", "hvb.{url:140}"]),
    ("dlp:grafana-token", &["glc_{b64:80}", "glsa_{an:32}_{hex:8}"]),
    ("dlp:atlassian-token", &["ATATT3{an:186}", "ATBB{an:32}"]),
    ("dlp:linear-key", &["lin_api_{an:40}"]),
    ("dlp:notion-token", &["ntn_{d:11}{an:35}", "secret_{an:43}"]),
    ("dlp:postman-key", &["PMAK-{hex:24}-{hex:34}"]),
    ("dlp:sentry-token", &["sntryu_{hex:64}"]),
    ("dlp:new-relic-key", &["NRAK-{AN:27}", "NRJS-{hex:19}"]),
    ("dlp:discord-webhook", &["https://discord.com/api/webhooks/{d:18}/{url:68}"]),
    (
        "dlp:telegram-bot-token",
        &["{d:10}:AA{url:33}", "https://api.telegram.org/bot{d:9}:AA{url:33}/getMe"],
    ),
    ("dlp:age-secret-key", &["AGE-SECRET-KEY-1{age:58}"]),
    ("dlp:1password-token", &["ops_eyJ{b64:250}"]),
    ("dlp:artifactory-key", &["AKCp{an:69}"]),
    ("dlp:ci-token", &["bkua_{hex:40}", "CCIPAT_{an:22}_{hex:40}"]),
    ("dlp:dynatrace-token", &["dt0c01.{AN:24}.{AN:64}"]),
    ("dlp:easypost-key", &["EZAK{an:54}"]),
    ("dlp:flutterwave-key", &["FLWSECK_TEST-{ah:32}-X"]),
    ("dlp:flyio-token", &["fo1_{url:43}"]),
    ("dlp:mapbox-token", &["sk.eyJ{url:60}.{url:22}"]),
    ("dlp:openshift-token", &["sha256~{url:43}"]),
    ("dlp:planetscale-token", &["pscale_tkn_{url:43}"]),
    ("dlp:prefect-key", &["pnu_{an:36}"]),
    ("dlp:rubygems-key", &["rubygems_{hex:48}"]),
    ("dlp:shippo-key", &["shippo_live_{hex:40}"]),
    ("dlp:sourcegraph-token", &["sgp_{hex:16}_{hex:40}"]),
    ("dlp:terraform-token", &["{an:14}.atlasv1.{url:67}"]),
    ("dlp:typeform-token", &["tfp_{url:59}"]),
    (
        "dlp:jwt",
        &[
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.{url:43}",
            "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2lkLmV4YW1wbGUuY29tIiwic3ViIjoiNDIifQ.{url:86}",
        ],
    ),
];

/// A sample of `template`, its random parts drawn from `seed`.
fn generate(template: &str, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open + rest[open..].find('}').expect("a closed placeholder");
        let (class, n) = rest[open + 1..close].split_once(':').expect("class:n");
        let n: usize = n.parse().expect("a count");
        let alphabet: &str = match class {
            "an" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            "AN" => "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            "al" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            "hex" => "0123456789abcdef",
            "HEX" => "0123456789ABCDEF",
            "ah" => "0123456789abcdefgh",
            "d" => "0123456789",
            "b64" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            "url" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
            "age" => "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
            other => panic!("unknown class {other}"),
        };
        let alphabet = alphabet.as_bytes();
        for _ in 0..n {
            out.push(char::from(alphabet[(next() % alphabet.len() as u64) as usize]));
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `per` samples of every template of every family.
fn family_samples(per: u64) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (f, (rule, templates)) in FAMILIES.iter().enumerate() {
        for (t, template) in templates.iter().enumerate() {
            for k in 0..per {
                out.push((*rule, generate(template, (f as u64) << 20 | (t as u64) << 10 | k)));
            }
        }
    }
    out
}
