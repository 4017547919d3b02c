"""``python -m rag_lab.cli <command> ...``: the same as the ``rag-lab`` console script."""

from rag_lab.cli import main

main()
