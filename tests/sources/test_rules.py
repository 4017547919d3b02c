"""The rule router: ordered rules on the text and the metadata pick each query's sources."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rag_lab.paths import CONFIG_DIR
from rag_lab.sources import DEFAULT_ROUTE, Routing, RuleRouter, SourceRouter
from rag_lab.validate import OptionError

SOURCES = ["manuals", "tickets", "standards"]
RULES = {
    "code": {"pattern": r"\bE\d{3}\b", "sources": ["manuals", "tickets"]},
    "history": {"pattern": "last time|以前", "sources": ["tickets"]},
    "safety": {"pattern": "RCD|接地", "sources": ["standards"]},
    "ui": {"metadata": {"source": ["standards"]}, "sources": ["standards"]},
}


def test_first_rule_decides_and_default_takes_the_rest():
    router = RuleRouter(RULES, default=["manuals"])
    assert isinstance(router, SourceRouter)
    assert router.route("E102 last time", {}, SOURCES) == Routing("code", ("manuals", "tickets"))
    assert router.route("以前怎么修的", {}, SOURCES) == Routing("history", ("tickets",))
    assert router.route("rcd trip current", {}, SOURCES) == Routing("safety", ("standards",))
    assert router.route("pump noise", {}, SOURCES) == Routing(DEFAULT_ROUTE, ("manuals",))
    # a metadata condition: the field equals one of the values
    assert router.route("pump", {"source": "standards"}, SOURCES).sources == ("standards",)
    assert router.route("pump", {"source": "manuals"}, SOURCES).route == DEFAULT_ROUTE
    # no default: every source, in the run's order
    assert RuleRouter(RULES).route("pump", {}, SOURCES).sources == tuple(SOURCES)


def test_union_adds_every_matching_rule_in_the_runs_order():
    router = RuleRouter(RULES, default=["manuals"], combine="union")
    got = router.route("E102 接地 last time", {}, SOURCES)
    assert got == Routing("code+history+safety", ("manuals", "tickets", "standards"))
    case = RuleRouter(RULES, combine="union", ignore_case=False)
    assert case.route("rcd", {}, SOURCES).route == DEFAULT_ROUTE


def test_names_and_bad_rules_are_refused():
    assert RuleRouter(RULES, default=["manuals"]).names() == set(SOURCES)
    for rules, key in [
        ({"a": {"pattern": "(", "sources": ["m"]}}, "rules.a.pattern"),
        ({"a": {"pattern": "x"}}, "rules.a.sources"),
        ({"a": {"pattern": "x", "sources": "manuals"}}, "rules.a.sources"),
        ({"a": {"patern": "x", "sources": ["m"]}}, "rules.a.patern"),
        ({"a": {"metadata": ["x"], "sources": ["m"]}}, "rules.a.metadata"),
        ({"a": "x"}, "rules.a"),
    ]:
        with pytest.raises(OptionError, match=key.replace(".", r"\.")):
            RuleRouter(rules)
    with pytest.raises(OptionError, match="combine"):
        RuleRouter(RULES, combine="all")
    with pytest.raises(OptionError, match="default"):
        RuleRouter(RULES, default=[])


def test_shipped_rules_route_the_samples_categories():
    """conf/sources/rules.yaml on texts like the sample's: a code goes to the manuals and the
    tickets, a general safety question to the standards, both to all three."""
    node = yaml.safe_load((Path(CONFIG_DIR) / "sources" / "rules.yaml").read_text("utf-8"))
    args = {k: node[k] for k in ("rules", "default", "combine", "ignore_case")}
    router = RuleRouter(**args)
    assert router.route("SV0432 是什么报警", {}, SOURCES).sources == ("manuals", "tickets")
    assert router.route("插座回路 RCD 的额定剩余动作电流", {}, SOURCES).sources == ("standards",)
    assert router.route("油站开不了多久就热得冒烟", {}, SOURCES).route == DEFAULT_ROUTE
    both = router.route("SV0424 编码器线屏蔽应该怎么接地 保护接地", {}, SOURCES)
    assert both.sources == tuple(SOURCES)


@pytest.mark.parametrize(
    ("text", "history"),
    [
        ("可编程逻辑控制器输入输出模块指示灯全灭，以前是怎么修好的", True),
        ("人机界面触摸没反应，之前是怎么处理的", True),
        ("HX-200 E102 以前是怎么修好的", True),
        ("这台泵之前也出过 E102 吗", True),
        ("三号线输送带变频器过电流跳闸的维修记录", True),
        ("How did we fix E102 last time?", True),
        ("previously reported faults on the CV-20", True),
        # "before X" (a version, an action), not "previously"
        ("SV7 固件 3.2 之前 SV0432 过压阈值是多少", False),
        ("AC-75 控制器固件1.7及以前，E1020 还包含哪种情况", False),
        ("检修 HX-200 之前怎么释放蓄能器压力，预充压力是多少", False),
        ("固件 3.2 之前它的过压阈值是多少", False),
        ("What was the SV0432 threshold in the previous firmware?", False),
    ],
)
def test_the_shipped_history_rule_takes_previously_not_before_a_version(text, history):
    shipped = yaml.safe_load((Path(CONFIG_DIR) / "sources" / "rules.yaml").read_text("utf-8"))
    rules = {"history": shipped["rules"]["history"]}
    router = RuleRouter(rules, default=["manuals"], ignore_case=shipped["ignore_case"])
    assert (router.route(text, {}, SOURCES).route == "history") is history
