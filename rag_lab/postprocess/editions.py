"""Editions by device model and firmware: keep the chunks of the edition of a document that
applies to the query's device, as the as-of filter keeps the one valid on the query's date.

A query says which device it is about in its metadata (``queries.jsonl``: ``{"device_model":
"SV7-04A", "firmware": "3.3"}``; the configured ``device_model`` / ``firmware`` otherwise). A
document says which devices its edition covers in its own metadata (front matter, record fields):
``device_models`` (a model or a list; a family name ``SV7`` covers ``SV7-04A``) and a firmware
range ``firmware_from`` .. ``firmware_to`` (versions compared as numbers, ``3.10`` > ``3.9``; both
ends included, either open when absent). A document that names no models covers every model, one
without a range every firmware: a query's device only removes editions that say they are for
another one. Like the metadata filter, a query the filter would leave with nothing keeps its run
(counted as ``emptied_queries``): a refusal is the fallback chain's decision.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from rag_lab.postprocess.metadata_filter import _version_key as version_key
from rag_lab.ranking import ranked
from rag_lab.text.entities import key
from rag_lab.types import Chunk, Run
from rag_lab.validate import OptionError, boolean, choice

MODES = ("drop", "demote")


def _models(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    values = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(v).strip() for v in values if str(v).strip()]


def covers_model(documented: str, model: str) -> bool:
    """``documented`` (a document's model entry) covers the query's ``model``: the same model
    (case and separators aside: ``SV7-04A`` = ``sv7 04a``), or its family (``SV7`` covers
    ``SV7-04A``: the model begins with it, then a separator)."""
    if key(documented) == key(model):
        return True
    head = model.upper()[: len(documented)]
    rest = model[len(documented) : len(documented) + 1]
    return head == documented.upper() and rest in ("-", " ", "_", "/", ".")


class EditionFilter:
    """Args:
    device_model: the device model every query is about unless its metadata names one; ``null``:
        none (a query without one keeps every edition).
    firmware: the same for the firmware version.
    query_device: a query's own ``device_model`` / ``firmware`` metadata wins over the two above
        (``rag_lab.protocols.QueryMetadataAware``).
    models_field, firmware_from_field, firmware_to_field: the document metadata read (the
        contract passes every front-matter key through to the chunks).
    mode: ``drop`` removes chunks of editions for another device; ``demote`` moves them below
        every matching chunk, in their order.
    """

    query_metadata_fields = ("device_model", "firmware")

    def __init__(
        self,
        device_model: str | None = None,
        firmware: str | None = None,
        query_device: bool = True,
        models_field: str = "device_models",
        firmware_from_field: str = "firmware_from",
        firmware_to_field: str = "firmware_to",
        mode: str = "drop",
    ) -> None:
        self.device_model = str(device_model) if device_model not in (None, "") else None
        self.firmware = str(firmware) if firmware not in (None, "") else None
        if self.firmware is not None and not version_key(self.firmware):
            raise OptionError("firmware", firmware, "must be a version with a number (3.2)")
        self.query_device = boolean(query_device, "query_device")
        self.models_field = str(models_field)
        self.firmware_from_field = str(firmware_from_field)
        self.firmware_to_field = str(firmware_to_field)
        self.mode = choice(mode, "mode", MODES)
        self.stats: dict[str, float] = {}
        self._by_query: dict[str, tuple[str | None, str | None]] = {}

    def set_query_metadata(self, metadata: Mapping[str, Mapping[str, Any]]) -> None:
        self._by_query = {}
        if not self.query_device:
            return
        for qid, meta in metadata.items():
            model, firmware = meta.get("device_model"), meta.get("firmware")
            if model not in (None, "") or firmware not in (None, ""):
                self._by_query[qid] = (
                    str(model) if model not in (None, "") else None,
                    str(firmware) if firmware not in (None, "") else None,
                )

    def device(self, qid: str) -> tuple[str | None, str | None]:
        """The ``(device model, firmware)`` query ``qid`` is about (its own, else the config's)."""
        model, firmware = self._by_query.get(qid, (None, None))
        return model or self.device_model, firmware or self.firmware

    def applies(self, chunk: Chunk, model: str | None, firmware: str | None) -> bool:
        """Whether ``chunk``'s edition covers the device (see the module docstring)."""
        meta = chunk.metadata
        if model is not None:
            documented = _models(meta.get(self.models_field))
            if documented and not any(covers_model(d, model) for d in documented):
                return False
        if firmware is not None:
            have = version_key(firmware)
            low = meta.get(self.firmware_from_field)
            high = meta.get(self.firmware_to_field)
            if low not in (None, "") and have < version_key(low):
                return False
            if high not in (None, "") and have > version_key(high):
                return False
        return True

    def process(self, queries: Mapping[str, str], run: Run, chunks: Mapping[str, Chunk]) -> Run:
        t0 = time.perf_counter()
        out: Run = {}
        removed = emptied = with_device = 0
        for qid, scores in run.items():
            model, firmware = self.device(qid)
            order = ranked(scores)
            if model is None and firmware is None:
                out[qid] = {c: scores[c] for c in order}
                continue
            with_device += 1
            keep = [c for c in order if self.applies(chunks[c], model, firmware)]
            if order and not keep:
                emptied += 1
                out[qid] = {c: scores[c] for c in order}
                continue
            kept = set(keep)
            other = [c for c in order if c not in kept]
            removed += len(other)
            if self.mode == "drop":
                out[qid] = {c: scores[c] for c in keep}
            else:  # rank-preserving scores: matching editions first, then the others
                final = keep + other
                out[qid] = {c: float(len(final) - i) for i, c in enumerate(final)}
        n = max(len(run), 1)
        self.stats = {
            "device_queries": float(with_device),
            "other_edition_per_query": removed / n,
            "emptied_queries": float(emptied),
            "ms_per_query": 1000 * (time.perf_counter() - t0) / n,
        }
        return out
