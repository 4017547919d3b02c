"""Running beyond one machine: ``encoding=ray`` (:class:`RayShardedEmbedder`, the corpus encoded
in shards by Ray tasks) and what a Ray worker does before a rag_lab job (``ray_worker``). Sweeps
on Ray or SLURM need no code here: Hydra's launchers run them (``conf/hydra/launcher/``)."""

from rag_lab.distributed.ray_embedder import RayShardedEmbedder

__all__ = ["RayShardedEmbedder"]
