"""``synthesize(cfg)``: the recipe behind ``rag-lab synthesize`` (``conf/synthesize.yaml``).

Without ``synthesis.review``: load the configured corpus (parse, chunk; through the stage cache),
ask the configured LLM generator for questions with verbatim quotes
(``rag_lab.dataset.synthesis.synthesize``) and write ``review.jsonl`` (every candidate
``pending``) and ``synthesis.json`` (counts, share kept, examples of dropped questions) into the
run folder. With ``synthesis.review=FILE``: turn the reviewed file into split
``synthesis.split`` of the dataset folder (``queries_<split>.jsonl``, ``qrels/<split>.tsv``).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from omegaconf import DictConfig

from rag_lab.dataset.synthesis import read_review, synthesize, write_review, write_split
from rag_lab.errors import ConfigError
from rag_lab.io.atomic import write_atomic
from rag_lab.pipeline import build
from rag_lab.validate import OptionError, boolean, integer

REVIEW_FILE = "review.jsonl"
SUMMARY_FILE = "synthesis.json"


def _options(cfg: DictConfig) -> dict[str, object]:
    s = cfg.synthesis
    try:
        return {
            "per_chunk": integer(s.per_chunk, "per_chunk", ge=1),
            "max_chunks": None
            if s.max_chunks is None
            else integer(s.max_chunks, "max_chunks", ge=1),
            "min_chars": integer(s.min_chars, "min_chars", ge=0),
            "seed": integer(s.seed, "seed"),
        }
    except OptionError as exc:
        raise exc.at("synthesis") from None


def write_reviewed_split(cfg: DictConfig) -> tuple[Path, Path]:
    """The accepted questions of ``synthesis.review`` as a split of ``dataset.path``."""
    s = cfg.synthesis
    root = cfg.dataset.get("path")
    if not root or not Path(root).is_dir():
        raise ConfigError(f"dataset.path={root}: not a dataset folder to write the split into")
    split = str(s.split)
    if not split or "/" in split or split.startswith("."):
        raise ConfigError(f"synthesis.split={split!r}: a plain split name such as synthetic")
    queries, qrels = read_review(Path(s.review), boolean(s.accept_pending, "accept_pending"))
    return write_split(Path(root), split, queries, qrels)


def synthesize_run(cfg: DictConfig) -> dict[str, object]:
    """Candidates for review from the configured corpus; returns the summary it wrote."""
    from rag_lab.evaluate import load  # the pipeline's imports wait until a run starts

    options = _options(cfg)
    generator = build.build_generator(cfg)
    if generator is None:
        raise ConfigError(
            "synthesis needs an LLM generator: generator=openai (any OpenAI-compatible endpoint) "
            "or generator=transformers"
        )
    out = Path(cfg.paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _, pipe, _ = load(cfg)
    result = synthesize(list(pipe.chunks.values()), generator, **options)  # type: ignore[arg-type]
    write_review(out / REVIEW_FILE, result.kept)
    summary: dict[str, object] = {
        "chunks_asked": result.n_chunks,
        "questions_generated": result.n_generated,
        "quote_not_in_source": result.n_quote_not_in_source,
        "unparsed_lines": result.n_unparsed_lines,
        "kept": len(result.kept),
        "share_kept": result.share_kept,
        "examples_dropped": list(result.samples_dropped),
        "examples_kept": [asdict(c) for c in result.kept[:5]],
    }
    write_atomic(out / SUMMARY_FILE, json.dumps(summary, ensure_ascii=False, indent=2) + "\n")
    return summary
