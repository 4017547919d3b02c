"""The contract's work on a corpus through per-row cache tables: each document's completion
(``ContractRows.check``) and each chunk's entity tags (``ContractRows.tag``) are read back from
the row an earlier read stored for the same content under the same contract config, so an edit
completes and tags only what it changed (``rag_lab.pipeline.corpus``, ``.splice``)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from rag_lab._version import __version__
from rag_lab.cache import StageCache, keys
from rag_lab.contract.base import Checked, ChunkTagging, Contract, DocumentWise, Problem
from rag_lab.types import Chunk, Document, document_from_dict, document_to_dict


def document_digest(doc: Document) -> str:
    """A parsed document's content (every field), for its per-document rows."""
    spelled = orjson.dumps(document_to_dict(doc), option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.blake2b(spelled, digest_size=16).hexdigest()


@dataclass(frozen=True)
class ContractRows:
    """The per-row tables of one contract ``config`` in ``cache`` (``None``: no cache, every row
    computed); ``counts`` receives what was computed rather than read back (``checked_documents``,
    ``tagged_chunks``: the ``CorpusLoader.counts``)."""

    cache: StageCache | None
    config: Any
    counts: Counter[str]

    def check(
        self,
        contract: Contract,
        docs: Sequence[Document],
        where: Mapping[str, str],
        digests_out: dict[str, str] | None = None,
        spelled: dict[int, dict[str, Any]] | None = None,
    ) -> Checked:
        """``contract.check``; for a ``DocumentWise`` contract each document's completion is read
        from its row of a per-document table (the contract's config and the document's content)
        when an earlier read stored it: an edit completes the documents it changed. ``digests_out``
        receives each document's ``document_digest`` (by id), ``spelled`` each completed document's
        ``document_to_dict`` form, by object id."""
        spelled = {} if spelled is None else spelled
        cache, counts = self.cache, self.counts
        if cache is None or not isinstance(contract, DocumentWise):
            counts["checked_documents"] += len(docs)
            return contract.check(docs, where)
        table = keys.model_table({"contract": self.config, "rag_lab": __version__})
        digests = [document_digest(d) for d in docs]
        if digests_out is not None:  # what the documents entry and the corpus' note record
            digests_out.update((d.doc_id, h) for d, h in zip(docs, digests))
        found = cache.get_many("documents", table, digests, counted=False)
        done: list[tuple[Document, Sequence[Problem]]] = []
        fresh: dict[str, bytes] = {}
        for doc, digest in zip(docs, digests):
            src = where.get(doc.doc_id, doc.doc_id)
            raw = found.get(digest)
            if raw is not None:
                row = orjson.loads(raw)
                own = [Problem(doc.doc_id, src, f, m) for f, m in row["problems"]]
                done.append((document_from_dict(row["doc"]), own))
                spelled[id(done[-1][0])] = row["doc"]
                continue
            completed, own = contract.complete(doc, src)
            done.append((completed, own))
            spelled[id(completed)] = document_to_dict(completed)
            value = {
                "doc": spelled[id(completed)],
                "problems": [[p.field, p.message] for p in own],
            }
            fresh[digest] = orjson.dumps(value, default=str)
        counts["checked_documents"] += len(fresh)
        if fresh:
            cache.put_many("documents", table, fresh)
        return contract.finish(done, where)

    def tag(self, contract: ChunkTagging, chunks: Sequence[Chunk]) -> tuple[Chunk, ...]:
        """``contract.tag_chunks``, each chunk's tags read from its row of a per-chunk table (the
        contract's config, the chunk's section, text and tags) when an earlier read stored it."""
        cache, counts = self.cache, self.counts
        if cache is None:
            counts["tagged_chunks"] += len(chunks)
            return tuple(contract.tag_chunks(chunks))
        table = keys.model_table({"tags": self.config, "rag_lab": __version__})
        digests = [
            hashlib.blake2b(
                orjson.dumps([c.section, c.text, c.metadata.get("entity_tags")], default=list),
                digest_size=16,
            ).hexdigest()
            for c in chunks
        ]
        found = cache.get_many("chunks", table, digests, counted=False)
        todo = [i for i, d in enumerate(digests) if d not in found]
        tagged = dict(zip(todo, contract.tag_chunks([chunks[i] for i in todo])))
        counts["tagged_chunks"] += len(todo)
        if todo:
            fresh = {
                digests[i]: orjson.dumps(list(c.metadata.get("entity_tags") or []))
                for i, c in tagged.items()
            }
            cache.put_many("chunks", table, fresh)
        out = []
        for i, c in enumerate(chunks):
            if i in tagged:
                out.append(tagged[i])
            else:
                tags = orjson.loads(found[digests[i]])
                if c.metadata.get("entity_tags") == tags:  # the chunk's text adds none (most)
                    out.append(c)
                else:
                    out.append(replace(c, metadata={**c.metadata, "entity_tags": tags}))
        return tuple(out)
