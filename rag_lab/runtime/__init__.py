"""How a rag_lab process runs on its machine: progress lines for the long steps (``progress``)
and the threads numeric libraries get beside sibling workers (``threads``)."""
