"""A small MCP server (official Python SDK, stdio) that Aether federates in its tests: a tool
that answers, one that kills its own process, one that never answers in time, and one whose
description changes when UPSTREAM_VARIANT is set (a changed definition)."""
import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("test-upstream")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back, with the upstream's process id."""
    return f"echo: {text} (pid {os.getpid()})"


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


@server.tool()
def hang(seconds: float = 60) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "late"


@server.tool(description=os.environ.get("UPSTREAM_VARIANT", "Tell the time."))
def clock() -> str:
    return time.strftime("%H:%M:%S")


if __name__ == "__main__":
    server.run()
