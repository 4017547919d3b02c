"""``encoding=ray``: the corpus encoded in shards by Ray tasks, for corpora one process cannot
encode in time.

Each ``encode_documents`` call is cut into ``workers`` contiguous shards, one Ray task each, on
any node of the cluster; the vectors come back in input order and the dense retriever writes them
into the stage cache as usual. The identity is the wrapped embedder's, so the vectors land in the
same cache table as a single-process encode and either reuses the other's. Queries, and calls too
small to be worth a task, are encoded in this process.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rag_lab.validate import integer

log = logging.getLogger(__name__)

SETUP_HOOK = "rag_lab.distributed.ray_worker.enter_workdir"
_BUILT: dict[str, Any] = {}  # in a worker process: embedder config (JSON) -> the built embedder


def _encode_shard(config: str, texts: list[str]) -> np.ndarray:
    """A Ray task: ``texts`` encoded by the embedder ``config`` describes, built once per worker
    process (through the allow-list of ``rag_lab.pipeline.build``)."""
    embedder = _BUILT.get(config)
    if embedder is None:
        from rag_lab.pipeline.build import instantiate

        embedder = _BUILT[config] = instantiate(json.loads(config), "embedder")
    return np.asarray(embedder.encode_documents(texts), dtype=np.float32)


class RayShardedEmbedder:
    """Args:
    embedder: the config of the embedder to shard (``${embedder}``: its ``_target_`` and
        arguments, not an object): every worker process builds its own copy once, so no model
        travels through Ray's object store.
    workers: shards per call, run as that many Ray tasks at once.
    address: the cluster to join when this process has not joined one: ``None`` (``$RAY_ADDRESS``,
        else a new Ray instance on this machine), ``auto`` (the cluster ``ray start`` runs here) or
        ``<head>:6379``. A job of a ``hydra/launcher=ray`` sweep uses its own cluster.
    num_cpus: CPUs each task reserves (Ray sets its ``OMP_NUM_THREADS`` to this).
    min_texts: a call with fewer texts is encoded in this process: a task costs more than it saves.
    """

    def __init__(
        self,
        embedder: Mapping[str, Any],
        workers: int = 2,
        address: str | None = None,
        num_cpus: float = 1,
        min_texts: int = 64,
    ) -> None:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(embedder, DictConfig):  # `_recursive_: false` hands the node over as is
            embedder = OmegaConf.to_container(embedder, resolve=True)  # type: ignore[assignment]
        self.config = dict(embedder)
        self.workers = integer(workers, "workers", ge=1)
        self.address = address
        self.num_cpus = num_cpus
        self.min_texts = integer(min_texts, "min_texts", ge=0)
        self._local: Any = None

    @property
    def local(self) -> Any:
        """The wrapped embedder in this process (queries, identity, small calls)."""
        if self._local is None:
            from rag_lab.pipeline.build import instantiate

            self._local = instantiate(self.config, "embedder")
        return self._local

    @property
    def dimension(self) -> int:
        return int(self.local.dimension)

    @property
    def identity(self) -> dict:
        return dict(self.local.identity)  # the same vectors: the same cache table

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.local.encode_queries(texts), dtype=np.float32)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if len(texts) < max(self.min_texts, 2) or self.workers == 1:
            return np.asarray(self.local.encode_documents(texts), dtype=np.float32)
        import ray

        self._join()
        task = ray.remote(_encode_shard).options(num_cpus=self.num_cpus, max_retries=1)
        config = json.dumps(self.config, sort_keys=True)
        n = min(self.workers, len(texts))
        bounds = [round(i * len(texts) / n) for i in range(n + 1)]
        shards = [task.remote(config, texts[a:b]) for a, b in zip(bounds, bounds[1:])]
        out = np.concatenate(ray.get(shards), axis=0)
        log.info("ray: encoded %d texts in %d shards", len(texts), n)
        return out

    def _join(self) -> None:
        """Join the cluster (``address``) unless this process is in one already; its tasks start
        in this process' working directory (``rag_lab.distributed.ray_worker``)."""
        import ray

        if ray.is_initialized():
            return
        from rag_lab.distributed.ray_worker import WORKDIR_ENV

        env = {"env_vars": {WORKDIR_ENV: os.getcwd()}, "worker_process_setup_hook": SETUP_HOOK}
        ray.init(address=self.address, runtime_env=env, log_to_driver=False)
