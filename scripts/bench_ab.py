#!/usr/bin/env python3
"""Two builds of Aether side by side, in one run, alternating: a governed read over stdio
(c=1, c=16, c=16 with 200 rules, 40 of them on paths) and over HTTP (c=16; handshake era, and 2026-07-28 with `server/discover` too); a regex search and
a glob over a 2,000-file tree; an edit (c=1 and c=16), each written, journalled and fsynced. Medians of
REPS rounds; each round runs A then B, so drift hits both alike.

    scripts/bench_ab.py OLD_AETHER NEW_AETHER --mcpload PATH [--reps 5] [-n 3000] [--only edit,http]

Prints a Markdown table: calls/s for each, B/A, and p50 latency.
"""
import argparse
import json
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def mcpload(tool, args):
    out = subprocess.run([tool] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"mcpload failed: {out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["errors"]:
        raise SystemExit(f"errors in run {args}: {out.stderr}")
    return result


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listening on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--mcpload", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--only", help="comma-separated parts of case names to run (default: all)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="aether-ab-"))
    ws = work / "ws"
    (ws / "fixed").mkdir(parents=True)
    (ws / "fixed/file_4k.txt").write_text(("0123456789abcdef" * 4 + "\n") * 63)
    for i in range(2000):
        d = ws / "tree" / f"d{i % 40}"
        d.mkdir(parents=True, exist_ok=True)
        body = "".join(f"line {j} of file {i}: {'needle' if (i * 7 + j) % 97 == 0 else 'hay'}\n" for j in range(40))
        (d / f"f{i}.{'rs' if i % 3 == 0 else 'txt'}").write_text(body)
    edits = work / "edits"
    edits.mkdir()
    config = work / "aether.toml"
    config.write_text(f'[roots.ws]\npath = "{ws}"\nmode = "ro"\n[roots.ed]\npath = "{edits}"\nmode = "rw"\n'
                      '[limits]\nsearch_results = 10000\nresult_chars = 1000000\n')
    rules = work / "rules200.yaml"
    lines = ["rules:"]
    for i in range(200):
        m = [f'{{ tool: "up{i}__*" }}', f'{{ tool: read_file, path: "secret{i}/**" }}',
             f'{{ tool: "*_file", agent: [agent{i}] }}', f'{{ tool: run_shell, arg_pattern: "rm -rf /{i}" }}',
             f'{{ tool: "*", args: {{ path: "^private{i}/" }} }}'][i % 5]
        lines.append(f"  - name: r{i}\n    match: {m}\n    action: {['always_deny', 'ask_user'][i % 2]}")
    rules.write_text("\n".join(lines) + "\n")
    config_rules = work / "aether-rules.toml"
    config_rules.write_text(config.read_text() + f'[policy]\nrules = "{rules}"\n')
    read4k = '{"root":"ws","path":"fixed/file_4k.txt"}'
    store = work / "store"

    def stdio(binary, cfg):
        shutil.rmtree(store, ignore_errors=True)
        return f"{binary} mcp-serve --config {cfg} --store sqlite://{store}/aether.db"

    def http(binary, port, extra=("--tool", "read_file", "--args", read4k)):
        shutil.rmtree(store, ignore_errors=True)
        srv = subprocess.Popen([binary, "serve", "--config", str(config), "--listen", f"127.0.0.1:{port}",
                                "--store", f"sqlite://{store}/aether.db"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        wait_port(port)
        try:
            return mcpload(a.mcpload, ["--http", f"http://127.0.0.1:{port}/mcp", *extra,
                                       "-n", str(a.n * 2), "-c", "16", "--server-pid", str(srv.pid)])
        finally:
            srv.kill()
            srv.wait()

    def edit(binary, c=1):
        # Every call inserts a line before MARK (which stays unique), so every call writes.
        (edits / "e.txt").write_text("0123456789abcdef\n" * 256 + "MARK\n")
        return mcpload(a.mcpload, ["--stdio", stdio(binary, config), "--tool", "edit_file", "--args",
                                   json.dumps({"root": "ed", "path": "e.txt", "search": "MARK", "replace": "y\nMARK"}),
                                   "-n", str(max(a.n // 3, 100)), "-c", str(c)])

    cases = {
        "stdio read c1": lambda b: mcpload(a.mcpload, ["--stdio", stdio(b, config), "--tool", "read_file", "--args",
                                                       read4k, "-n", str(a.n), "-c", "1"]),
        "stdio read c16": lambda b: mcpload(a.mcpload, ["--stdio", stdio(b, config), "--tool", "read_file", "--args",
                                                        read4k, "-n", str(a.n), "-c", "16"]),
        "stdio read c16, 200 rules": lambda b: mcpload(a.mcpload, ["--stdio", stdio(b, config_rules), "--tool",
                                                                   "read_file", "--args", read4k, "-n", str(a.n),
                                                                   "-c", "16"]),
        "http read c16": lambda b: http(b, 18702),
        "http read c16, 2026-07-28": lambda b: http(b, 18703, ("--modern", "--tool", "read_file", "--args", read4k)),
        "http server/discover c16, 2026-07-28": lambda b: http(b, 18704, ("--modern", "--method", "server/discover")),
        "regex search, 2,000 files": lambda b: mcpload(a.mcpload, [
            "--stdio", stdio(b, config), "--tool", "search_files", "--args",
            '{"root":"ws","path":"tree","query":"needle [0-9]+|of file 1[0-9]{3}:","regex":true}',
            "-n", str(max(a.n // 30, 20)), "-c", "1"]),
        "glob **/*.rs, 2,000 files": lambda b: mcpload(a.mcpload, [
            "--stdio", stdio(b, config), "--tool", "glob", "--args", '{"root":"ws","pattern":"**/*.rs"}',
            "-n", str(max(a.n // 10, 50)), "-c", "1"]),
        "edit_file c1": lambda b: edit(b),
        "edit_file c16": lambda b: edit(b, 16),
    }
    if a.only:
        cases = {k: v for k, v in cases.items() if any(o in k for o in a.only.split(","))}
    results = {(case, side): [] for case in cases for side in ("old", "new")}
    for rep in range(a.reps):
        for case, run in cases.items():
            for side, binary in (("old", a.old), ("new", a.new)):
                results[(case, side)].append(run(binary))
    print("| case | old calls/s | new calls/s | new/old | old p50 ms | new p50 ms |")
    print("|---|---|---|---|---|---|")
    for case in cases:
        med = {}
        p50 = {}
        for side in ("old", "new"):
            rs = results[(case, side)]
            med[side] = statistics.median(r["calls_per_s"] for r in rs)
            p50[side] = statistics.median(r["p50_us"] for r in rs) / 1000
        print(f"| {case} | {med['old']:,.0f} | {med['new']:,.0f} | {med['new'] / med['old']:.2f} | "
              f"{p50['old']:.2f} | {p50['new']:.2f} |")
    runs = work / "runs.json"
    runs.write_text(json.dumps({f"{c}|{s}": v for (c, s), v in results.items()}))
    print(f"\nraw runs: {runs}")


if __name__ == "__main__":
    main()
