#!/usr/bin/env python3
"""Many MCP sessions against one `aether serve`: what each idle session costs in memory, and
what a well-behaved client's calls take while they are opened and once they sit idle.

usage: scripts/bench_sessions.py [--sessions 3000] [--calls 2000] [--reps 3]
                                 [--sleep-after S] [--shared ../shared/tools]

Per rep: a fresh store and server (release build); a good client's baseline (mcpload, c=1,
read_file 4 KiB, its own session); then SESSIONS sessions are opened (initialize, eight at
a time, each its own HTTP exchange) while the good client runs again; then the good client
once more with the sessions idle. With --sleep-after S the server lets an idle session's
worker go after S seconds (`[server] session_sleep_seconds`): the script waits for that, then
opens SESSIONS more three times, each batch left to fall asleep before the next; the RSS
after each batch asleep shows what sleeping sessions cost (the allocator keeps the pages the
first batch's workers freed and hands them to the next batch, so the growth from the second
batch to the fourth, over 2 x SESSIONS, is what one sleeping session costs); then it wakes
200 of the first batch with a `tools/list` each, timing those requests. Prints one JSON line per rep and the medians; RSS is the server's VmRSS.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}})


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def wait_port(port, timeout=20):
    import socket
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listening on {port}")


def open_sessions(port, n, threads=8, ids=None):
    """Opens n sessions (initialize, then notifications/initialized); returns how many, their
    ids appended to `ids`."""
    opened = []
    lock = threading.Lock()
    per = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]

    def work(count):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        done = 0
        for _ in range(count):
            conn.request("POST", "/mcp", INIT, headers)
            r = conn.getresponse()
            sid = r.getheader("mcp-session-id")
            r.read()
            if r.status != 200 or not sid:
                continue
            h = dict(headers, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
            conn.request("POST", "/mcp", '{"jsonrpc":"2.0","method":"notifications/initialized"}', h)
            conn.getresponse().read()
            done += 1
            if ids is not None:
                with lock:
                    ids.append(sid)
        with lock:
            opened.append(done)

    ts = [threading.Thread(target=work, args=(c,)) for c in per]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(opened)


def wake(port, ids):
    """One tools/list in each session of `ids`, one after another; each request's time (ms)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for i, sid in enumerate(ids):
        headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid,
                   "MCP-Protocol-Version": "2025-11-25"}
        started = time.perf_counter()
        conn.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": i + 10, "method": "tools/list"}), headers)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200 or b"read_file" not in body:
            raise SystemExit(f"a woken session answered {r.status}: {body[:200]!r}")
        times.append((time.perf_counter() - started) * 1000)
    return times


def good_client(mcpload, port, calls, pid):
    out = subprocess.run([str(mcpload), "--http", f"http://127.0.0.1:{port}/mcp", "--tool", "read_file",
                          "--args", '{"path":"file_4k.txt"}', "-n", str(calls), "-c", "1", "--server-pid", str(pid)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"mcpload failed: {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=3000)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sleep-after", type=int, default=0)
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "tools"))
    a = ap.parse_args()
    shared = Path(a.shared)
    tools_target = ROOT / "target" / "tools"
    subprocess.run(["cargo", "build", "--release", "-q", "--manifest-path", str(shared / "mcpload" / "Cargo.toml"),
                    "--target-dir", str(tools_target)], check=True)
    subprocess.run(["cargo", "build", "--release", "-q", "--bin", "aether"], cwd=ROOT, check=True)
    aether, mcpload = ROOT / "target/release/aether", tools_target / "release/mcpload"
    rows = []
    for rep in range(a.reps):
        work = Path(tempfile.mkdtemp(prefix="aether-sessions-"))
        (work / "file_4k.txt").write_text("x" * 4095 + "\n")
        # Room for every session under the one caller (no tokens: the loopback caller), four
        # batches of them when they sleep.
        room = a.sessions * (4 if a.sleep_after else 1) + 100
        (work / "aether.toml").write_text(
            f'[roots.ws]\npath = "."\n[server]\nmax_sessions = {room}\n'
            f'max_sessions_per_caller = {room}\n'
            + (f'session_sleep_seconds = {a.sleep_after}\n' if a.sleep_after else ''))
        port = 18600 + rep
        server = subprocess.Popen([str(aether), "serve", "--listen", f"127.0.0.1:{port}"], cwd=work,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            good_client(mcpload, port, 200, server.pid)  # warm-up
            before = rss_kib(server.pid)
            base = good_client(mcpload, port, a.calls, server.pid)
            started = time.time()
            result = {}
            ids = []
            flood = threading.Thread(target=lambda: result.update(opened=open_sessions(port, a.sessions, ids=ids)))
            flood.start()
            during = good_client(mcpload, port, a.calls, server.pid)
            flood.join()
            open_s = time.time() - started
            time.sleep(1)
            after = rss_kib(server.pid)
            idle = good_client(mcpload, port, a.calls, server.pid)
            row = {
                "sessions": result.get("opened", 0),
                "open_s": round(open_s, 1),
                "rss_before_mib": round(before / 1024, 1),
                "rss_after_mib": round(after / 1024, 1),
                "kib_per_session": round((after - before) / max(1, result.get("opened", 1)), 1),
                "p50_ms_base": base["p50_us"] / 1000, "p99_ms_base": base["p99_us"] / 1000,
                "p50_ms_during": during["p50_us"] / 1000, "p99_ms_during": during["p99_us"] / 1000,
                "p50_ms_idle": idle["p50_us"] / 1000, "p99_ms_idle": idle["p99_us"] / 1000,
            }
            if a.sleep_after:
                # Past the idle time, and a sweep (every half of it, at most 30 s) past that.
                settle = a.sleep_after + min(30, max(1, a.sleep_after / 2)) + 2
                time.sleep(settle)
                asleep = [rss_kib(server.pid)]
                opened = 0
                for batch in range(3):
                    more = open_sessions(port, a.sessions)
                    if batch > 0:
                        opened += more
                    time.sleep(settle)
                    asleep.append(rss_kib(server.pid))
                woke = wake(port, ids[:200])
                row.update({
                    "rss_asleep_mib": [round(r / 1024, 1) for r in asleep],
                    "kib_per_session_asleep": round((asleep[3] - asleep[1]) / max(1, opened), 1),
                    "wake_p50_ms": round(statistics.median(woke), 2),
                    "wake_max_ms": round(max(woke), 2),
                })
            print(json.dumps(row), flush=True)
            rows.append(row)
        finally:
            server.terminate()
            server.wait()
            shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if not isinstance(rows[0][k], list)}
    print("medians:", json.dumps(med))


if __name__ == "__main__":
    main()
