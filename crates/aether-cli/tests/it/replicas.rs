//! Two replicas of `aether serve` sharing one PostgreSQL store, driven by the official Python
//! MCP client through a load balancer without stickiness (each request to the next replica):
//! an approval given on one replica releases a call waiting on the other, a halt from one
//! stops the other, and a replica killed mid-call leaves the other serving and the audit one
//! valid chain.

use std::collections::{HashMap, HashSet};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aether_policy::canon::{canonical_json, sha256};
use serde_json::{Value, json};

use crate::federation::PySession;
use crate::util::{HttpServer, StdioServer, Ws, http, peers};

/// A schema of its own in the local PostgreSQL (`AETHER_TEST_POSTGRES`), dropped at the end.
pub(crate) struct PgSchema {
    name: String,
    pub url: String,
}

fn base() -> String {
    std::env::var("AETHER_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn psql(sql: &str) {
    let out = Command::new("psql")
        .args([&base(), "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        .output()
        .expect("psql (PostgreSQL's client; scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PgSchema {
    pub(crate) fn new(tag: &str) -> PgSchema {
        let name = format!("r_{tag}_{}", std::process::id());
        psql(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ));
        let url = format!("{}?options=-csearch_path%3D{name}", base());
        PgSchema { name, url }
    }
}

impl PgSchema {
    /// This schema's URL with the database reached through `proxy` instead.
    fn url_via(&self, proxy: &PgProxy) -> String {
        self.url.replacen(&pg_address(), &proxy.addr, 1)
    }

    /// psql's answer to `sql` in this schema, one line per row, columns split on `|`.
    fn rows(&self, sql: &str) -> Vec<Vec<String>> {
        let out = Command::new("psql")
            .args([&self.url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('|').map(String::from).collect())
            .collect()
    }
}

/// HOST:PORT of the test database.
fn pg_address() -> String {
    let base = base();
    let rest = base.split_once('@').map_or(base.as_str(), |(_, r)| r);
    let rest = rest.split_once("://").map_or(rest, |(_, r)| r);
    let host = rest.split(['/', '?']).next().unwrap_or(rest).to_string();
    if host.contains(':') {
        host
    } else {
        format!("{host}:5432")
    }
}

/// A TCP proxy in front of the test database that can play the database dying: `kill` cuts
/// every connection through it and refuses new ones (closed as soon as accepted) until
/// `revive`. The shared database itself stays up for the other tests.
struct PgProxy {
    addr: String,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl PgProxy {
    fn start() -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let up = Arc::new(AtomicBool::new(true));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (up2, open2, target) = (up.clone(), open.clone(), pg_address());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !up2.load(Ordering::SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let mut open = open2.lock().unwrap();
                open.push(client.try_clone().unwrap());
                open.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        PgProxy { addr, up, open }
    }

    fn kill(&self) {
        self.up.store(false, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn revive(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        psql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
    }
}

/// An admin API request with an operator token.
fn api(srv: &HttpServer, bearer: &str, method: &str, path: &str, body: Value) -> (u16, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let reply = http(
        &srv.addr,
        method,
        path,
        &[
            ("Host", &srv.addr),
            ("Authorization", bearer),
            ("Content-Type", "application/json"),
        ],
        &body,
    );
    (
        reply.status,
        serde_json::from_str(&reply.body).unwrap_or(Value::Null),
    )
}

fn within(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn replicas_share_approvals_halts_and_one_audit_chain() {
    let Some(peers) = peers("replicas_share_approvals_halts_and_one_audit_chain") else {
        return;
    };
    let pg = PgSchema::new("share");
    let ws = Ws::new();
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: ask-for-src\n    match: { tool: read_file, path: \"src/**\" }\n    action: ask_user\n",
    );
    let a = HttpServer::start(&ws, &["--store", &pg.url]);
    let b = HttpServer::start(&ws, &["--store", &pg.url]);
    let (code, token, err) = ws.run(&["tokens", "create", "--operator", "ops", "--store", &pg.url]);
    assert_eq!(code, 0, "{err}");
    let bearer = format!("Bearer {}", token.trim());
    // Both replicas know the token from the store at once (a notification, not a poll).
    within(
        Duration::from_secs(5),
        "the token reaches both replicas",
        || {
            api(&a, &bearer, "GET", "/api/halt", Value::Null).0 == 200
                && api(&b, &bearer, "GET", "/api/halt", Value::Null).0 == 200
        },
    );

    // One client, its requests alternating between the replicas.
    let both = format!("{},{}", a.addr, b.addr);
    let mut s = PySession::open_with(&peers, &a.url(), &[("AETHER_REPLICAS", &both)]);
    let tools: Vec<String> = serde_json::from_value(s.ok(json!({"op": "tools"}))).unwrap();
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    for _ in 0..4 {
        let r = s.ok(json!({"op": "call", "tool": "read_file", "args": {"path": "README.md"}}));
        assert_eq!(r["isError"], false, "{r}");
        assert!(text(&r).contains("# demo"), "{r}");
    }
    let sent = s.ok(json!({"op": "replicas"}));
    assert!(
        sent[&a.addr].as_u64() >= Some(2) && sent[&b.addr].as_u64() >= Some(2),
        "both replicas served the session: {sent}"
    );

    // A call held on replica A is approved through replica B.
    let mut held = PySession::open(&peers, &a.url());
    held.ok(json!({"op": "start", "tool": "read_file", "args": {"path": "src/hello.txt"}}));
    let mut id = String::new();
    within(Duration::from_secs(10), "B lists A's waiting call", || {
        let (_, rows) = api(&b, &bearer, "GET", "/api/approvals", Value::Null);
        match rows.as_array().and_then(|r| r.first()) {
            Some(row) => {
                id = row["id"].as_str().unwrap().to_string();
                true
            }
            None => false,
        }
    });
    let (status, body) = api(
        &b,
        &bearer,
        "POST",
        &format!("/api/approvals/{id}/approve"),
        json!({"why": "checked on replica b"}),
    );
    assert_eq!(status, 200, "{body}");
    let r = held.ok(json!({"op": "finish"}));
    assert_eq!(r["isError"], false, "{r}");
    assert!(text(&r).contains("hello from aether"), "{r}");

    // A halt through A stops B within a second.
    let mut on_b = PySession::open(&peers, &b.url());
    let r = on_b.ok(json!({"op": "call", "tool": "read_file", "args": {"path": "README.md"}}));
    assert_eq!(r["isError"], false, "{r}");
    let (status, body) = api(&a, &bearer, "POST", "/api/halt", json!({"why": "drill"}));
    assert_eq!(status, 200, "{body}");
    let halted_at = Instant::now();
    within(
        Duration::from_secs(1),
        "B refuses within a second of A's halt",
        || {
            let r =
                on_b.ok(json!({"op": "call", "tool": "read_file", "args": {"path": "README.md"}}));
            r["isError"] == true && text(&r).contains("halted")
        },
    );
    eprintln!(
        "halt seen on the other replica after {:?}",
        halted_at.elapsed()
    );
    let (status, body) = api(
        &b,
        &bearer,
        "POST",
        "/api/resume",
        json!({"why": "drill over"}),
    );
    assert_eq!(status, 200, "{body}");
    within(
        Duration::from_secs(1),
        "A serves again after B's resume",
        || {
            let r = s.ok(json!({"op": "call", "tool": "read_file", "args": {"path": "README.md"}}));
            r["isError"] == false
        },
    );

    // Replica A dies with a call in flight: its client gets an error, B carries on.
    let mut doomed = PySession::open(&peers, &a.url());
    doomed.ok(json!({"op": "start", "tool": "read_file", "args": {"path": "src/hello.txt"}}));
    within(Duration::from_secs(10), "the doomed call waits", || {
        let (_, rows) = api(&b, &bearer, "GET", "/api/approvals", Value::Null);
        rows.as_array().is_some_and(|r| !r.is_empty())
    });
    let mut a = a;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let reply = doomed.ask(json!({"op": "finish"}));
    assert!(reply.get("error").is_some(), "{reply}");
    let r = on_b.ok(json!({"op": "call", "tool": "read_file", "args": {"path": "README.md"}}));
    assert_eq!(r["isError"], false, "{r}");

    // Both replicas wrote one chain, every receipt with its audit row.
    drop(b);
    let (code, out, err) = ws.run(&["audit", "verify", "--store", &pg.url]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("audit chain intact"), "{out}");
    let (code, out, _) = ws.run(&["audit", "tail", "-n", "100", "--json", "--store", &pg.url]);
    assert_eq!(code, 0);
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        rows.iter()
            .filter(|r| r["tool"] == "read_file" && r["outcome"] == "ok")
            .count()
            >= 7,
        "{out}"
    );
}

#[test]
fn a_session_stays_with_its_agent_on_every_replica() {
    let pg = PgSchema::new("bind");
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        &format!(
            "[store]\nurl = \"{}\"\n[server]\nhttp_agent = \"alice\"\n[agents.alice]\nmcp_servers = [\"workspace\"]\n[agents.mallory]\nmcp_servers = [\"workspace\"]\n",
            pg.url
        ),
    );
    let a = HttpServer::start(&ws, &[]);
    let b = HttpServer::start(&ws, &[]);
    let token = |agent: &str| {
        let (code, out, err) = ws.run(&["tokens", "create", "--agent", agent]);
        assert_eq!(code, 0, "{err}");
        out.trim().to_string()
    };
    let (alice, mallory) = (token("alice"), token("mallory"));
    let post = |srv: &HttpServer, bearer: &str, session: Option<&str>, body: &str| {
        let bearer = format!("Bearer {bearer}");
        let mut headers = vec![
            ("Host", srv.addr.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", bearer.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        if let Some(id) = session {
            headers.push(("Mcp-Session-Id", id));
        }
        http(&srv.addr, "POST", "/mcp", &headers, body.as_bytes())
    };
    let mut init = crate::util::HttpReply {
        status: 0,
        head: String::new(),
        body: String::new(),
    };
    within(Duration::from_secs(5), "A knows alice's token", || {
        init = post(&a, &alice, None, crate::util::INIT);
        init.status == 200
    });
    let id = init
        .head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id"))
                .map(|(_, v)| v.trim().to_string())
        })
        .expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(&a, &alice, Some(&id), initialized).status, 202);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    // Alice's session answers alice on the other replica (resumed from the store) ...
    within(Duration::from_secs(5), "B knows alice's token", || {
        post(&b, &alice, Some(&id), list).status == 200
    });
    let r = post(&b, &alice, Some(&id), list);
    assert!(r.body.contains("read_file"), "{}", r.body);
    // ... and nobody else, on either replica.
    for srv in [&a, &b] {
        let r = post(srv, &mallory, Some(&id), list);
        assert_eq!(r.status, 403, "{}", r.body);
        assert!(r.body.contains("belongs to another agent"), "{}", r.body);
    }
    // A session id nobody issued is unknown everywhere.
    let r = post(
        &b,
        &alice,
        Some("00000000-0000-0000-0000-000000000000"),
        list,
    );
    assert_eq!(r.status, 404, "{}", r.body);
    // It is one session on both: what A wrote in it, B's revert_file (which undoes this
    // session's changes) takes back.
    let write = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"note.txt","content":"from A\n"}}}"#;
    let r = post(&a, &alice, Some(&id), write);
    assert!(
        r.body.contains("note.txt") && !r.body.contains("\"isError\":true"),
        "{}",
        r.body
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("note.txt")).unwrap(),
        "from A\n"
    );
    let revert = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"revert_file","arguments":{"path":"note.txt"}}}"#;
    let r = post(&b, &alice, Some(&id), revert);
    assert!(!r.body.contains("\"isError\":true"), "{}", r.body);
    assert!(!ws.path().join("note.txt").exists(), "{}", r.body);
    // A 2026-07-28 request stands alone: naming the session's id in a header does not make
    // it act in that session (its revert_file finds none of the session's changes).
    let write = write.replace("note.txt", "kept.txt");
    assert_eq!(post(&a, &alice, Some(&id), &write).status, 200);
    let modern = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"revert_file","arguments":{"path":"kept.txt"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let bearer = format!("Bearer {alice}");
    let headers = [
        ("Host", b.addr.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", bearer.as_str()),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "revert_file"),
        ("Mcp-Session-Id", id.as_str()),
    ];
    let r = http(&b.addr, "POST", "/mcp", &headers, modern.as_bytes());
    assert!(ws.path().join("kept.txt").exists(), "{}{}", r.head, r.body);
}

#[test]
fn a_database_killed_mid_load_runs_nothing_unreceipted_and_reports_nothing_unaudited() {
    let pg = PgSchema::new("cut");
    let proxy = PgProxy::start();
    let ws = Ws::new();
    ws.write("out/.keep", "");
    let root = format!("{}:rw", ws.root_arg());
    let mut s = StdioServer::spawn_root(&ws, &root, &["--store", &pg.url_via(&proxy)]);
    let init = s.initialize("2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "aether", "{init}");
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    // A steady stream of writes, each to a file of its own; the database dies a third of
    // the way through and comes back at two thirds.
    const CALLS: i64 = 240;
    let args = |i: i64| json!({"path": format!("out/{i}.txt"), "content": format!("call {i}\n")});
    for i in 1..=CALLS {
        if i == CALLS / 3 {
            proxy.kill();
        }
        if i == 2 * CALLS / 3 {
            proxy.revive();
        }
        let req = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                         "params": {"name": "write_file", "arguments": args(i)}});
        s.send_raw(&req.to_string());
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut replies = HashMap::new();
    while replies.len() < CALLS as usize {
        let m = s.next_message();
        if let Some(id) = m["id"].as_i64() {
            replies.insert(id, m);
        }
    }

    let receipts: HashMap<String, String> = pg
        .rows("SELECT arguments, call_id FROM receipts WHERE tool = 'write_file'")
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    let (mut ok, mut refused, mut ran_unrecorded) = (Vec::new(), 0, 0);
    for i in 1..=CALLS {
        let r = &replies[&i];
        let file = ws.path().join(format!("out/{i}.txt"));
        let digest = sha256(canonical_json(&args(i)).as_bytes()).to_string();
        // No call ran without a receipt.
        if file.exists() {
            assert!(
                receipts.contains_key(&digest),
                "out/{i}.txt was written without a receipt"
            );
        }
        if r["result"]["isError"] == false {
            ok.push((
                i,
                r["result"]["_meta"]["aether/callId"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ));
            continue;
        }
        let text = r["result"]["content"][0]["text"]
            .as_str()
            .or(r["error"]["message"].as_str())
            .unwrap_or_default()
            .to_string();
        if text.contains("did not run") {
            refused += 1;
            assert!(!file.exists(), "call {i} was refused but ran: {text}");
        } else {
            assert!(
                text.contains("audit row could not be written"),
                "call {i}: {r}"
            );
            ran_unrecorded += 1;
        }
    }
    let before = ok.iter().filter(|(i, _)| *i < CALLS / 3).count();
    let after = ok.iter().filter(|(i, _)| *i > 2 * CALLS / 3 + 20).count();
    eprintln!(
        "{} ok ({before} before the cut, {after} well after), {refused} refused unreceipted, {ran_unrecorded} ran with the audit late",
        ok.len()
    );
    assert!(
        before > 0 && after > 0 && refused > 0,
        "the load straddled the outage"
    );

    // No reported success lacks its receipt and its audit row.
    let audited: HashMap<String, String> = pg
        .rows("SELECT call_id, outcome FROM audit WHERE tool = 'write_file'")
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    let receipted: HashSet<&String> = receipts.values().collect();
    for (i, id) in &ok {
        assert!(
            receipted.contains(id),
            "call {i} ({id}) succeeded without a receipt"
        );
        assert_eq!(
            audited.get(id).map(String::as_str),
            Some("ok"),
            "call {i} ({id}) succeeded without its audit row"
        );
    }

    // Rows the outage held back are written once the database is back: every receipt gets
    // its audit row, and the chain is one valid chain.
    let unaudited = "SELECT count(*) FROM receipts r WHERE NOT EXISTS \
                     (SELECT 1 FROM audit a WHERE a.call_id = r.call_id)";
    within(
        Duration::from_secs(30),
        "every receipt audited after the outage",
        || pg.rows(unaudited)[0][0] == "0",
    );
    let late = pg.rows("SELECT count(*) FROM audit WHERE reason LIKE '%audited late%'");
    eprintln!("{} audit rows written late", late[0][0]);
    assert!(
        late[0][0].parse::<usize>().unwrap() >= ran_unrecorded,
        "each call that ran unrecorded is audited late"
    );
    let (code, out, err) = ws.run(&["audit", "verify", "--store", &pg.url]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("audit chain intact"), "{out}");
}

/// The CPU time (user + system) a process has used, from `/proc/PID/stat`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// An idle replica on PostgreSQL waits for notifications; it does not spin (its change
/// listener once armed its one-second wait only once, then returned at once forever).
#[test]
fn an_idle_replica_on_postgresql_stays_near_zero_cpu() {
    let pg = PgSchema::new("idle");
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--store", &pg.url]);
    // Past start-up, and past the listener's first quiet second.
    std::thread::sleep(Duration::from_secs(3));
    let before = cpu_ticks(srv.child.id());
    let window = Duration::from_secs(4);
    std::thread::sleep(window);
    let used = cpu_ticks(srv.child.id()) - before;
    // Clock ticks are 1/100 s here: 40 ticks would be 10 % of one core; a spinning listener
    // uses about 400.
    assert!(
        used <= 40,
        "an idle replica used {used} ticks of CPU in {window:?}"
    );
}

/// Two replicas behind a balancer without stickiness, serving a client of MCP 2026-07-28:
/// there is no session to share, so each request (the tool list, a call, the call made again
/// with its user's approval) may land on either replica. The approval asked by one replica
/// is settled by the other: the round's state is sealed under a key both derive from the
/// vault key, and the request it names is in the store they share.
#[test]
fn replicas_serve_2026_07_28_clients_with_no_shared_session() {
    let Some(peers) = peers("replicas_serve_2026_07_28_clients") else {
        return;
    };
    let pg = PgSchema::new("modern");
    let (ws, config) = crate::modern::elicit_agent_ws();
    let a = HttpServer::start(&ws, &["--config", &config, "--store", &pg.url]);
    let b = HttpServer::start(&ws, &["--config", &config, "--store", &pg.url]);
    let both = format!("{},{}", a.addr, b.addr);
    for (path, asked) in [("README.md", false), ("src/hello.txt", true)] {
        let args = format!(r#"{{"path":"{path}"}}"#);
        let report = crate::modern::modern_report(
            &peers,
            &["2026-07-28", "call", "read_file", &args, &a.url()],
            &[("AETHER_REPLICAS", &both), ("AETHER_ELICIT", "approve")],
            0,
        );
        assert_eq!(report["protocolVersion"], "2026-07-28", "{report}");
        assert_eq!(report["result"]["isError"], false, "{report}");
        assert_eq!(
            report["elicited"].as_array().unwrap().is_empty(),
            !asked,
            "{report}"
        );
        // Every request went to the next replica: both served this client.
        let sent = &report["replicas"];
        assert!(
            sent[&a.addr].as_u64() >= Some(1) && sent[&b.addr].as_u64() >= Some(1),
            "{path}: {sent}"
        );
    }
    let (_, out, _) = ws.run(&["approvals", "list", "--all", "--json", "--store", &pg.url]);
    let rows: Vec<Value> = crate::util::json_lines(&out);
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(rows[0]["state"], "approved", "{out}");
    assert_eq!(
        rows[0]["decided_by"], "client-user (input required)",
        "{out}"
    );
    let (code, out, err) = ws.run(&["audit", "verify", "--store", &pg.url]);
    assert_eq!(code, 0, "{out}{err}");
}

/// An agent's rate is one budget for every replica: calls one replica admitted count on the
/// other once they have shared their counts (every 200 ms).
#[test]
fn replicas_share_an_agents_rate_limit() {
    let pg = PgSchema::new("rates");
    let ws = Ws::new();
    ws.write(
        "rates.toml",
        r#"[server]
http_agent = "limited"

[roots.ws]
path = "."

[agents.limited]
mcp_servers = ["workspace"]
rate = "10/day"
"#,
    );
    let config = ws.path().join("rates.toml").display().to_string();
    let a = HttpServer::start(&ws, &["--config", &config, "--store", &pg.url]);
    let b = HttpServer::start(&ws, &["--config", &config, "--store", &pg.url]);
    let read = |srv: &HttpServer, id: i64| {
        let (status, answer) = crate::modern::call_2026(
            &srv.addr,
            id,
            json!({"name": "read_file", "arguments": {"path": "src/hello.txt"}}),
            &[],
        );
        assert_eq!(status, 200, "{answer}");
        let result = &answer["result"];
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // A refusal of the rate says, for a client to wait on, when to try again.
        if result["isError"] == true {
            let wait = result["_meta"]["aether/retryAfterSeconds"].as_u64();
            assert!(wait.is_some_and(|s| (1..=86_400).contains(&s)), "{answer}");
        }
        (result["isError"] == true, text)
    };
    // A day's window: clear of midnight UTC, so that none ends while the test runs.
    let day = 86_400_000_000;
    let left = day - aether_store::now_us().rem_euclid(day);
    if left < 60_000_000 {
        std::thread::sleep(Duration::from_micros(left as u64 + 100_000));
    }
    // What the replicas have shared through the store so far.
    let shared = || -> i64 {
        let out = Command::new("psql")
            .args([
                &base(),
                "-tAc",
                &format!(
                    "SELECT coalesce(sum(calls), 0) FROM {}.rate_counts WHERE window_start >= 0",
                    pg.name
                ),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(-1)
    };
    let until_shared = |n: i64| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while shared() != n {
            assert!(Instant::now() < deadline, "{} shared, not {n}", shared());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    for id in 0..6 {
        let (refused, text) = read(&a, id);
        assert!(!refused, "{text}");
    }
    // b reads what a counted before its first call in the window.
    until_shared(6);
    let mut admitted = 0;
    let mut refusal = String::new();
    for id in 10..20 {
        let (refused, text) = read(&b, id);
        if refused {
            refusal = text;
            break;
        }
        admitted += 1;
    }
    assert_eq!(
        admitted, 4,
        "replica b admitted {admitted} of the 4 left: {refusal}"
    );
    assert!(
        refusal.contains("10/day") && refusal.contains("try again in"),
        "{refusal}"
    );
    // And a, in turn, has none left once it has heard from b (every 200 ms).
    until_shared(10);
    std::thread::sleep(Duration::from_millis(1_000));
    let (refused, text) = read(&a, 30);
    assert!(refused, "{text}");
    let (code, out, err) = ws.run(&["audit", "verify", "--store", &pg.url]);
    assert_eq!(code, 0, "{out}{err}");
}
