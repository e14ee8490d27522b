//! The floor of Aether's stdio design without Aether: an MCP server on the same SDK (rmcp),
//! runtime (tokio, one thread) and stdio (the pipes read and written on the runtime), whose one
//! tool reads a file and answers its text, as `read_file` does, and nothing else — no
//! pipeline, no audit. With `--flush FILE`, each call also makes one durable record before it
//! answers: about 400 bytes written into FILE and `fdatasync`ed by one flusher thread that
//! takes every record queued meanwhile in the same flush (a group commit), which is what a
//! side-effect-free call's one record costs at the least. `scripts/bench.py --only floors`
//! drives it with `mcpload` beside the official filesystem server and Aether.
//!
//! With `--http ADDR` it serves the same tool over HTTP instead, as `aether serve` does: rmcp's
//! `StreamableHttpService` under axum on tokio's multi-thread runtime, each request served
//! without a session and answered with JSON (what a 2026-07-28 request gets). `scripts/bench.py
//! --only modern` drives it beside Aether's HTTP listener: the floor of Aether's HTTP design.
//!
//! usage: rmcp_floor FILE_TO_READ [--flush FILE] [--http ADDR]

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::mpsc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    InitializeResult, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use tokio::sync::oneshot;

/// One record's place in the flush file: records are written over a ring of this many bytes
/// (as SQLite reuses its write-ahead log), so the file's size does not change per flush.
const RING: u64 = 4 << 20;
const RECORD: usize = 400;

#[derive(Clone)]
struct Floor {
    read: std::path::PathBuf,
    flusher: Option<mpsc::Sender<oneshot::Sender<()>>>,
}

impl ServerHandler for Floor {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = std::fs::read_to_string(&self.read)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        if let Some(flusher) = &self.flusher {
            let (done, flushed) = oneshot::channel();
            flusher
                .send(done)
                .map_err(|_| ErrorData::internal_error("the flusher is gone", None))?;
            flushed
                .await
                .map_err(|_| ErrorData::internal_error("the flush failed", None))?;
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The flusher: every record queued while the last flush ran goes in the next one.
fn flusher(path: &std::path::Path) -> mpsc::Sender<oneshot::Sender<()>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("the flush file opens");
    file.set_len(RING).expect("the flush file is sized");
    file.sync_all().expect("the flush file is synced");
    let (tx, rx) = mpsc::channel::<oneshot::Sender<()>>();
    std::thread::spawn(move || {
        let mut at = 0u64;
        let mut batch = Vec::new();
        while let Ok(first) = rx.recv() {
            batch.push(first);
            batch.extend(rx.try_iter());
            let mut bytes = Vec::with_capacity(batch.len() * RECORD);
            for _ in &batch {
                bytes.extend(std::iter::repeat_n(b'r', RECORD - 1));
                bytes.push(b'\n');
            }
            if at + bytes.len() as u64 > RING {
                at = 0;
            }
            file.write_all_at(&bytes, at).expect("a record is written");
            file.sync_data().expect("a record is flushed");
            at += bytes.len() as u64;
            for done in batch.drain(..) {
                let _ = done.send(());
            }
        }
    });
    tx
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: rmcp_floor FILE_TO_READ [--flush FILE] [--http ADDR]");
        std::process::exit(2);
    };
    let Some((read, mut rest)) = args.split_first() else {
        usage()
    };
    let (mut flush, mut http) = (None, None);
    while let [flag, value, more @ ..] = rest {
        match flag.as_str() {
            "--flush" => flush = Some(value.clone()),
            "--http" => http = Some(value.clone()),
            _ => usage(),
        }
        rest = more;
    }
    if !rest.is_empty() {
        usage()
    }
    let floor = Floor {
        read: read.into(),
        flusher: flush.map(|f| flusher(std::path::Path::new(&f))),
    };
    match http {
        Some(addr) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("the runtime starts")
            .block_on(serve_http(floor, &addr)),
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the runtime starts")
            .block_on(serve_stdio(floor)),
    }
}

async fn serve_stdio(floor: Floor) {
    // stdin and stdout as pipes read and written on the runtime, as Aether's stdio session.
    let pipe = |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().expect("a copy of the fd");
    let input = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe(std::io::stdin().as_fd()))
        .expect("stdin is a pipe");
    let output = tokio::net::unix::pipe::Sender::from_owned_fd(pipe(std::io::stdout().as_fd()))
        .expect("stdout is a pipe");
    let running = floor
        .serve((input, output))
        .await
        .expect("the session starts");
    let _ = running.waiting().await;
    let _ = std::io::stderr().flush();
}

async fn serve_http(floor: Floor, addr: &str) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let service = StreamableHttpService::new(
        move || Ok(floor.clone()),
        std::sync::Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the address is free");
    axum::serve(listener, app).await.expect("the server runs");
}
