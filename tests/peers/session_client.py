#!/usr/bin/env python3
"""One MCP session of the official Python SDK, driven line by line: Aether's tests write one
JSON request per line on stdin and read one JSON answer per line on stdout.

usage: session_client.py URL        (Streamable HTTP; AETHER_TOKEN is sent as a bearer token)

With AETHER_REPLICAS=HOST:PORT,HOST:PORT,... each HTTP request goes to the next replica in turn
(a load balancer without stickiness), whatever URL says.

requests: {"op": "tools"} | {"op": "call", "tool", "args"} | {"op": "start", "tool", "args"}
(a call answered later) | {"op": "finish"} (the started call's answer) | {"op": "prompts"} |
{"op": "prompt", "name", "args"} | {"op": "resources"} | {"op": "templates"} |
{"op": "read", "uri"} | {"op": "notifications"} (methods of notifications heard so far) |
{"op": "replicas"} (how many requests each replica was sent)
Every answer is {"ok": ...} or {"error": "..."}.
"""
import asyncio
import json
import os
import sys

import httpx2

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from round_robin import RoundRobin

HEARD = []
SENT = {}


async def on_message(message):
    root = getattr(message, "root", message)
    method = getattr(root, "method", None)
    if method:
        HEARD.append(method)


def dump(model):
    return json.loads(model.model_dump_json(exclude_none=True, by_alias=True))


async def answer(session, request, started):
    op = request["op"]
    if op == "tools":
        return [t.name for t in (await session.list_tools()).tools]
    if op == "call":
        return dump(await session.call_tool(request["tool"], request.get("args", {})))
    if op == "start":
        started.append(asyncio.create_task(session.call_tool(request["tool"], request.get("args", {}))))
        await asyncio.sleep(0.2)
        return "started"
    if op == "finish":
        return dump(await started.pop(0))
    if op == "prompts":
        return [p.name for p in (await session.list_prompts()).prompts]
    if op == "prompt":
        return dump(await session.get_prompt(request["name"], request.get("args")))
    if op == "resources":
        return [str(r.uri) for r in (await session.list_resources()).resources]
    if op == "templates":
        return [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
    if op == "read":
        return dump(await session.read_resource(request["uri"]))
    if op == "notifications":
        return list(HEARD)
    if op == "replicas":
        return SENT
    raise ValueError(f"unknown op {op!r}")


async def main() -> int:
    token = os.environ.get("AETHER_TOKEN")
    replicas = [r for r in os.environ.get("AETHER_REPLICAS", "").split(",") if r]
    client = None
    if token or replicas:
        client = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"} if token else {},
            transport=RoundRobin(replicas, SENT) if replicas else None,
            timeout=120,
        )
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with streamable_http_client(sys.argv[1], http_client=client) as (r, w), \
            ClientSession(r, w, message_handler=on_message) as session:
        await session.initialize()
        started = []
        while line := await reader.readline():
            request = json.loads(line)
            try:
                reply = {"ok": await answer(session, request, started)}
            except Exception as e:  # the test reads the error
                reply = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
