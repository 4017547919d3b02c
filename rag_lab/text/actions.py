"""Actions an answer tells the reader to take, and whether a context gives them.

An *instruction* is a clause that tells someone to do something: in English an imperative ("Restart
the drive and replace the cooling fan", "First, unplug it") or a modal one ("you should replace
the fan", "the fan must be replaced", "patients need to fast"); in Chinese a clause that starts,
after a marker of order or obligation (先, 然后, 再, 请, 应, 需要, 必须, 建议, 可以 …) or none, with
an action verb (``ZH_VERBS``: 重启, 更换, 检查, 拆下 …, or a verb jieba tags ``v`` after such a
marker). Its *action* is the verb and the content words of its object (the next few content words
in the clause; for a passive modal, the words before the modal).

``supported(action, sentences)``: some context sentence holds the verb — or a verb of its group
(``SYNONYMS``: replace ~ change ~ swap, 检查 ~ 查看 ~ 检测) — and, when the action has an object,
one of the object's words. An answer that adds a step the context does not give ("restart the
drive", 更换风扇) is caught even when its words occur elsewhere in the context.

Limits: the English verbs are a list (``EN_VERBS``, the verbs of manuals, care instructions and
how-tos): an instruction with another verb is not seen; objects are the next content words, not a
parse; a step the context gives in other words ("twist the lid off" vs "unscrew the lid") counts
as unsupported unless the verbs share a group.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rag_lab.text.normalise import normalise_text
from rag_lab.text.patterns import has_cjk
from rag_lab.text.terms import STOPWORDS, stem

# verbs that start an English instruction (base forms; phrasal particles are skipped as objects)
EN_VERBS = frozenset(
    """
    add adjust align apply attach avoid back bake bed bleed block boil brush buy call change
    charge check choose clean clear click close connect contact cool cover cut defrost delete
    descale detach dilute disable disconnect discard dissolve do download drain drink dry eat
    empty enable enter exclude fast fill fit flush follow format give go grease grind heat hold
    inflate deflate inject insert inspect install keep leave let lift lock loosen lower
    lubricate mark mask measure mix monitor mount move oil open order pay place plug pour power
    press prime pull push put raise read reboot record reduce refill refit register reinstall
    release remove repeat replace report reset restart restore return rinse rotate run save
    screw select send set shake shut slide soak spray squeeze start stop store switch take tap
    test tighten tilt top treat turn twist type unlock unplug unscrew update upgrade use vacuum
    verify wait wash watch wear wipe withdraw write
    """.split()
)
_EN_STEMS = frozenset(stem(v) for v in EN_VERBS)
# words that may stand before the verb of an imperative ("First, unplug", "Then replace")
_EN_LEADS = frozenset(
    "first then next finally afterwards also now please always never just simply carefully "
    "gently slowly immediately once again do don't not and or so".split()
)
_EN_MODAL = re.compile(
    r"\b(?:should|must|need to|needs to|have to|has to|ought to|is to|are to)\s+(?:not\s+)?"
    r"(?:(?:be|get)\s+)?(?:\w+ly\s+)?([a-z]+)"
)
_EN_PASSIVE = re.compile(r"\b(?:should|must|needs? to|has to|have to)\s+(?:not\s+)?be\s+([a-z]+)")
# subordinate clauses that may open an instruction ("If it overheats, restart it")
_SUBORDINATE = tuple(f"{w} " for w in "if when whenever once before after while".split())
# clause breaks inside a sentence
_EN_CLAUSES = re.compile(r"[,;:]|\s(?:and|then|or|before|after|until|once)\s")
# words after a verb that are no part of its object
_EN_SKIP = STOPWORDS | frozenset(
    "up down out off on in back away over all both each any every some new old your their his her "
    "its it them this that these those one two three".split()
)

# Chinese action verbs (an instruction may also use another verb jieba tags v after a marker)
ZH_VERBS = frozenset(
    """
    重启 重新启动 更换 换 替换 检查 查看 检测 查 拆下 拆卸 卸下 取下 取出 拿出 拉出 安装 装 装回
    装好 清洗 清洁 清理 擦拭 擦 冲洗 洗 关闭 关掉 关 打开 开启 断开 断电 连接 接上 拧紧 拧下
    拧松 松开 调整 调节 调到 按下 按住 长按 加注 添加 加 倒入 注入 排空 放掉 复位 重置 升级 更新
    联系 停止 启动 测量 测 润滑 涂抹 涂 拔下 拔掉 拔出 插入 插上 放入 放置 放回 存放 服用 停用
    等待 备份 下载 设置 选择 点击 输入 填写 申请 登记 预约 吸 喷 晾干 晒 烘干 浸泡 泡 摇匀 摇
    搅拌 稀释 剪 切 推 拉 按压 预热 冷却 充电 插电 通电 复查 报修 抽 吹 刷 听 看 读 购买 租 穿
    戴 喝 吃 避免 防止 保持
    """.split()
)
_ZH_MARKERS = (
    "请务必 务必 请先 请 先 首先 然后 接着 再 并 随后 之后 最后 同时 另外 还要 还需 还应 也要 "
    "都要 要 需要 需 应该 应当 应 必须 一定要 建议 最好 可以 不要 别 切勿 勿 不能 不可"
).split()
_ZH_CLAUSES = re.compile(r"[，,；;：:。！？!?、]")
# tags of a subject that may stand before a marker (a noun, a pronoun: 用户需要, 你可以)
_ZH_SUBJECT_TAGS = frozenset(("n", "r", "nr", "nz"))
# prepositions that put the object before the verb of an instruction
_ZH_OBJECT_PREPOSITIONS = frozenset("把 将 从 用 对 给".split())
# verbs before the verb of the action (开始听, 尝试重启)
_ZH_AUXILIARIES = frozenset("开始 尝试 试着 进行 去 来".split())
_ZH_NOUN_TAGS = ("n", "nr", "ns", "nt", "nz", "vn", "eng")

# verbs that name one action (a context may use any of them)
SYNONYMS: tuple[frozenset[str], ...] = tuple(
    frozenset(g.split())
    for g in (
        "replace change swap renew 更换 换 替换",
        "remove detach withdraw take pull 拆下 拆卸 卸下 取下 取出 拿出 拉出 拔出",
        "check inspect examine verify test monitor 检查 查看 检测 查 复查",
        "clean wipe brush rinse wash flush 清洗 清洁 清理 擦拭 擦 冲洗 洗 刷",
        "turn twist rotate 拧 旋转 转动",
        "switch turn power 关闭 打开",
        "press push hold tap click 按 按下 按住 长按 按压 点击 推",
        "unplug disconnect 拔下 拔掉 断开 断电",
        "connect plug attach 连接 接上 插上 插入 插电",
        "fit install mount refit insert reinstall put place 安装 装 装回 装好 放入 放回 放置",
        "oil lubricate grease 润滑 涂抹 涂",
        "start run restart reboot 启动 重启 重新启动 开启",
        "stop shut 停止 关闭 关掉 关",
        "open lift 打开",
        "wait leave let 等待",
        "fill pour add top refill 加注 添加 加 倒入 注入",
        "empty drain 排空 放掉",
        "reset restore 复位 重置",
        "update upgrade 升级 更新",
        "mix dissolve dilute shake 搅拌 稀释 摇匀 摇",
        "dry 晾干 烘干 晒",
        "soak 浸泡 泡",
        "measure 测量 测",
        "contact call 联系 报修",
        "set adjust select choose 设置 调整 调节 调到 选择",
    )
)
_GROUP_OF: dict[str, frozenset[str]] = {}
for _group in SYNONYMS:
    _stems = frozenset(v if has_cjk(v) else stem(v) for v in _group)
    for _verb in _stems:
        _GROUP_OF[_verb] = _GROUP_OF.get(_verb, frozenset()) | _stems


@dataclass(frozen=True)
class Action:
    """An instruction's verb (an English stem or a Chinese word), the content words of its object
    (stems; may be empty) and the clause it was read from."""

    verb: str
    obj: tuple[str, ...]
    clause: str


def _en_words(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text)


def _en_object(
    words: Iterable[str], names: frozenset[str] = frozenset(), limit: int = 2
) -> tuple[str, ...]:
    """The first ``limit`` content words of an object; names are skipped (they are facts of their
    own: "Unplug the Molino 60" against "Unplug the grinder")."""
    out: list[str] = []
    for w in words:
        if w in _EN_SKIP or w in EN_VERBS or w in names:
            continue
        out.append(stem(w))
        if len(out) == limit:
            break
    return tuple(out)


def _imperative(clause: str, names: frozenset[str] = frozenset()) -> Action | None:
    """The action of a clause that starts (after ``_EN_LEADS``) with a verb of ``EN_VERBS``
    followed by no number or "to" ("Close to 9000 people", "Go 1.0 followed")."""
    words = _en_words(clause)
    i = 0
    while i < len(words) and words[i] in _EN_LEADS:
        i += 1
    if i >= len(words) or words[i] not in EN_VERBS:
        return None
    after = clause.split(words[i], 1)[1].lstrip()
    if after[:1].isdigit() or after.startswith("to "):
        return None
    return Action(stem(words[i]), _en_object(words[i + 1 :], names), clause)


def _en_actions(sentence: str) -> list[Action]:
    """Imperative clauses: the sentence's first, and a later one when the first is an
    instruction too or it starts with then / next / finally / also ("The machine … shut down" is
    no instruction); modal clauses anywhere."""
    norm = normalise_text(sentence)
    # capitalised words after the first: names
    names = frozenset(w.casefold() for w in re.findall(r"(?<=\s)[A-Z][A-Za-z]+", sentence))
    out: list[Action] = []
    clauses = [c.strip() for c in _EN_CLAUSES.split(norm) if c.strip()]
    # the main clause comes after any opening subordinate one ("If it overheats, restart it")
    main = next((k for k, c in enumerate(clauses) if not c.startswith(_SUBORDINATE)), 0)
    first = _imperative(clauses[main], names) if clauses else None
    for k, clause in enumerate(clauses):
        if k < main:
            continue
        action = _imperative(clause, names)
        later = clause.startswith(("then ", "next ", "finally ", "also "))
        if action is not None and (k == main or first is not None or later):
            out.append(action)
            continue
        passive = _EN_PASSIVE.search(clause)
        if passive is not None:
            before = _en_words(clause[: passive.start()])
            out.append(Action(stem(passive.group(1)), _en_object(reversed(before), names), clause))
            continue
        modal = _EN_MODAL.search(clause)
        if modal is not None and modal.group(1) in EN_VERBS:
            rest = _en_words(clause[modal.end() :])
            out.append(Action(stem(modal.group(1)), _en_object(rest, names), clause))
    return out


@lru_cache(maxsize=4096)
def _zh_tags(text: str) -> tuple[tuple[str, str], ...]:
    import jieba.posseg

    return tuple((p.word, p.flag) for p in jieba.posseg.cut(text))


def _zh_actions(sentence: str) -> list[Action]:
    norm = normalise_text(sentence)
    out: list[Action] = []
    for clause in (c.strip() for c in _ZH_CLAUSES.split(norm)):
        if not clause:
            continue
        tags = [(w, t) for w, t in _zh_tags(clause) if w.strip()]
        i, marked = 0, False
        # a subject before the marker: 初学者可以先…, 用户需要…, 你可以…
        if len(tags) > 1 and tags[0][1] in _ZH_SUBJECT_TAGS and tags[1][0] in _ZH_MARKERS:
            i = 1
        while i < len(tags) and (tags[i][0] in _ZH_MARKERS or tags[i][1] == "d"):
            marked = marked or tags[i][0] in _ZH_MARKERS
            i += 1
        pre: tuple[str, ...] = ()
        if marked and i < len(tags) and tags[i][0] in _ZH_OBJECT_PREPOSITIONS:
            # the object before the verb (把滤网取下, 从第三张专辑开始听, 用清水冲洗): the nouns
            # of the phrase, the verb after it
            j = i + 1
            while j < len(tags) and not tags[j][1].startswith("v"):
                j += 1
            pre = tuple(w for w, t in tags[i + 1 : j] if t.startswith(_ZH_NOUN_TAGS))
            i = j
        while (
            marked
            and i + 1 < len(tags)
            and tags[i][0] in _ZH_AUXILIARIES
            and tags[i + 1][1].startswith("v")
        ):
            i += 1  # 开始听, 尝试重启: the action is the second verb
        if i >= len(tags):
            continue
        verb, tag = tags[i]
        # a one-character verb (洗, 装, 开) or another verb only after a marker: 按 alone is
        # often "according to", 带 "comes with"
        listed = verb in ZH_VERBS and (len(verb) >= 2 or marked)
        if not (listed or (marked and tag == "v" and len(verb) >= 2)):
            continue
        after = tuple(w for w, t in tags[i + 1 : i + 6] if t.startswith(_ZH_NOUN_TAGS))
        obj = (pre + after)[:2]
        out.append(Action(verb, obj, clause))
    return out


def actions(sentence: str) -> list[Action]:
    """The instructions of one sentence (rules: module docstring)."""
    return _zh_actions(sentence) if has_cjk(sentence) else _en_actions(sentence)


# directional and result complements after a Chinese verb (插进去, 取出来, 拧紧, 装好): the
# verb before them names the action
_ZH_COMPLEMENTS = re.compile(
    "(?:进去|进来|出来|出去|下来|下去|上去|上来|起来|回去|回来|过来|过去|好|完|掉|下|上|出|进|回|开|入|紧|住)$"
)


def _verbs(verb: str) -> frozenset[str]:
    """A verb, the verbs of its group and, for "re" + a verb, that verb (recalibrate ~
    calibrate); a Chinese verb with a complement, also the verb before it (插进去 ~ 插)."""
    group = _GROUP_OF.get(verb, frozenset((verb,)))
    if verb.startswith("re") and len(verb) > 5 and not has_cjk(verb):
        group |= _GROUP_OF.get(verb[2:], frozenset((verb[2:],)))
    if has_cjk(verb) and len(verb) >= 2 and (head := _ZH_COMPLEMENTS.sub("", verb)):
        if head != verb:
            group |= _GROUP_OF.get(head, frozenset((head,)))
    return group


def _holds(word: str, norm: str, stems: frozenset[str]) -> bool:
    return word in norm if has_cjk(word) else word in stems


@lru_cache(maxsize=8192)
def _sentence_words(sentence: str) -> tuple[str, frozenset[str]]:
    norm = normalise_text(sentence)
    return norm, frozenset(stem(w) for w in _en_words(norm))


# verbs whose object carries the action ("use a paper clip", "take the tablets"): their object alone
# in a context sentence gives the step
LIGHT_VERBS = frozenset(stem(v) for v in "use keep let leave go do give take put set make".split())


def supported(action: Action, sentences: Sequence[str]) -> bool:
    """Whether some context sentence gives ``action``: one of its verbs and, when it has an
    object, one of the object's words (for ``LIGHT_VERBS``, the object alone)."""
    verbs = _verbs(action.verb)
    light = action.verb in LIGHT_VERBS and bool(action.obj)
    for sentence in sentences:
        norm, stems = _sentence_words(sentence)
        if not light and not any(_holds(v, norm, stems) for v in verbs):
            continue
        if not action.obj or any(_holds(w, norm, stems) for w in action.obj):
            return True
    return False
