"""An MCP server that misbehaves on purpose, over stdio, without an SDK (so it can break the
protocol): it initializes and lists its tools properly, then each tool breaks something.

  garbage  - answers with a line that is not JSON, then nothing
  wrong_id - answers with the result under another request id, then nothing
  oversize - answers with a 5 MiB text (over Aether's 4 MiB cap)
  huge     - answers with a 20 MiB line (over rmcp's own 16 MiB line limit)
  huge_tail_id - the same, with its id at the end of the line
  wedge    - never answers, and answers nothing else either until it is killed
  flood    - sends 20,000 log notifications, then answers
  ok       - answers "fine" (to show the server still serves, or was started again)
"""
import json
import os
import sys

TOOLS = ["garbage", "wrong_id", "oversize", "huge", "huge_tail_id", "wedge", "flood", "ok"]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(id, text):
    send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, id = msg.get("method"), msg.get("id")
    if id is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "rogue", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": t, "description": f"misbehaves: {t}", "inputSchema": {"type": "object"}}
            for t in TOOLS]}})
    elif method == "tools/call":
        tool = msg["params"]["name"]
        if tool == "garbage":
            sys.stdout.write("this is not JSON-RPC {{{\n")
            sys.stdout.flush()
        elif tool == "wrong_id":
            result(987654, "for someone else")
        elif tool == "oversize":
            result(id, "x" * (5 << 20))
        elif tool == "huge":
            result(id, "x" * (20 << 20))
        elif tool == "huge_tail_id":
            sys.stdout.write('{"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": "'
                             + "x" * (20 << 20) + '"}]}, "id": ' + json.dumps(id) + "}\n")
            sys.stdout.flush()
        elif tool == "wedge":
            import time
            while True:
                time.sleep(3600)
        elif tool == "flood":
            for i in range(20000):
                send({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": {"level": "info", "data": f"flood {i}"}})
            result(id, "flooded")
        else:
            result(id, f"fine (pid {os.getpid()})")
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}})
