"""``rag-lab serve EXPORT``: an export answering an agent over HTTP (FastAPI on uvicorn: ``http``)
and MCP (the official SDK: ``mcp``), with request limits and an optional bearer token
(``guard``), one ``service`` both protocols call, and the process set-up (``run``)."""
