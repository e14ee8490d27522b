#!/usr/bin/env python3
"""Aether's tests drive Aether with the official MCP Python SDK through this script.

usage:
  mcp_client.py stdio TOOL JSON_ARGS -- CMD [ARGS...]
  mcp_client.py http  TOOL JSON_ARGS URL
Prints one JSON object: {"protocolVersion", "server", "tools": [names], "result": {...},
"elicited": [messages]}.
Exit 0 when the call returned without isError, 1 when it returned isError, 2 on any failure.

environment:
  AETHER_TOKEN   (http) sent as "Authorization: Bearer TOKEN"
  AETHER_ELICIT  answer elicitation requests: "approve" (accept, approve: true) or "decline"
"""
import asyncio
import json
import os
import sys

import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


ELICITED = []


async def on_elicit(context, params):
    ELICITED.append(params.message)
    if os.environ.get("AETHER_ELICIT") == "approve":
        return types.ElicitResult(action="accept", content={"approve": True, "why": "the user said yes"})
    return types.ElicitResult(action="decline")


def session_options() -> dict:
    return {"elicitation_callback": on_elicit} if os.environ.get("AETHER_ELICIT") else {}


async def run(session: ClientSession, tool: str, args: dict) -> int:
    init = await session.initialize()
    tools = await session.list_tools()
    result = await session.call_tool(tool, args)
    print(json.dumps({
        "protocolVersion": init.protocol_version,
        "server": init.server_info.name,
        "tools": [t.name for t in tools.tools],
        "result": json.loads(result.model_dump_json(exclude_none=True, by_alias=True)),
        "elicited": ELICITED,
    }))
    return 1 if result.is_error else 0


async def main() -> int:
    mode, tool, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if mode == "stdio":
        cmd = sys.argv[sys.argv.index("--") + 1:]
        params = StdioServerParameters(command=cmd[0], args=cmd[1:])
        async with stdio_client(params) as (r, w), ClientSession(r, w, **session_options()) as s:
            return await run(s, tool, args)
    if mode == "http":
        token = os.environ.get("AETHER_TOKEN")
        client = None
        if token:
            import httpx2
            client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with streamable_http_client(sys.argv[4], http_client=client) as (r, w), \
                ClientSession(r, w, **session_options()) as s:
            return await run(s, tool, args)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as e:  # the test reads stderr; the exit code says "failed"
        print(f"mcp_client failed: {e!r}", file=sys.stderr)
        sys.exit(2)
