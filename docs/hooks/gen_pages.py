"""MkDocs hook (``hooks:`` in mkdocs.yml): the pages written from the code and the configs.

Everything here is discovered from the files present at build time, never from a list of module
paths, because the package layout moves (0.5):

- ``stages/index.md`` and one page per config group (``stages/<group>.md``, a folder under
  ``rag_lab/conf/``): the group's options, each with its leading YAML comment, its ``_target_``
  classes and the file itself, and the ``Protocol`` classes of ``rag_lab/<group>/base.py`` with
  their docstrings (read with ``ast``: rag_lab is never imported). A hand-written
  ``docs/stages/<group>.md`` keeps its prose; the generated sections are appended to it.
- ``api/index.md``, ``api/rag_lab.md`` (the top-level modules) and one page per subpackage of
  ``rag_lab/`` (a folder with an ``__init__.py``), each a ``::: rag_lab.<package>``
  mkdocstrings directive.

The nav entries ``stages/index.md`` and ``api/index.md`` in mkdocs.yml are expanded into
sections listing the generated pages.
"""

from __future__ import annotations

import ast
import copy
import html
import re
from pathlib import Path
from typing import Any

import yaml
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "rag_lab"
CONF = PKG / "conf"

# nav order of the config groups: the pipeline's order; a group not named here comes after them
PIPELINE_ORDER = (
    "dataset",
    "parser",
    "contract",
    "chunker",
    "tokenizer",
    "embedder",
    "encoding",
    "query_transforms",
    "retrievers",
    "fusion",
    "reranker",
    "postprocess",
    "fallback",
    "sources",
    "context",
    "generator",
    "judge",
    "tracking",
)
# groups that configure the run, not a stage of the pipeline (listed after the stages)
RUN_GROUPS = ("experiment", "hparams_search", "walk", "hydra", "paths", "local")
# groups chosen other than by a `group=option` override of rag-lab evaluate
CHOICE_SYNTAX = {"walk": "rag-lab walk --walk {name}"}

_generated: dict[str, str] = {}  # src_uri -> the sections appended to the page


# ---------------------------------------------------------------- discovery


def config_groups() -> list[str]:
    """Every folder of ``rag_lab/conf``, stages in pipeline order first, then the rest."""
    if not CONF.is_dir():
        return []
    found = sorted(p.name for p in CONF.iterdir() if p.is_dir() and not p.name.startswith("_"))

    def rank(name: str) -> tuple[int, int, str]:
        if name in PIPELINE_ORDER:
            return (0, PIPELINE_ORDER.index(name), name)
        if name in RUN_GROUPS:
            return (2, RUN_GROUPS.index(name), name)
        return (1, 0, name)

    return sorted(found, key=rank)


def is_stage(group: str) -> bool:
    return group not in RUN_GROUPS


def subpackages() -> list[str]:
    """Folders directly under ``rag_lab/`` that are packages (hold an ``__init__.py``)."""
    return sorted(
        p.parent.name for p in PKG.glob("*/__init__.py") if not p.parent.name.startswith("_")
    )


def top_level_modules() -> list[str]:
    """``rag_lab/<name>.py`` modules, except where a package of the same name shadows one."""
    packages = set(subpackages())
    return sorted(
        p.stem for p in PKG.glob("*.py") if not p.stem.startswith("_") and p.stem not in packages
    )


def evaluate_defaults() -> dict[str, str]:
    """Group -> its default choice in ``evaluate.yaml``'s defaults list (as written there)."""
    path = CONF / "evaluate.yaml"
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    for entry in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                name = str(key).split()[-1]  # "optional local", "override hydra/launcher"
                out[name] = "null" if value is None else str(value)
    return out


# ---------------------------------------------------------------- text helpers

_CODE_SPAN = re.compile(r"(`[^`]*`)")


def prose(text: str) -> str:
    """Comment or docstring text as Markdown: ``rst`` literals become code spans; outside code
    spans, ``<`` ``>`` ``&`` are escaped (``<name>`` is not an HTML tag) and ``*`` is literal."""
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    parts = _CODE_SPAN.split(text)
    for i in range(0, len(parts), 2):  # even parts lie outside code spans
        parts[i] = html.escape(parts[i], quote=False).replace("*", r"\*")
    return "".join(parts)


def comment_blocks(lines: list[str]) -> str:
    """Comment lines (``#`` stripped) as Markdown: lines indented by two spaces or more (the
    commands the configs quote) become a fenced block, the rest prose."""
    out: list[str] = []
    code: list[str] = []

    def flush() -> None:
        if code:
            out.extend(["", "```bash", *code, "```", ""])
            code.clear()

    for line in lines:
        if line.startswith("  ") and line.strip():
            code.append(line.strip())
        else:
            flush()
            out.append(prose(line.strip()))
    flush()
    return "\n".join(out).strip()


def leading_comment(text: str) -> list[str]:
    """The comment lines before the first key of a YAML file (``# @package`` left out)."""
    lines: list[str] = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped:
            if lines:
                lines.append("")
            continue
        if not stripped.startswith("#"):
            break
        if stripped.startswith("# @package"):
            continue
        lines.append(re.sub(r"^#\s?", "", stripped))
    while lines and not lines[-1]:
        lines.pop()
    return lines


def first_sentence(lines: list[str]) -> str:
    """The comment's first sentence (its first paragraph up to ". " or ": "), for a table cell."""
    paragraph = []
    for line in lines:
        if not line.strip() or line.startswith("  "):
            break
        paragraph.append(line.strip())
    text = " ".join(paragraph)
    match = re.search(r"[.;](\s|$)|:\s+(?=rag-lab\b)", text)  # a sentence, or before a command
    return (text[: match.start() + 1] if match else text).rstrip(":;")


def show_default(value: str) -> str:
    """``['bm25', 'dense']`` (how YAML reads a list) as the command line writes it."""
    if value.startswith("[") and value.endswith("]"):
        return "[" + ",".join(v.strip(" '\"") for v in value[1:-1].split(",") if v.strip()) + "]"
    return value


def targets(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            found.append(node["_target_"])
        for value in node.values():
            found.extend(targets(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(targets(value))
    return found


# ---------------------------------------------------------------- stage pages


def protocols(group: str) -> list[tuple[str, str, str]]:
    """``(name, skeleton, docstring)`` of each ``Protocol`` class in ``rag_lab/<group>/base.py``."""
    path = PKG / group / "base.py"
    if not path.is_file():
        return []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(b) for b in node.bases]
        if not any(b.split(".")[-1] == "Protocol" for b in bases):
            continue
        body = []
        for item in node.body:
            if isinstance(item, ast.AnnAssign):
                body.append("    " + ast.unparse(item))
            elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if item.name.startswith("_") and item.name != "__call__":
                    continue
                stub_node = copy.copy(item)
                stub_node.body = [ast.Expr(ast.Constant(...))]
                stub = ast.unparse(stub_node).replace("\n    ...", " ...")
                body.extend("    " + line for line in stub.splitlines())
        skeleton = "\n".join([f"class {node.name}({', '.join(bases)}):", *(body or ["    ..."])])
        found.append((node.name, skeleton, ast.get_docstring(node) or ""))
    return found


def option_files(group: str) -> list[tuple[str, Path]]:
    """``(command-line choice, file)``: ``recursive`` for ``chunker/recursive.yaml``,
    ``launcher=fork`` style names for files in sub-folders (``hydra/launcher/fork.yaml``)."""
    base = CONF / group
    return [
        (p.relative_to(base).with_suffix("").as_posix(), p) for p in sorted(base.rglob("*.yaml"))
    ]


def choice_syntax(group: str, name: str, keyed: bool) -> str:
    if group in CHOICE_SYNTAX:
        return CHOICE_SYNTAX[group].format(name=name)
    if "/" in name:
        sub, option = name.rsplit("/", 1)
        return f"{group}/{sub}={option}"
    return f"{group}=[{name}]" if keyed else f"{group}={name}"


def is_keyed(name: str, data: Any) -> bool:
    """Choose-many options are keyed by their own name (``rules: {_target_: ...}``)."""
    if not isinstance(data, dict):
        return False
    keys = [k for k in data if k != "defaults"]
    return keys == [name] and isinstance(data[name], dict)


def stage_sections(group: str, defaults: dict[str, str], api: set[str]) -> str:
    out: list[str] = []
    readme = CONF / group / "README.md"
    if readme.is_file():
        lines = [re.sub(r"^#\s?", "", line) for line in readme.read_text().splitlines()]
        out += ["", comment_blocks(lines), ""]
    protos = protocols(group)
    if protos:
        out += ["", "## Protocol", ""]
        link = f" (API: [rag_lab.{group}](../api/{group}.md))" if group in api else ""
        out.append(f"From `rag_lab/{group}/base.py`{link}; the docstring is the contract.")
        for name, skeleton, doc in protos:
            out += ["", f"### `{name}`", "", "```python", skeleton, "```", ""]
            if doc:
                out.append(prose(doc))
    options = option_files(group)
    out += ["", "## Options", ""]
    chosen = [(k, v) for k, v in defaults.items() if k == group or k.startswith(group + "/")]
    if chosen:
        shown = ", ".join(f"`{k}: {show_default(v)}`" for k, v in chosen)
        out += [f"Default in `conf/evaluate.yaml`: {shown}.", ""]
    rows, details = [], []
    for name, path in options:
        text = path.read_text(encoding="utf-8")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
        # choose-many: the group's default is a list, or the option is keyed by its own name
        keyed = str(defaults.get(group, "")).startswith("[") or is_keyed(name, data)
        choice = choice_syntax(group, name, keyed)
        comment = leading_comment(text)
        summary = prose(first_sentence(comment))
        rows.append(f"| `{choice}` | {summary.replace('|', '&#124;')} |")
        rel = path.relative_to(PKG).as_posix()
        details += ["", f"### `{choice}`", ""]
        if comment:
            details += [comment_blocks(comment), ""]
        classes = sorted(set(targets(data)))
        if classes:
            details += ["Builds: " + ", ".join(f"`{c}`" for c in classes) + ".", ""]
        details += [f'??? note "`{rel}`"', "", "    ```yaml"]
        details += [f"    {line}".rstrip() for line in text.rstrip().splitlines()]
        details += ["    ```", ""]
    if rows:
        out += ["| choice | what it is |", "|---|---|", *rows]
        out += details
    else:
        out.append("No options in this group.")
    return "\n".join(out).rstrip() + "\n"


def stages_index(groups: list[str], defaults: dict[str, str]) -> str:
    out = [
        "# Config groups and their options",
        "",
        "Generated from `rag_lab/conf/` and the `Protocol` classes in `rag_lab/<group>/base.py`",
        "at build time (`docs/hooks/gen_pages.py`). A group named in the plural is choose-many",
        "(`retrievers=[dense,bm25]`, run in the order given, each option keyed by its own name);",
        "a singular one is choose-one. How the stages fit together:",
        "[the pipeline](../concepts/stages.md).",
        "",
        "| group | kind | default | options |",
        "|---|---|---|---|",
    ]
    for group in groups:
        names = [n for n, _ in option_files(group)]
        kind = "stage" if is_stage(group) else "run setting"
        default = defaults.get(group, "")
        default_cell = f"`{show_default(default)}`" if default else ""
        shown = ", ".join(f"`{n}`" for n in names) or "none"
        out.append(f"| [{group}]({group}.md) | {kind} | {default_cell} | {shown} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- API pages


def api_pages() -> dict[str, str]:
    pages = {}
    packages = subpackages()
    modules = top_level_modules()
    index = [
        "# API reference",
        "",
        "Generated at build time from the docstrings (mkdocstrings): one page per subpackage of",
        "`rag_lab/`, found by scanning for `__init__.py` files, and one for the top-level modules.",
        "",
        "- [rag_lab and its top-level modules](rag_lab.md)",
    ]
    index += [f"- [rag_lab.{p}]({p}.md)" for p in packages]
    pages["api/index.md"] = "\n".join(index) + "\n"
    top = [
        "# rag_lab (top-level modules)",
        "",
        "::: rag_lab",
        "    options:",
        "      show_submodules: false",
        "      show_root_heading: true",
        "      heading_level: 2",
        "",
    ]
    for module in modules:
        top += [
            f"::: rag_lab.{module}",
            "    options:",
            "      show_root_heading: true",
            "      heading_level: 2",
            "",
        ]
    pages["api/rag_lab.md"] = "\n".join(top)
    for package in packages:
        pages[f"api/{package}.md"] = f"# rag_lab.{package}\n\n::: rag_lab.{package}\n"
    return pages


# ---------------------------------------------------------------- hooks


def _expand_nav(nav: Any, placeholder: str, section: list[Any]) -> Any:
    if isinstance(nav, list):
        return [_expand_nav(item, placeholder, section) for item in nav]
    if isinstance(nav, dict):
        return {
            key: (section if value == placeholder else _expand_nav(value, placeholder, section))
            for key, value in nav.items()
        }
    return nav


def on_files(files: Files, config: Any) -> Files:
    _generated.clear()
    groups = config_groups()
    defaults = evaluate_defaults()
    api = set(subpackages())
    pages: dict[str, str] = {"stages/index.md": stages_index(groups, defaults)}
    for group in groups:
        uri = f"stages/{group}.md"
        _generated[uri] = stage_sections(group, defaults, api)
        if files.get_file_from_path(uri) is None:
            pages[uri] = f"# `{group}`\n"
    pages.update(api_pages())
    for uri, content in pages.items():
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, content=content))

    stage_nav: list[Any] = ["stages/index.md"]
    stage_nav += [{group: f"stages/{group}.md"} for group in groups if is_stage(group)]
    stage_nav += [
        {"Run settings": [{group: f"stages/{group}.md"} for group in groups if not is_stage(group)]}
    ]
    api_nav: list[Any] = ["api/index.md", {"rag_lab": "api/rag_lab.md"}]
    api_nav += [{f"rag_lab.{p}": f"api/{p}.md"} for p in subpackages()]
    nav = config.get("nav")
    if nav:
        nav = _expand_nav(nav, "stages/index.md", stage_nav)
        config["nav"] = _expand_nav(nav, "api/index.md", api_nav)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    extra = _generated.get(page.file.src_uri)
    return markdown.rstrip() + "\n" + extra if extra else markdown
