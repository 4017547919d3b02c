"""The one place that instantiates anything named by a config: dataset, pipeline stages,
generator, judge and tracker.

Every ``_target_`` is checked against ``ALLOWED_TARGET_PREFIXES`` before anything is built
(configs may come from disk: exports, sweeps), and stages are instantiated with
``_convert_="all"`` so they receive plain dicts and lists.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag_lab.cache import keys, open_cache
from rag_lab.errors import ConfigError
from rag_lab.parser.base import ON_ERROR
from rag_lab.paths import CONFIG_DIR
from rag_lab.pipeline.answers import JudgedAnswers
from rag_lab.pipeline.fallback import FallbackChain, FallbackLevel, FallbackPipeline, acceptance
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.sources import Merge, RoutedFallbackPipeline, Source, SourcesPipeline
from rag_lab.validate import OptionError, boolean, choice

log = logging.getLogger(__name__)

# Packages whose classes a config may name: the shipped configs and exports name only rag_lab's
# own classes (which wrap the libraries).
ALLOWED_TARGET_PREFIXES = ("rag_lab.",)

# a stage argument that the shipped configs fill with a whole group (``tokenizer: ${tokenizer}``);
# a plain option name there (``retrievers.bm25.tokenizer=jieba``) means that group's option
GROUP_ARGUMENTS = ("tokenizer", "embedder")


def check_targets(node: Any, where: str = "") -> None:
    """Raise ``ConfigError`` unless every ``_target_`` in ``node`` names a *class* defined under
    ``ALLOWED_TARGET_PREFIXES``.

    The name alone is not enough: Hydra resolves dotted paths through a module's imports, so
    ``rag_lab.pipeline.build.Path.write_text`` starts with an allowed prefix yet is ``pathlib``'s
    function. Every stage is a class, so targets must resolve to one, defined in an allowed
    package."""
    if isinstance(node, Mapping):
        target = node.get("_target_")
        if target is not None:
            here = f"{where or '<root>'}._target_={target!r}"
            if not str(target).startswith(ALLOWED_TARGET_PREFIXES):
                allowed = ", ".join(p + "*" for p in ALLOWED_TARGET_PREFIXES)
                raise ConfigError(f"{here} is not allowed (allowed: {allowed})")
            from hydra.utils import get_class

            try:
                cls = get_class(str(target))
            except Exception as exc:
                raise ConfigError(
                    f"{here} is not allowed: it does not name a class "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
                ) from None
            module = str(getattr(cls, "__module__", ""))
            if not module.startswith(ALLOWED_TARGET_PREFIXES):
                raise ConfigError(
                    f"{here} is not allowed: it resolves to {module}."
                    f"{cls.__qualname__}, outside the allowed packages"
                )
        for k, v in node.items():
            check_targets(v, f"{where}.{k}" if where else str(k))
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            check_targets(v, f"{where}[{i}]")


def _slot_protocols() -> dict[str, type]:
    """The protocol a class must satisfy in each slot: the top-level group a ``where`` starts with
    (``retrievers.bm25`` → ``retrievers``, ``judge=nli`` → ``judge``), or the argument name of a
    nested stage (``embedder``, ``tokenizer``, an auto parser's ``parsers``)."""
    from rag_lab.access.base import AccessPolicy
    from rag_lab.chunker.base import Chunker
    from rag_lab.context.base import ContextStage
    from rag_lab.contract.base import Contract
    from rag_lab.dataset.base import Dataset
    from rag_lab.embedder.base import Embedder
    from rag_lab.fusion.base import Fusion
    from rag_lab.generator.base import Generator
    from rag_lab.judge.base import Judge
    from rag_lab.parser.base import Parser
    from rag_lab.postprocess.base import PostProcessor
    from rag_lab.protocols import Tracker
    from rag_lab.query_transforms.base import QueryTransform
    from rag_lab.retrievers.base import Retriever
    from rag_lab.sources.base import SourceRouter
    from rag_lab.tokenizer.base import Tokenizer

    return {
        "dataset": Dataset,
        "parser": Parser,
        "parsers": Parser,
        "chunker": Chunker,
        "contract": Contract,
        "permissions": AccessPolicy,
        "retrievers": Retriever,
        "sources": SourceRouter,
        "fusion": Fusion,
        "reranker": PostProcessor,  # the reranker group runs as the first post-processor
        "postprocess": PostProcessor,
        "query_transforms": QueryTransform,
        "generator": Generator,
        "context": ContextStage,
        "judge": Judge,
        "tracking": Tracker,
        "embedder": Embedder,
        "tokenizer": Tokenizer,
        "tokenizers": Tokenizer,  # tokenizer=auto's choices
    }


def _methods(protocol: type) -> list[str]:
    """The methods a protocol names (its data members and properties may be instance attributes,
    so a class cannot be checked for them)."""
    names: list[str] = []
    for base in protocol.__mro__:
        if base is object or base.__module__ == "typing":
            continue
        for name, value in vars(base).items():
            public = not name.startswith("_") or name == "__call__"
            if public and inspect.isfunction(value) and name not in names:
                names.append(name)
    return names


def _defines(cls: type, name: str) -> bool:
    # ``hasattr`` is not enough for ``__call__``: every class has ``type.__call__``
    return any(name in vars(base) for base in cls.__mro__ if base is not object)


def check_slots(node: Any, where: str, protocol: type | None = None) -> None:
    """Raise ``ConfigError`` unless the class each ``_target_`` of ``node`` names satisfies its
    slot's protocol: ``node`` itself that of ``where``'s group (or ``protocol``), a nested stage
    that of its argument name (``embedder`` → Embedder, ``tokenizer`` → Tokenizer). A nested
    ``_target_`` under any other argument is refused: only stages are built from a config.
    Run after ``check_targets`` (the classes are imported to be inspected)."""
    from hydra.utils import get_class

    slots = _slot_protocols()
    slot = re.split(r"[.=\[]", where, maxsplit=1)[0]
    if protocol is None:
        protocol = slots.get(slot)

    def visit(value: Any, here: str, expected: type | None, nested: bool) -> None:
        if isinstance(value, Mapping):
            target = value.get("_target_")
            if target is not None:
                if expected is None and nested:
                    raise ConfigError(
                        f"{here}._target_={target!r} is not allowed: a nested stage is built only "
                        f"as {', '.join(n for n in slots if n in _NESTED)}"
                    )
                if expected is not None:
                    cls = get_class(str(target))
                    missing = [m for m in _methods(expected) if not _defines(cls, m)]
                    if missing:
                        article = "an" if expected.__name__[0] in "AEIOU" else "a"
                        raise ConfigError(
                            f"{here}._target_={target!r} is not {article} {expected.__name__} "
                            f"({expected.__module__}.{expected.__name__}: no "
                            f"{', '.join(missing)})"
                        )
            for k, v in value.items():
                key = str(k)
                if key == "_target_":
                    continue
                child = slots.get(key) if key in _NESTED else None
                if target is None and child is None:
                    child = expected  # a plain mapping of stages (``parsers: {.md: ...}``)
                visit(v, f"{here}.{key}", child, nested or target is not None)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                visit(v, f"{here}[{i}]", expected, nested)

    visit(node, where or "<root>", protocol, False)


# argument names under which a stage builds another stage (``tokenizer: ${tokenizer}``; an LLM
# query transform's ``generator: ${generator}``)
_NESTED = ("embedder", "tokenizer", "tokenizers", "parsers", "generator")

# arguments that make a library import or unpickle code shipped with a model: refused in configs
# read from disk (``check_code_loading``) unless the user says they trust it
CODE_LOADING_ARGUMENTS: dict[str, str] = {
    "trust_remote_code": "runs the Python files of a model folder",
    "weights_only": "lets torch.load unpickle arbitrary objects",
    "allow_pickle": "lets numpy.load unpickle arbitrary objects",
    # an adapter's opt-in for a package outside rag_lab.adapters.imports.ALLOWED_IMPORT_PREFIXES
    "allow_imports": "lets an adapter import and run code from the packages it lists",
}


def check_code_loading(node: Any, where: str = "") -> None:
    """Raise ``ConfigError`` when ``node`` (anywhere, also inside ``model_kwargs``-style dicts)
    sets an argument of ``CODE_LOADING_ARGUMENTS`` to its code-loading value:
    ``trust_remote_code`` / ``allow_pickle`` true, ``weights_only`` false."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            key, here = str(k), f"{where}.{k}" if where else str(k)
            if key in CODE_LOADING_ARGUMENTS:
                loads_code = (v is False) if key == "weights_only" else bool(v)
                if loads_code:
                    raise ConfigError(
                        f"{here}={v!r} {CODE_LOADING_ARGUMENTS[key]} (only if you trust the "
                        "export: load_pipeline(..., trust_remote_code=True) / --trust-remote-code)"
                    )
            check_code_loading(v, here)
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            check_code_loading(v, f"{where}[{i}]")


def instantiate(node: Any, where: str, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate`` behind the allow-list and the slot check (``check_targets``,
    ``check_slots``: the class named for ``where``'s slot must satisfy its protocol); a
    constructor's error becomes a one-line ``ConfigError`` naming ``where``."""
    from hydra.utils import instantiate as hydra_instantiate

    check_targets(node, where)
    check_slots(node, where)
    try:
        return hydra_instantiate(node, _convert_="all", **kwargs)
    except Exception as exc:
        cause: BaseException = exc
        while cause.__cause__ is not None:  # hydra wraps the constructor's own error
            cause = cause.__cause__
        if isinstance(cause, OptionError):  # a constructor's bad argument: name the full key
            raise cause.at(where) from None
        if isinstance(cause, ConfigError):
            raise cause from None
        raise ConfigError(f"cannot build {where}: {type(cause).__name__}: {cause}") from exc


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def _group_option(group: str, value: str, where: str) -> dict[str, Any]:
    path = Path(CONFIG_DIR) / group / f"{value}.yaml"
    if not path.is_file():
        options = sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))
        raise ConfigError(
            f"{where}={value}: no {group} option {value!r} "
            f"(options: {', '.join(options)}; or set the whole group: {group}={value})"
        )
    node = OmegaConf.load(path)
    return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]


def _stage_nodes(group: Any, where: str) -> dict[str, dict[str, Any]]:
    """A choose-many group (``retrievers``, ``postprocess``, ``query_transforms``) as plain
    ``{name: config}``, each a mapping with a ``_target_``; option names given for a group
    argument (``tokenizer=jieba`` inside a retriever) are expanded to that option's config."""
    out: dict[str, dict[str, Any]] = {}
    for name, node in (_plain(group) or {}).items():
        if node is None:
            continue
        if not isinstance(node, Mapping) or "_target_" not in node:
            raise ConfigError(
                f"{where}.{name}: expected a stage config with a _target_, got {node!r}"
            )
        node = dict(node)
        for arg in GROUP_ARGUMENTS:
            if isinstance(node.get(arg), str):
                node[arg] = _group_option(arg, node[arg], f"{where}.{name}.{arg}")
        out[str(name)] = node
    return out


def build_dataset(cfg: DictConfig) -> Any:
    """The configured dataset (``load()`` gives the labelled split)."""
    return instantiate(cfg.dataset, "dataset")


def build_parser(node: Any) -> tuple[Any, Any, str]:
    """``(parser, its config, on_error)``: ``parser.on_error`` is the corpus read's policy for a
    file the parser refuses (``fail`` | ``skip``), kept in the group's config but not passed to
    the parser."""
    parser_cfg = _plain(node)
    on_error = "fail"
    if isinstance(parser_cfg, dict):
        on_error = str(parser_cfg.pop("on_error", "fail"))
        # an auto parser's entries may name parser options (`pdf: pdf_plain`), like a retriever's
        # `tokenizer: jieba`; the policy of the option's file is the outer parser's
        inner = parser_cfg.get("parsers")
        if isinstance(inner, dict):
            expanded = {}
            for suffix, entry in inner.items():
                if isinstance(entry, str):
                    entry = _group_option("parser", entry, f"parser.parsers.{suffix}")
                if isinstance(entry, dict):
                    entry = {k: v for k, v in entry.items() if k != "on_error"}
                    if "_target_" not in entry:
                        raise ConfigError(_no_parser_target(str(suffix), entry))
                expanded[suffix] = entry
            parser_cfg["parsers"] = expanded
        try:
            choice(on_error, "on_error", ON_ERROR)
        except OptionError as exc:
            raise exc.at("parser") from None
    return instantiate(parser_cfg, "parser"), parser_cfg, on_error


def _no_parser_target(suffix: str, entry: Mapping[str, Any]) -> str:
    """An auto parser's entry that holds settings but no parser: what Hydra leaves of
    ``+parser.parsers.db=sql_records +parser.parsers.db.query=...`` (the second override
    replaces the option's name with a mapping)."""
    names = ", ".join(sorted(map(str, entry))) or "nothing"
    return (
        f"parser.parsers.{suffix}: settings ({names}) without a parser: an option's name and its "
        f"settings cannot both be set with +key=value; add the option as a defaults entry, then "
        f"set its keys: +parser@parser.parsers.{suffix}=<option> "
        f"parser.parsers.{suffix}.<key>=<value> (e.g. +parser@parser.parsers.{suffix}=sql_records"
        f' parser.parsers.{suffix}.query="SELECT ...")'
    )


AUTO_TOKENIZER = "rag_lab.tokenizer.AutoTokenizer"


def _tokenizer_slots(node: Any, where: str) -> list[tuple[str, dict[str, Any], str]]:
    """``(where, parent, key)`` of every ``tokenizer`` stage config under ``node``."""
    found: list[tuple[str, dict[str, Any], str]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            here = f"{where}.{k}"
            if k == "tokenizer" and isinstance(v, dict) and "_target_" in v:
                found.append((here, node, k))
            else:
                found.extend(_tokenizer_slots(v, here))
    return found


def resolve_tokenizers(stage_cfgs: dict[str, Any], where: str, data: Any | None) -> None:
    """Detect the corpus' script once (the Han share of a sample of ``data``'s corpus files,
    ``rag_lab.tokenizer.script``) for the tokenizers of ``stage_cfgs`` (plain dicts, changed in
    place): a ``tokenizer=auto`` config is replaced by the config of its choice (logged; the
    stage cache is then keyed by it), and a tokenizer that does not segment Chinese given a
    Chinese corpus is warned about. Without ``data`` nothing is changed (an auto tokenizer then
    decides on its first call)."""
    from hydra.utils import get_class

    from rag_lab.tokenizer.auto import choose
    from rag_lab.tokenizer.script import (
        CJK_CORPUS_SHARE,
        cjk_share,
        corpus_sample,
        segments_chinese,
    )

    slots = _tokenizer_slots(stage_cfgs, where)
    if data is None or not slots:
        return
    samples: dict[int, float | None] = {}

    def share(chars: int) -> float | None:
        if chars not in samples:
            samples[chars] = cjk_share(corpus_sample(data.corpus_sources, chars), chars)
        return samples[chars]

    for here, parent, key in slots:
        node = parent[key]
        if node["_target_"] == AUTO_TOKENIZER:
            chars = int(node.get("sample_chars", 200_000))
            value = share(chars)
            threshold = float(node.get("min_cjk_share", CJK_CORPUS_SHARE))
            chosen = choose(value, threshold)
            parent[key] = dict(node["tokenizers"][chosen])
            log.info(
                "%s=auto: %s (%s) for %s: Han share %s of the corpus sample (threshold %.2f)",
                here,
                chosen,
                str(parent[key]["_target_"]).rsplit(".", 1)[-1],
                data.name,
                "n/a" if value is None else f"{value:.2f}",
                threshold,
            )
            continue
        value = share(200_000)
        if value is not None and value >= CJK_CORPUS_SHARE:
            if not segments_chinese(get_class(str(node["_target_"]))):
                log.warning(
                    "%s=%s does not segment Chinese, but %.0f%% of the letters in %s's "
                    "corpus are Chinese: term matching misses most words (use tokenizer=jieba or "
                    "tokenizer=auto)",
                    here,
                    str(node["_target_"]).rsplit(".", 1)[-1],
                    100 * value,
                    data.name,
                )


def build_pipeline(cfg: DictConfig, data: Any | None = None) -> Pipeline:
    """Instantiate every stage named by ``cfg`` (an ``evaluate``-shaped config, an export's
    ``pipeline.yaml`` or a training config) and the pipeline they form. ``data``: the loaded split
    (``LabelledQueries``), whose corpus decides ``tokenizer=auto`` and the Chinese-corpus warning
    (``resolve_tokenizers``); without it, a config with an auto tokenizer and a ``dataset`` loads
    the dataset to decide."""
    retriever_cfgs = _stage_nodes(cfg.get("retrievers"), "retrievers")
    if not retriever_cfgs:
        raise ConfigError("no retriever selected: set retrievers=[bm25], [dense] or [dense,bm25]")
    has_auto = any(
        parent[key]["_target_"] == AUTO_TOKENIZER
        for _, parent, key in _tokenizer_slots(retriever_cfgs, "retrievers")
    )
    if data is None and has_auto and cfg.get("dataset"):
        data = build_dataset(cfg).load()
    elif data is None and has_auto:
        log.warning("tokenizer=auto without a corpus to decide from: it decides on its first texts")
    resolve_tokenizers(retriever_cfgs, "retrievers", data)
    parser, parser_cfg, on_parse_error = build_parser(cfg.parser)
    chunker = instantiate(cfg.chunker, "chunker")
    contract = instantiate(cfg.contract, "contract") if cfg.get("contract") else None
    access = instantiate(cfg.permissions, "permissions") if cfg.get("permissions") else None
    # a dense retriever's `embedder: ${embedder}` (and a stage's `tokenizer: ${tokenizer}`) are
    # interpolations, so overriding the top-level group changes every stage that uses it.
    retrievers = {n: instantiate(c, f"retrievers.{n}") for n, c in retriever_cfgs.items()}
    fusion = (
        instantiate(cfg.fusion, "fusion") if cfg.get("fusion") and len(retrievers) > 1 else None
    )
    post_cfgs: dict[str, Any] = {}
    if cfg.get("reranker"):  # the single-choice group runs first, under the name "reranker"
        post_cfgs["reranker"] = _plain(cfg.reranker)
    for name, node in _stage_nodes(cfg.get("postprocess"), "postprocess").items():
        if name in post_cfgs:
            raise ConfigError(f"postprocess.{name}: the name is taken by the reranker group")
        post_cfgs[name] = node
    postprocessors = {
        n: instantiate(c, "reranker" if n == "reranker" else f"postprocess.{n}")
        for n, c in post_cfgs.items()
    }
    transforms = {
        n: instantiate(c, f"query_transforms.{n}")
        for n, c in _stage_nodes(cfg.get("query_transforms"), "query_transforms").items()
    }
    for node in retriever_cfgs.values():
        node.pop("cache_dir", None)  # where the cache lives does not change what is in it
        # nor which processes encoded the corpus, nor where an endpoint embedder's server is
        if isinstance(node.get("embedder"), dict):
            node["embedder"] = keys.embedder_key_config(node["embedder"])
    stage_configs = {
        "parser": parser_cfg,
        "chunker": _plain(cfg.chunker),
        "contract": _plain(cfg.contract) if contract is not None else None,
        "retrievers": retriever_cfgs,
    }
    cache_dir = OmegaConf.select(cfg, "cache.dir", default=None)
    # the retrieval depth: read here, once, and checked by the pipeline
    retrieve_k = OmegaConf.select(cfg, "evaluation.retrieve_k", default=None)
    if retrieve_k is None:
        raise ConfigError("missing setting evaluation.retrieve_k")
    chain = build_fallback(cfg)
    routed = build_sources(cfg, data)
    stages: dict[str, Any] = {
        "parser": parser,
        "chunker": chunker,
        "retrievers": retrievers,
        "fusion": fusion,
        "postprocessors": postprocessors,
        "query_transforms": transforms,
        "retrieve_k": retrieve_k,
        "cache": open_cache(
            cache_dir, on_error=OmegaConf.select(cfg, "cache.on_error", default=None)
        )
        if cache_dir
        else None,
        "stage_configs": stage_configs,
        "contract": contract,
        "on_parse_error": on_parse_error,
        "access": access,
    }
    pipe: Pipeline
    gate = None
    if chain is not None and chain.judged:  # a level is kept only when its answer is faithful
        gate = build_answer_check(cfg, stages["cache"])
    if routed is not None and chain is not None:  # the chain after the routed merge
        router, sources, merging = routed
        pipe = RoutedFallbackPipeline(
            **stages, router=router, sources=sources, merging=merging, chain=chain, answers=gate
        )
    elif routed is not None:
        router, sources, merging = routed
        pipe = SourcesPipeline(**stages, router=router, sources=sources, merging=merging)
    elif chain is None:
        pipe = Pipeline(**stages)
    else:
        pipe = FallbackPipeline(**stages, chain=chain, answers=gate)
    log.info(
        "pipeline: parser=%s chunker=%s query_transforms=%s retrievers=%s fusion=%s postprocess=%s",
        type(parser).__name__,
        type(chunker).__name__,
        {n: type(t).__name__ for n, t in transforms.items()},
        {n: type(r).__name__ for n, r in retrievers.items()},
        type(fusion).__name__ if fusion else None,
        {n: type(p).__name__ for n, p in postprocessors.items()},
    )
    return pipe


FALLBACK_LEVEL_KEYS = ("corpus", "retrievers", "query_transforms", "postprocess", "accept")


def _retriever_config(main: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    """Retriever ``name`` for a fallback level: the main pipeline's own config when it has one,
    else the ``retrievers`` group's option of that name (``conf/retrievers/<name>.yaml``),
    resolved against the main config (its tokenizer, its embedder). So a level (and level 0's
    acceptance) works whatever retrievers the main pipeline kept."""
    have = dict(main.get("retrievers") or {})
    if name in have:
        return dict(have[name])
    path = Path(CONFIG_DIR) / "retrievers" / f"{name}.yaml"
    node = OmegaConf.load(path) if path.is_file() else None
    if not isinstance(node, DictConfig) or name not in node:
        options = sorted(p.stem for p in (Path(CONFIG_DIR) / "retrievers").glob("*.yaml"))
        raise ConfigError(
            f"{where}: {name} is neither a retriever of the main pipeline "
            f"({', '.join(have) or 'none'}) nor a retrievers option ({', '.join(options)})"
        )
    rest = {k: v for k, v in main.items() if k != "retrievers"}
    merged = OmegaConf.merge(OmegaConf.create(rest), {"retrievers": {name: node[name]}})
    return OmegaConf.to_container(merged.retrievers[name], resolve=True)  # type: ignore[return-value]


def _part_config(
    main: dict[str, Any], node: Any, where: str, known_keys: Sequence[str]
) -> dict[str, Any]:
    """The pipeline config of a part of the main one (a fallback level, a source): ``node``
    checked (a mapping of ``known_keys``; ``query_transforms`` / ``postprocess`` switches kept
    or dropped from the main config), its retrievers in place of the main ones."""
    if not isinstance(node, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {node!r}")
    unknown = sorted(set(node) - set(known_keys))
    if unknown:
        known = ", ".join(known_keys)
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {known})")
    keep = {}
    for key in ("query_transforms", "postprocess"):
        try:
            keep[key] = boolean(node.get(key, True), key)
        except OptionError as exc:
            raise exc.at(where) from None
    return _sub_config(
        main, node.get("retrievers"), keep["query_transforms"], keep["postprocess"], where
    )


def _sub_config(
    main: dict[str, Any], names: Any, transforms: bool, post: bool, where: str
) -> dict[str, Any]:
    """The main config cut for a level: ``names`` (``None``: the main retrievers) built by
    ``_retriever_config``, query transforms and post-processors (reranker included) kept or
    dropped; one retriever needs no fusion, several keep the main fusion (weights of retrievers
    the level lacks are dropped)."""
    sub = dict(main)
    if names is not None:
        if not names:
            raise ConfigError(f"{where}.retrievers: an empty list (null = the main retrievers)")
        sub["retrievers"] = {
            n: _retriever_config(main, str(n), f"{where}.retrievers") for n in names
        }
        fusion = sub.get("fusion")
        if isinstance(fusion, Mapping) and isinstance(fusion.get("weights"), Mapping):
            weights = {n: w for n, w in fusion["weights"].items() if n in sub["retrievers"]}
            sub["fusion"] = {**fusion, "weights": weights}
    if not transforms:
        sub["query_transforms"] = {}
    if not post:
        sub["postprocess"] = {}
        sub["reranker"] = None
    return sub


def build_fallback(cfg: DictConfig) -> FallbackChain | None:
    """The ``fallback`` group's chain (``rag_lab.pipeline.fallback``), or ``None`` when it is off.
    Each level is a pipeline built here from the main config: the same stages, with ``retrievers``
    cut to the names it lists (``null``: all; a name the main pipeline lacks is built from the
    ``retrievers`` group's option of that name), the query transforms and post-processors
    (reranker included) kept or dropped, and its own ``corpus`` folder (``null``: the main
    corpus). Level 0's acceptance may judge a retriever the main pipeline lacks: it then runs
    alone over the main corpus (the chain's ``probe``)."""
    node = _plain(cfg.get("fallback"))
    if not node:
        return None
    if not isinstance(node, Mapping):
        raise ConfigError(f"fallback: expected a mapping (accept, levels), got {node!r}")
    unknown = sorted(set(node) - {"accept", "levels"})
    if unknown:
        raise ConfigError(f"fallback: unknown key(s) {', '.join(unknown)} (known: accept, levels)")
    main: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    main.pop("fallback", None)
    main.pop("sources", None)  # a level searches without routing (RoutedFallbackPipeline)
    levels = []
    for name, level in (node.get("levels") or {}).items():
        where = f"fallback.levels.{name}"
        if level is None:
            continue  # a level dropped on the command line: fallback.levels.standards=null
        sub = _part_config(main, level, where, FALLBACK_LEVEL_KEYS)
        corpus = level.get("corpus")
        levels.append(
            FallbackLevel(
                str(name),
                build_pipeline(OmegaConf.create(sub)),
                acceptance(level.get("accept"), f"{where}.accept"),
                Path(str(corpus)).expanduser() if corpus else None,
            )
        )
    accept = acceptance(node.get("accept"), "fallback.accept")
    probe = None
    stage = accept.stage
    if stage is not None and stage not in (main.get("retrievers") or {}) and _is_retriever(stage):
        sub = _sub_config(main, [stage], True, False, "fallback.accept.stage")
        sub["fusion"] = None
        probe = build_pipeline(OmegaConf.create(sub))
        log.info(
            "fallback: level 0 judged on %s, run beside the pipeline (not among its retrievers)",
            stage,
        )
    chain = FallbackChain(accept, levels, probe)
    log.info("fallback chain: %s", " -> ".join(chain.names()))
    return chain


SOURCE_KEYS = (
    "corpus",
    "include",
    "parser",
    "chunker",
    "retrievers",
    "query_transforms",
    "postprocess",
)


def _source_stage(group: str, value: Any, where: str) -> dict[str, Any]:
    """A source's parser or chunker: an option name of the group or a mapping with a
    ``_target_``."""
    if isinstance(value, str):
        return _group_option(group, value, where)
    if isinstance(value, Mapping) and "_target_" in value:
        return dict(value)
    raise ConfigError(f"{where}: expected a {group} option name or a mapping with a _target_")


def build_sources(
    cfg: DictConfig, data: Any | None = None
) -> tuple[Any, list[Source], Merge] | None:
    """The ``sources`` group (``rag_lab.pipeline.sources``), or ``None`` when it is off: the
    router (the group's ``_target_``), each of ``corpora`` as a pipeline built here from the main
    config (like a fallback level: ``retrievers`` cut to the names it lists, the query transforms
    and post-processors kept or dropped; its own ``parser`` and ``chunker``, an option name or a
    mapping, ``null``: the main ones; its ``corpus`` folder, ``null``: the main corpus folder, and
    ``include`` patterns picking files there) and the ``merge`` of the sources' runs."""
    node = _plain(cfg.get("sources"))
    if not node:
        return None
    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ConfigError(f"sources: expected a router config with a _target_, got {node!r}")
    node = dict(node)
    corpora = node.pop("corpora", None)
    merge_node = node.pop("merge", None) or {}
    if not isinstance(corpora, Mapping) or not corpora:
        raise ConfigError("sources.corpora: expected a mapping of source names to their corpora")
    router = instantiate(node, "sources")
    if not isinstance(merge_node, Mapping):
        raise ConfigError(
            f"sources.merge: expected a mapping (method, k, weights), got {merge_node!r}"
        )
    bad = sorted(set(merge_node) - {"method", "k", "weights", "route_weights"})
    if bad:
        raise ConfigError(
            f"sources.merge: unknown key(s) {', '.join(bad)} "
            "(known: k, method, route_weights, weights)"
        )
    try:
        merging = Merge(**{k: v for k, v in merge_node.items() if v is not None})
    except OptionError as exc:
        raise exc.at("sources.merge") from None
    main: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    main.pop("sources", None)
    main.pop("fallback", None)
    on_error = (main.get("parser") or {}).get("on_error", "fail")
    sources = []
    for name, spec in corpora.items():
        where = f"sources.corpora.{name}"
        if spec is None:
            continue  # a source dropped on the command line: sources.corpora.standards=null
        sub = _part_config(main, spec, where, SOURCE_KEYS)
        if spec.get("parser") is not None:
            parser = _source_stage("parser", spec["parser"], f"{where}.parser")
            sub["parser"] = {**parser, "on_error": parser.get("on_error", on_error)}
        if spec.get("chunker") is not None:
            sub["chunker"] = _source_stage("chunker", spec["chunker"], f"{where}.chunker")
        include = spec.get("include") or []
        if isinstance(include, str) or not isinstance(include, (list, tuple)):
            raise ConfigError(f"{where}.include: expected a list of patterns, got {include!r}")
        corpus = spec.get("corpus")
        sources.append(
            Source(
                str(name),
                build_pipeline(OmegaConf.create(sub), data),
                Path(str(corpus)).expanduser() if corpus else None,
                tuple(str(p) for p in include),
            )
        )
    if not sources:
        raise ConfigError("sources.corpora: every source was dropped")
    log.info("sources: %s, routed by %s", ", ".join(s.name for s in sources), type(router).__name__)
    return router, sources, merging


def _is_retriever(name: str) -> bool:
    """A ``retrievers`` group option (not a post-processor's or fusion's stage name)."""
    return (Path(CONFIG_DIR) / "retrievers" / f"{name}.yaml").is_file()


def build_answer_check(cfg: DictConfig, cache: Any | None) -> JudgedAnswers:
    """The fallback chain's judge gate (``accept.judge: true``): the run's generator writes the
    answer from a level's top ``evaluation.answer_k`` chunks (through the ``context`` stages) and
    its judge's verdict keeps the level (``rag_lab.pipeline.answers.JudgedAnswers``)."""
    generator, judge = build_generator(cfg), build_judge(cfg)
    if generator is None or judge is None:
        raise ConfigError(
            "fallback: accept.judge=true needs a generator and a judge (generator=... judge=...)"
        )
    k = OmegaConf.select(cfg, "evaluation.answer_k", default=5)
    return JudgedAnswers(generator, judge, int(k), cache, build_context_stages(cfg, generator))


def build_generator(cfg: DictConfig) -> Any | None:
    return instantiate(cfg.generator, "generator") if cfg.get("generator") else None


def build_context_stages(cfg: DictConfig, generator: Any | None = None) -> dict[str, Any]:
    """The ``context`` list (``context=[order,dedupe,distill]``), in order; ``{}`` when unset.
    ``generator``: the run's built generator, handed to a stage whose ``generator`` is the
    top-level group's config (``llm_distill``), so the model is not loaded twice."""
    top = _plain(cfg.get("generator"))
    stages = {}
    for n, c in _stage_nodes(cfg.get("context"), "context").items():
        if generator is not None and top and c.get("generator") == top:
            rest = {k: v for k, v in c.items() if k != "generator"}
            stages[n] = instantiate(rest, f"context.{n}", generator=generator)
        else:
            stages[n] = instantiate(c, f"context.{n}")
    if stages:
        log.info("context stages: %s", {n: type(s).__name__ for n, s in stages.items()})
    return stages


def build_judge(cfg: DictConfig) -> Any | None:
    return instantiate(cfg.judge, "judge") if cfg.get("judge") else None


def build_tracker(cfg: DictConfig) -> Any | None:
    """The configured tracker; ``None`` with ``tracking=none``."""
    return instantiate(cfg.tracking, "tracking") if cfg.get("tracking") else None
