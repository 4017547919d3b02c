"""``rag-lab cache list|clear``: every namespace the cache has is accepted (read from
``rag_lab.cache.NAMESPACES``, not a copy of it) and only the chosen ones are cleared."""

from __future__ import annotations

import pytest

from rag_lab.cache import NAMESPACES
from rag_lab.cli.cache import main, parser


def fill(root, namespaces, size=2048):
    for ns in namespaces:
        (root / ns).mkdir(parents=True)
        (root / ns / "entry.bin").write_bytes(b"x" * size)


def test_namespace_choices_are_the_caches_own():
    (option,) = [a for a in parser()._actions if a.dest == "namespace"]
    # the stages' own, then the report plots kept by content (rag_lab.report.figures)
    assert tuple(option.choices) == (*NAMESPACES, "figures")
    assert "rerank_scores" in NAMESPACES  # the pair-score store is a namespace like the others


@pytest.mark.parametrize("namespace", [*NAMESPACES, "figures"])
def test_clear_one_namespace_keeps_the_others(namespace, tmp_path, capsys):
    every = [*NAMESPACES, "figures"]
    fill(tmp_path, every)
    main(["clear", "--dir", str(tmp_path), "--namespace", namespace])
    assert capsys.readouterr().out == f"cleared {namespace}: 2.0 KB freed\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(every) - {namespace})


def test_list_shows_every_namespace_and_clear_all(tmp_path, capsys):
    fill(tmp_path, NAMESPACES)
    main(["list", "--dir", str(tmp_path)])
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split() for r in rows] == [[ns, "1", "2.0", "KB"] for ns in sorted(NAMESPACES)]
    main(["clear", "--dir", str(tmp_path)])
    assert capsys.readouterr().out == f"cleared all stages: {2 * len(NAMESPACES)}.0 KB freed\n"
    main(["list", "--dir", str(tmp_path)])
    assert capsys.readouterr().out == f"{tmp_path}: empty\n"


def test_unknown_namespace_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["clear", "--dir", str(tmp_path), "--namespace", "nope"])
    assert info.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
