"""OpenAI-compatible endpoints: the client every endpoint stage uses (``client``: API-key rules,
retries, redaction) and a small local server for a causal LM (``server``: ``rag-lab
llm-server``)."""
