"""The served export as MCP tools for agents (the official MCP Python SDK): ``search_knowledge``
(the same reply as ``POST /v1/retrieve``) and ``get_chunk``; over stdio
(``rag-lab serve EXPORT --mcp stdio``) or streamable HTTP at ``/mcp`` beside the HTTP API
(``--mcp http``)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from rag_lab._version import __version__
from rag_lab.server.service import KnowledgeService

INSTRUCTIONS = (
    "A knowledge base of documents (manuals, tickets, standards). search_knowledge returns the "
    "best chunks for a question with their source, version, validity dates and section type, "
    "and flags: conflicts between sources, the fallback level that answered, the route and the "
    "knowledge sources searched (when the export routes queries), stale sources and "
    "no_trustworthy_result. Cite chunk_id; prefer fresh, credible, non-conflicting chunks."
)


def create_mcp(service: KnowledgeService) -> MCPServer:
    server: MCPServer = MCPServer(
        "rag_lab", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    @server.tool()
    def search_knowledge(
        query: str,
        k: int = 10,
        as_of: str | None = None,
        filters: dict[str, Any] | None = None,
        principal: dict[str, Any] | str | None = None,
    ) -> dict[str, Any]:
        """Search the knowledge base. ``as_of``: an ISO date (editions valid that day);
        ``filters``: metadata field -> value or values (``{"source_type": "manual"}``);
        ``principal``: who asks (``{"user": ..., "groups": [...]}``), when the export has
        permissions."""
        return service.search(query, k, as_of=as_of, filters=filters, principal=principal)

    @server.tool()
    def get_chunk(chunk_id: str, principal: dict[str, Any] | str | None = None) -> dict[str, Any]:
        """One chunk by its id (from search_knowledge): text, source and metadata."""
        found = service.get_chunk(chunk_id, principal)
        if found is None:
            raise ValueError(f"no chunk {chunk_id!r}")
        return found

    return server
