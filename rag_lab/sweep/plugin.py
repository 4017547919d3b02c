"""Registration of rag_lab's Hydra launcher (``hydra/launcher=fork``: ``rag_lab.sweep.launcher``).

Hydra instantiates a launcher only from a class it found by scanning the ``hydra_plugins``
namespace with ``pkgutil``, which cannot see into a setuptools editable install (``pip install
-e .`` maps the package through an import hook, not a folder on ``sys.path``); registering the
class through Hydra's public ``Plugins.register`` works for every install."""

from __future__ import annotations


def register_fork_launcher() -> None:
    """``Plugins.instance().register(ForkLauncher)`` (idempotent)."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.rag_lab_launcher.fork_launcher import ForkLauncher

    Plugins.instance().register(ForkLauncher)
