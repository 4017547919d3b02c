"""Environment variables for Ray jobs given on the command line, as Ray takes them: strings.

``+hydra.launcher.ray.init.runtime_env.env_vars.HF_HUB_OFFLINE=1`` (the example in
conf/hydra/launcher/ray.yaml and docs/scale_out.md) is an integer to Hydra's override parser, and
``ray.init`` refuses a runtime environment whose ``env_vars`` are not all strings with a
``TypeError`` from deep inside Ray. An environment variable is text whatever it looks like, so
:func:`string_env_overrides` quotes such a value (``...HF_HUB_OFFLINE='1'``) before Hydra parses
the command line: a number, ``true``/``false`` or ``null``, which Hydra would not read as a
string. Quoted values, sweeps (``a,b``), interpolations and deletions (``~key``) pass unchanged."""

from __future__ import annotations

import re
from collections.abc import Sequence

ENV_VARS_KEY = "hydra.launcher.ray.init.runtime_env.env_vars"

_OVERRIDE = re.compile(r"^(\+{0,2})" + re.escape(ENV_VARS_KEY) + r"\.([^=]+)=(.*)$", re.DOTALL)
# what Hydra's override grammar reads as an int, a float, a bool or null, not a string
_NOT_A_STRING = re.compile(
    r"[-+]?(\d[\d_]*(\.[\d_]*)?|\.\d[\d_]*)([eE][-+]?\d+)?|[-+]?(inf|nan)|true|false|null",
    re.IGNORECASE,
)


def string_env_overrides(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``env_vars`` override whose value Hydra would not read as a string
    quoted, so Ray gets ``"1"`` for ``1``."""
    out: list[str] = []
    for arg in argv:
        match = _OVERRIDE.match(arg)
        if match and _NOT_A_STRING.fullmatch(match.group(3).strip()):
            prefix, name, value = match.groups()
            arg = f"{prefix}{ENV_VARS_KEY}.{name}='{value.strip()}'"
        out.append(arg)
    return out


__all__ = ["ENV_VARS_KEY", "string_env_overrides"]
