"""The entity path: chunks found by the entities they name (model numbers, fault codes, part
numbers, component names), the third member of the articles' hybrid (vector 0.5 + keyword 0.3 +
entity 0.2, ``experiment=sample_entity``).

Index: each chunk's entities are its ``entity_tags`` (the metadata contract's, from the chunk's own
text and its section) plus what the recogniser finds in its title, section path and text (the
contract's patterns and a user dictionary with aliases: ``rag_lab.text.entities``). Query: the
same recogniser, plus (``pos``) jieba's part-of-speech tags: a noun or Latin-script word of the
query that is an entity of the index counts (``SP45`` for ``SP-45``, which the model pattern
misses). Relation-aware expansion: each entity the dictionary relates to a query entity joins the
query at ``relation_weight``.

Score of a chunk: the sum over the query's entities it names of weight x idf (``log(1 + N/df)``
over chunks), so a rare fault code outweighs the model name every chunk of a manual carries.
Chunks naming none of them are left out (a query without entities gets an empty run).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_lab.text.entities import EntityRecogniser, key, read_entity_dictionary
from rag_lab.types import Chunk, Run
from rag_lab.validate import boolean, number

# jieba part-of-speech flags read as entity candidates: nouns (n, nz, nr, ns, nt, ...) and
# Latin-script words (eng: codes and model numbers written without their hyphen)
_POS_FLAGS = ("n", "eng")


class EntityRetriever:
    """Args:
    dictionary: a YAML / JSON entity dictionary (``name: {kind, aliases, related}``) or
        ``null`` (patterns and tags only).
    patterns: kind → regular expression of entities with a shape (fault codes, model numbers,
        part numbers); the shipped config reads the contract's ``entity_patterns``.
    use_tags: read each chunk's ``entity_tags`` metadata (the contract's) as well.
    pos: recognise query entities also by jieba's part-of-speech tags (nouns and Latin words
        that are entities of the index).
    relation_weight: weight of an entity the dictionary relates to a query entity (``0``: no
        expansion; a named entity weighs 1).
    """

    def __init__(
        self,
        dictionary: str | None = None,
        patterns: Mapping[str, str] | None = None,
        use_tags: bool = True,
        pos: bool = True,
        relation_weight: float = 0.5,
    ) -> None:
        self.dictionary = str(dictionary) if dictionary else None
        entries = read_entity_dictionary(Path(self.dictionary)) if self.dictionary else []
        self.recogniser = EntityRecogniser(entries, dict(patterns or {}))
        self.use_tags = boolean(use_tags, "use_tags")
        self.pos = boolean(pos, "pos")
        self.relation_weight = number(relation_weight, "relation_weight", ge=0)
        self.stats: dict[str, float] = {}
        self._ids: list[str] = []
        self._entities: list[list[str]] = []  # per chunk, entity keys
        self._postings: dict[str, list[int]] = {}
        self._pos_cut: Any = None
        # per query id: (named any entity, related entities added); the stats are over every
        # query searched since indexing (a query timed alone again counts once)
        self._seen: dict[str, tuple[bool, int]] = {}

    @property
    def identity(self) -> str:
        """The dictionary's and patterns' digest (a changed dictionary file re-keys the cache)."""
        return f"{self.recogniser.digest}:pos={self.pos}"

    @property
    def chunk_ids(self) -> list[str]:
        return list(self._ids)

    # -- index -----------------------------------------------------------------------------------
    def chunk_entities(self, chunk: Chunk) -> set[str]:
        """The entity keys ``chunk`` names (tags, patterns, dictionary)."""
        names = self.recogniser.find(chunk.index_text)
        tags = chunk.metadata.get("entity_tags") if self.use_tags else None
        if isinstance(tags, (list, tuple)):
            names |= {self.recogniser.name(str(t)) for t in tags}
        return {key(n) for n in names if key(n)}

    def index(self, chunks: Sequence[Chunk]) -> None:
        t0 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        self._entities = [sorted(self.chunk_entities(c)) for c in chunks]
        self._build_postings()
        self._seen = {}
        seconds = time.perf_counter() - t0
        self.stats = {
            "index_seconds": seconds,
            "chunks_per_second": len(chunks) / max(seconds, 1e-9),
            "n_entities": float(len(self._postings)),
        }

    def _build_postings(self) -> None:
        postings: dict[str, list[int]] = {}
        for i, names in enumerate(self._entities):
            for name in names:
                postings.setdefault(name, []).append(i)
        self._postings = postings

    def save_index(self, directory: Path) -> None:
        data = {"ids": self._ids, "entities": self._entities}
        (directory / "entities.json").write_text(json.dumps(data, ensure_ascii=False))

    def load_index(self, directory: Path) -> None:
        data = json.loads((directory / "entities.json").read_text(encoding="utf-8"))
        self._ids, self._entities = list(data["ids"]), [list(e) for e in data["entities"]]
        self._build_postings()
        self._seen = {}
        self.stats = {"index_loaded": 1.0, "n_entities": float(len(self._postings))}

    # -- queries ---------------------------------------------------------------------------------
    def _pos_candidates(self, text: str) -> set[str]:
        if self._pos_cut is None:
            import jieba
            import jieba.posseg

            jieba.setLogLevel(logging.WARNING)
            # a tokenizer of its own: the shared one (BM25's) is left as it is
            self._pos_cut = jieba.posseg.POSTokenizer(jieba.Tokenizer()).lcut
        return {
            key(w.word)
            for w in self._pos_cut(text)
            if w.flag.startswith(_POS_FLAGS) and key(w.word) in self._postings
        }

    def named_entities(self, text: str) -> set[str]:
        """The entity keys ``text`` names (recogniser, then part-of-speech candidates)."""
        named = {key(n) for n in self.recogniser.find(text)}
        if self.pos:
            named |= self._pos_candidates(text)
        return named

    def query_entities(self, text: str) -> dict[str, float]:
        """Entity key → weight: named ones 1, related ones (dictionary) ``relation_weight``."""
        named = self.named_entities(text)
        out = dict.fromkeys(sorted(named), 1.0)
        if self.relation_weight > 0:
            for name in sorted(named):
                for other in sorted(self.recogniser.related(name)):
                    out.setdefault(key(other), self.relation_weight)
        return out

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        n = max(len(self._ids), 1)
        run: Run = {}
        for qid, text in queries.items():
            wanted = self.query_entities(text)
            named = self.named_entities(text)
            self._seen[qid] = (bool(named), len(set(wanted) - named))
            acc: dict[int, float] = {}
            for name, weight in wanted.items():
                docs = self._postings.get(name)
                if not docs:
                    continue
                idf = math.log(1 + n / len(docs))
                for i in docs:
                    acc[i] = acc.get(i, 0.0) + weight * idf
            best = sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
            run[qid] = {self._ids[i]: float(s) for i, s in best}
        m = max(len(self._seen), 1)
        self.stats = {
            **{s: v for s, v in self.stats.items() if s in ("index_seconds", "n_entities")},
            "queries_with_entities": sum(f for f, _ in self._seen.values()) / m,
            "related_per_query": sum(r for _, r in self._seen.values()) / m,
        }
        return run
