"""An MLflow evaluation dataset (``mlflow.genai.datasets``) as a labelled query set: each
record's question (its inputs' ``query``, ``question``, ... key, as the scorers read it) is a
query, its ``expected_document_ids`` (ids, or ``{id: grade}``) or ``expected_retrieved_context``
expectation its judgments (``rag_lab.tracking.scorers.expected_grades``). The corpus is a BEIR
corpus file or a folder the parser reads, given by path.

The records are written as a BEIR folder (``queries.jsonl``, ``qrels/<split>.tsv``) under
``materialise_dir`` (one per content) and read by :class:`rag_lab.dataset.beir.BeirDataset`, so
fingerprints, the stage cache and label-free evaluation (``labels=False``: every record, records
without expectations included) work as for a BEIR folder. With labels, a record without
expected documents is left out (as a BEIR query without qrels).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rag_lab.dataset._records import materialise_root
from rag_lab.dataset.base import LabelledQueries
from rag_lab.dataset.beir import BeirDataset
from rag_lab.errors import DataError


class MlflowEvalDataset:
    """Args:
    name: the MLflow evaluation dataset's name.
    corpus: the corpus (a BEIR ``corpus.jsonl`` or a folder of documents).
    uri: tracking URI (``None``: ``$MLFLOW_TRACKING_URI``, else the store under ``experiments/``).
    split: the qrels split name written (labels of every record go into it).
    labels: ``False`` = label-free (every record, no judgments).
    materialise_dir: where the BEIR folder is written (``None``: ``<experiments>/datasets``).
    on_empty: as ``BeirDataset``'s.
    """

    def __init__(
        self,
        name: str,
        corpus: str,
        uri: str | None = None,
        split: str = "test",
        labels: bool = True,
        materialise_dir: str | None = None,
        on_empty: str = "skip",
    ) -> None:
        self.name, self.corpus, self.uri, self.split = name, corpus, uri, split
        self.labels, self.materialise_dir, self.on_empty = labels, materialise_dir, on_empty

    def load(self) -> LabelledQueries:
        from rag_lab.tracking.feedback import evaluation_records, query_text
        from rag_lab.tracking.fetch import resolve_tracking_uri
        from rag_lab.tracking.scorers import expected_grades

        where = f"mlflow dataset {self.name!r}"
        queries, qrels = [], []
        for rec in evaluation_records(self.name, resolve_tracking_uri(self.uri)):
            text = query_text(rec["inputs"])
            if text is None:
                raise DataError(f"{where}: record {rec['id']}: no question in its inputs")
            queries.append({"_id": rec["id"], "text": text, "metadata": {}})
            grades = expected_grades(rec["expectations"])
            qrels += [f"{rec['id']}\t{d}\t{g}" for d, g in sorted(grades.items())]
        if not queries:
            raise DataError(f"{where}: no records")
        body = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
        table = "query-id\tcorpus-id\tscore\n" + "".join(f"{line}\n" for line in qrels)
        digest = hashlib.blake2b((body + table).encode(), digest_size=8).hexdigest()
        folder = materialise_root(self.materialise_dir) / f"mlflow-{self.name}-{digest}"
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        (folder / "queries.jsonl").write_text(body, encoding="utf-8")
        if qrels:
            (folder / "qrels" / f"{self.split}.tsv").write_text(table, encoding="utf-8")
        elif self.labels:
            raise DataError(f"{where}: no record has expected documents (dataset.labels=false?)")
        corpus = str(Path(self.corpus).expanduser().resolve())
        return BeirDataset(
            str(folder),
            self.split,
            corpus,
            name=self.name,
            on_empty=self.on_empty,
            labels=self.labels,
        ).load()
