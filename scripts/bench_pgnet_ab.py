#!/usr/bin/env python3
"""Two builds of Aether side by side on PostgreSQL across a network: a TCP proxy
(examples/delay_proxy.rs) adds DELAY microseconds each way between Aether and the database;
each build serves a governed read_file of 4 KiB over HTTP at c=16, with its store's debug log
on, so each writer lane's group commit time is read from the log as well. Rounds alternate A
then B, so drift hits both alike; medians of ROUNDS.

    scripts/bench_pgnet_ab.py OLD_AETHER NEW_AETHER --mcpload PATH [--rounds 4] [-n 8000]
        [--delay-us 1000] [--postgres URL]

Needs the bench tree of `scripts/bench.py` (target/bench/ws) and its delay proxy
(`cargo build --release -p aether-store --example delay_proxy`). Prints a Markdown table.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ_4K = '{"root":"ws","path":"fixed/file_4k.txt"}'
PORT = 18630


def wait_port(port):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def one_run(aether, url, mcpload, n, log_path):
    """Serves from `aether` on `url`, runs the load; returns the load's figures and the lane
    commits' times (µs) from the log."""
    config = ROOT / "target/bench/aether.toml"
    env = dict(os.environ, RUST_LOG="aether_store=debug", NO_COLOR="1")
    with open(log_path, "w") as log:
        srv = subprocess.Popen([aether, "serve", "--config", str(config), "--listen",
                                f"127.0.0.1:{PORT}", "--store", url],
                               stdout=subprocess.DEVNULL, stderr=log, env=env)
        try:
            wait_port(PORT)
            out = subprocess.run([mcpload, "--http", f"http://127.0.0.1:{PORT}/mcp", "--tool",
                                  "read_file", "--args", READ_4K, "-n", str(n), "-c", "16"],
                                 capture_output=True, text=True)
        finally:
            srv.kill()
            srv.wait()
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["errors"]:
        raise SystemExit(f"errors in a run of {aether}: {out.stderr}")
    commits = []
    with open(log_path) as log:
        for line in log:
            # A lane's chain is the writer's id and the lane's number.
            if "group commit" in line and re.search(r'chain="?\S*/\d', line):
                m = re.search(r"\bus=(\d+)", line)
                if m:
                    commits.append(int(m.group(1)))
    return result, commits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--mcpload", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("-n", type=int, default=8000)
    ap.add_argument("--delay-us", type=int, default=1000)
    ap.add_argument("--postgres", default=os.environ.get(
        "AETHER_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test"))
    a = ap.parse_args()
    if not (ROOT / "target/bench/aether.toml").exists():
        raise SystemExit("run scripts/bench.py once first: it makes target/bench")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "aether-store", "--example",
                    "delay_proxy"], cwd=ROOT, check=True)
    host = a.postgres.split("@", 1)[1].split("/", 1)[0]
    proxy = subprocess.Popen([str(ROOT / "target/release/examples/delay_proxy"),
                              "127.0.0.1:15432", host, str(a.delay_us)])
    time.sleep(0.3)
    url = a.postgres.replace(host, "127.0.0.1:15432") + "?options=-csearch_path%3Dbench_ab"
    figures = {"old": [], "new": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(a.rounds):
                for label, aether in (("old", a.old), ("new", a.new)):
                    subprocess.run(["psql", a.postgres, "-q", "-c",
                                    "DROP SCHEMA IF EXISTS bench_ab CASCADE; CREATE SCHEMA bench_ab"],
                                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    result, commits = one_run(aether, url, a.mcpload, a.n,
                                              Path(tmp) / f"{label}{r}.log")
                    row = {"build": label, "round": r, "calls_per_s": result["calls_per_s"],
                           "p50_us": result["p50_us"], "lane_commits": len(commits),
                           "commit_p50_us": statistics.median(commits) if commits else None}
                    print(json.dumps(row), flush=True)
                    figures[label].append(row)
    finally:
        proxy.kill()
        proxy.wait()

    def med(label, key):
        return statistics.median(r[key] for r in figures[label] if r[key] is not None)

    print(f"\nmedians of {a.rounds} rounds, {a.delay_us} µs each way\n")
    print("| figure | old | new | new/old |")
    print("|---|---|---|---|")
    for key, name in (("calls_per_s", "calls/s at c=16"), ("p50_us", "call p50 (µs)"),
                      ("commit_p50_us", "a lane's group commit, p50 (µs)")):
        old, new = med("old", key), med("new", key)
        print(f"| {name} | {old:,.0f} | {new:,.0f} | {new / old:.2f} |")


if __name__ == "__main__":
    main()
