#!/usr/bin/env python3
"""Aether's tests drive Aether with the official MCP Python SDK through this script.

usage:
  mcp_client.py stdio TOOL JSON_ARGS -- CMD [ARGS...]
  mcp_client.py http  TOOL JSON_ARGS URL
Prints one JSON object: {"protocolVersion", "server", "tools": [names], "result": {...}}.
Exit 0 when the call returned without isError, 1 when it returned isError, 2 on any failure.
"""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def run(session: ClientSession, tool: str, args: dict) -> int:
    init = await session.initialize()
    tools = await session.list_tools()
    result = await session.call_tool(tool, args)
    print(json.dumps({
        "protocolVersion": init.protocol_version,
        "server": init.server_info.name,
        "tools": [t.name for t in tools.tools],
        "result": json.loads(result.model_dump_json(exclude_none=True, by_alias=True)),
    }))
    return 1 if result.is_error else 0


async def main() -> int:
    mode, tool, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if mode == "stdio":
        cmd = sys.argv[sys.argv.index("--") + 1:]
        params = StdioServerParameters(command=cmd[0], args=cmd[1:])
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            return await run(s, tool, args)
    if mode == "http":
        async with streamable_http_client(sys.argv[4]) as (r, w), ClientSession(r, w) as s:
            return await run(s, tool, args)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as e:  # the test reads stderr; the exit code says "failed"
        print(f"mcp_client failed: {e!r}", file=sys.stderr)
        sys.exit(2)
