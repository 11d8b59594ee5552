"""The floor the delegation figures are measured against: a minimal MCP server as a real subprocess.

One trivial tool, ``ping(x: int) -> int``, on the SDK's high-level ``MCPServer``, with nothing else
loaded. ``python -m benchmarks.ping_server`` serves it over stdio; ``--http`` serves it over streamable
HTTP on a free 127.0.0.1 port (bound as the daemon binds, with ``IPPROTO_TCP`` so that accepted
connections get ``TCP_NODELAY``) and prints ``http://127.0.0.1:PORT/mcp`` on stdout once it listens.

It imports nothing from Loom, so it costs what any tool author's smallest server costs.
"""

from __future__ import annotations

import logging
import socket
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("ping", log_level="WARNING")


@server.tool()
async def ping(x: int) -> int:
    """Return ``x``."""
    return x


def _serve_http() -> None:
    import anyio
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=False, json_response=False)
    config = uvicorn.Config(app, lifespan="on", log_config=None, access_log=False)

    class _Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            sys.stdout.write(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp\n")
            sys.stdout.flush()

    anyio.run(_Announcing(config).serve, [sock])


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if "--http" in sys.argv[1:]:
        _serve_http()
    else:
        server.run()
