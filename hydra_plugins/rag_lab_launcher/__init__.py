"""rag_lab's Hydra launcher plugin (``hydra/launcher=fork``): see ``rag_lab.sweep.launcher``."""
