"""Module-scoped fixtures: a local Ray cluster and an MLflow server (``cluster.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.distributed.cluster import RayCluster, local_ray_cluster, mlflow_server


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory) -> Iterator[RayCluster]:
    pytest.importorskip("ray")
    with local_ray_cluster(tmp_path_factory.mktemp("ray")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory) -> Iterator[str]:
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri
