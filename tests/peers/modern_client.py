#!/usr/bin/env python3
"""Aether's tests drive Aether with the official MCP Python SDK's `Client` (2.3.0), which
speaks the 2026-07-28 protocol (no initialize, `server/discover`, `subscriptions/listen`,
input-required results) as well as the handshake era.

usage:
  modern_client.py MODE call TOOL JSON_ARGS TARGET...
      list the tools, then call TOOL; prints {"protocolVersion", "tools", "result"}.
  modern_client.py MODE listen TARGET...
      list the tools and open a subscriptions/listen stream for tool list changes; print
      {"listening": true, "tools": [names]}, then wait (at most 60 s) for a change event and
      print {"events": 1, "tools": [names listed after it]}.
  modern_client.py MODE discover TARGET...
      prints the server's discover answer.
  modern_client.py MODE cancel TOOL SECONDS TARGET...
      calls TOOL and gives up on it after SECONDS (the SDK cancels the request); prints
      {"cancelled": true} when the call did not return first.

MODE is what `Client(mode=…)` takes: "2026-07-28", "auto" or "legacy".
TARGET is a URL (Streamable HTTP), or `-- CMD [ARGS...]` (stdio).
Exit 0 when the call returned without isError, 1 when it returned isError, 2 on any failure.

environment:
  AETHER_TOKEN   (http) sent as "Authorization: Bearer TOKEN"
  AETHER_REPLICAS  (http) HOST:PORT,HOST:PORT,...: each request goes to the next replica in
                 turn (a load balancer without stickiness), whatever the URL says; the report
                 then says how many requests each was sent ("replicas")
  AETHER_ELICIT  answer elicitation requests: "approve" (accept, approve: true), "decline",
                 or "json:{...}" (accept, with that content)
"""
import asyncio
import json
import os
import sys

import mcp.types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ELICITED = []
SENT = {}


async def on_elicit(context, params):
    ELICITED.append(params.message)
    answer = os.environ.get("AETHER_ELICIT", "")
    if answer.startswith("json:"):
        return types.ElicitResult(action="accept", content=json.loads(answer[5:]))
    if answer == "approve":
        return types.ElicitResult(action="accept", content={"approve": True, "why": "the user said yes"})
    return types.ElicitResult(action="decline")


def target(rest: list[str]):
    if rest and rest[0] == "--":
        return StdioServerParameters(command=rest[1], args=rest[2:])
    url = rest[0]
    token = os.environ.get("AETHER_TOKEN")
    replicas = [r for r in os.environ.get("AETHER_REPLICAS", "").split(",") if r]
    if not token and not replicas:
        return url
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from round_robin import RoundRobin
    return streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"} if token else {},
        transport=RoundRobin(replicas, SENT) if replicas else None,
        timeout=httpx2.Timeout(60, read=300)))


def client(mode: str, rest: list[str]) -> Client:
    options = {"elicitation_callback": on_elicit} if os.environ.get("AETHER_ELICIT") else {}
    return Client(target(rest), mode=mode, cache=None, **options)


async def call(mode: str, tool: str, args: dict, rest: list[str]) -> int:
    async with client(mode, rest) as c:
        tools = await c.list_tools()
        result = await c.call_tool(tool, args)
        print(json.dumps({
            "protocolVersion": c.protocol_version,
            "tools": [t.name for t in tools.tools],
            "result": json.loads(result.model_dump_json(exclude_none=True, by_alias=True)),
            "elicited": ELICITED,
            "replicas": SENT,
        }))
        return 1 if result.is_error else 0


async def listen(mode: str, rest: list[str]) -> int:
    async with client(mode, rest) as c:
        before = [t.name for t in (await c.list_tools()).tools]
        async with c.listen(tools_list_changed=True) as sub:
            print(json.dumps({"listening": True, "protocolVersion": c.protocol_version, "tools": before}),
                  flush=True)
            async with asyncio.timeout(60):
                async for _event in sub:
                    after = [t.name for t in (await c.list_tools()).tools]
                    print(json.dumps({"events": 1, "tools": after}), flush=True)
                    return 0
    return 2


async def discover(mode: str, rest: list[str]) -> int:
    async with client(mode, rest) as c:
        print(json.dumps({
            "protocolVersion": c.protocol_version,
            "server": c.server_info.name if c.server_info else None,
            "tools": [t.name for t in (await c.list_tools()).tools],
        }))
        return 0


async def cancel(mode: str, tool: str, seconds: float, rest: list[str]) -> int:
    async with client(mode, rest) as c:
        try:
            async with asyncio.timeout(seconds):
                await c.call_tool(tool, {})
        except TimeoutError:
            print(json.dumps({"cancelled": True}))
            return 0
        print(json.dumps({"cancelled": False}))
        return 1


async def main() -> int:
    mode, command = sys.argv[1], sys.argv[2]
    if command == "call":
        return await call(mode, sys.argv[3], json.loads(sys.argv[4]), sys.argv[5:])
    if command == "listen":
        return await listen(mode, sys.argv[3:])
    if command == "discover":
        return await discover(mode, sys.argv[3:])
    if command == "cancel":
        return await cancel(mode, sys.argv[3], float(sys.argv[4]), sys.argv[5:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as e:  # the test reads stderr; the exit code says "failed"
        print(f"modern_client failed: {e!r}", file=sys.stderr)
        sys.exit(2)
