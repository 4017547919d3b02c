# ruff: noqa: E501  (the machine tables below hold long bilingual strings, one fault a row)
"""Generate ``maintenance_kb_large``: the sample's equipment at the scale and under the conditions
the articles describe, for ``rag-lab walk`` (issue 35, item 8).

    python scripts/make_sample_large.py                      # datasets/maintenance_kb_large, seed 35
    python scripts/make_sample_large.py --out /tmp/kb --seed 7 --tickets 200 --logs 100 --pdf 1

What it writes (BEIR layout, like the sample; ``dataset=sample_large`` reads it):

- ``docs/manuals/<model>-manual-e<n>.md``: three editions of each of the sample's eight machines'
  manuals (valid 2021-01-01..2022-12-31, 2023-01-01..2024-06-30, 2024-07-01..), the same faults
  with changed thresholds and maintenance intervals between editions; the third edition of the
  first ``--pdf`` machines is a PDF instead (rendered by the sample's own generator,
  ``scripts/make_sample_documents.build_pdf``) whose fault-code table spans pages;
- ``docs/release_notes/<model>-firmware-<v>.md``: the firmware notes that moved a threshold;
- ``docs/tickets.jsonl``: three years (2022-2024) of maintenance tickets (``--tickets``), written
  the way technicians write (colloquial, abbreviated, zh and en), that name the same models,
  codes and symptoms as the manuals; ``docs/tickets/logs.jsonl``: routine maintenance logs
  (``--logs``: lubrication, inspections) that share the manuals' words and answer no question
  (the articles' "three-year-old bearing lubrication record" for "spindle overheating alarm");
- ``standards/``, ``entities.yaml``, ``synonyms.yaml``: the sample's own, copied;
- ``queries.jsonl``, ``qrels/test.tsv``, ``qrels/dev.tsv``: queries written from the same tables
  (exact codes, colloquial and abbreviated symptoms, thresholds on a date, numeric values, fault
  table cells, firmware changes, ticket history, unanswerable look-alikes, and the sample's
  standards questions), each with gold answers that are substrings of a relevant document.

Relevance: a fault's meaning / fix is in every edition (each edition judged 2); a threshold or
interval asked with a date (``as_of``) only in the edition valid that day, asked without one only
in the current edition; a ticket is relevant only to the history questions ("how was it fixed
before"). Everything is drawn from ``random.Random(seed)``: the same seed writes the same bytes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "rag_lab" / "sample" / "maintenance_kb"
OUT = ROOT / "datasets" / "maintenance_kb_large"
SEED = 35
EDITIONS = (
    ("1.0", "2021-01-01", "2022-12-31"),
    ("2.0", "2023-01-01", "2024-06-30"),
    ("3.0", "2024-07-01", None),
)
# a date inside each edition's validity, for the as-of questions
AS_OF = ("2022-05-10", "2023-11-20", "2025-03-15")


@dataclass(frozen=True)
class Fault:
    code: str
    zh: str  # meaning
    en: str
    param_zh: str  # the threshold's name
    param_en: str
    unit: str
    values: tuple[str, str, str]  # per edition
    fix_zh: str
    fix_en: str
    slang_zh: str  # how the floor says it (no code, no manual term)
    slang_en: str
    abbr: str  # how a ticket abbreviates it
    stop: tuple[str, str, str]  # stop behaviour per edition (a fault-table cell)


@dataclass(frozen=True)
class Machine:
    model: str
    slug: str
    zh: str
    en: str
    component_zh: str  # the part routine logs lubricate / inspect
    component_en: str
    interval: tuple[str, str, str]  # lubrication / service interval per edition (h)
    firmware: tuple[str, str, str]
    faults: tuple[Fault, ...]


def _f(code: str, zh: str, en: str, p: tuple[str, str, str], vals: tuple[str, str, str],
       fix: tuple[str, str], slang: tuple[str, str], abbr: str,
       stop: tuple[str, str, str] = ("停机", "停机", "停机")) -> Fault:  # fmt: skip
    return Fault(
        code, zh, en, p[0], p[1], p[2], vals, fix[0], fix[1], slang[0], slang[1], abbr, stop
    )


MACHINES = (
    Machine(
        "HX-200",
        "hx200",
        "液压站",
        "hydraulic power unit",
        "液压泵",
        "pump",
        ("2000", "3000", "3000"),
        ("1.4", "2.1", "2.3"),
        (
            _f(
                "E102",
                "油温过高",
                "oil over-temperature",
                ("停泵油温", "trip oil temperature", "°C"),
                ("65", "70", "72"),
                (
                    "清洗油冷却器散热片并检查冷却风扇",
                    "clean the oil cooler fins and check the cooling fan",
                ),
                (
                    "油站开一会儿就烫手然后自己停了",
                    "the oil unit gets too hot to touch and shuts itself off",
                ),
                "OT",
                ("停泵", "停泵", "报警后延时停泵"),
            ),
            _f(
                "E105",
                "油位过低",
                "oil level low",
                ("低油位报警液位", "low-level alarm height", "mm"),
                ("80", "80", "95"),
                ("补加同牌号液压油并查找泄漏点", "top up with the same oil and find the leak"),
                (
                    "油箱看着快见底了，泵一直叫",
                    "the tank looks nearly empty and the pump keeps whining",
                ),
                "LL",
            ),
            _f(
                "E108",
                "回油滤芯堵塞",
                "return filter clogged",
                ("滤芯压差报警值", "filter differential alarm", "bar"),
                ("3.5", "3.5", "3.0"),
                ("更换回油滤芯 HX-RF10", "replace return filter HX-RF10"),
                (
                    "早上开机说过滤器不行，过会儿又好了",
                    "in the morning it complains about the filter, later it is fine",
                ),
                "FLT",
            ),
            _f(
                "E113",
                "系统压力不足",
                "system pressure low",
                ("低压报警压力", "low-pressure alarm", "MPa"),
                ("12", "12", "13"),
                (
                    "检查比例溢流阀设定和泵出口压力",
                    "check the relief valve setting and pump outlet pressure",
                ),
                (
                    "夹具夹不紧，压力表老在低处晃",
                    "the clamps will not hold and the gauge hangs low",
                ),
                "LP",
            ),
        ),
    ),
    Machine(
        "SP-45",
        "sp45",
        "电主轴",
        "motorized spindle",
        "主轴轴承",
        "spindle bearing",
        ("500", "800", "800"),
        ("3.0", "3.2", "4.0"),
        (
            _f(
                "E120",
                "主轴温度过高",
                "spindle over-temperature",
                ("主轴温度报警值", "spindle temperature alarm", "°C"),
                ("75", "80", "85"),
                (
                    "检查冷水机供水温度和主轴冷却回路流量",
                    "check the chiller supply temperature and the spindle cooling flow",
                ),
                (
                    "主轴摸着烫，一会儿机床就报警不转了",
                    "the spindle is hot to the touch and the machine stops with an alarm",
                ),
                "OT",
                ("停转", "停转", "降速后停转"),
            ),
            _f(
                "E012",
                "编码器信号丢失",
                "encoder signal lost",
                ("编码器读头间隙", "encoder read-head gap", "mm"),
                ("0.15", "0.15", "0.20"),
                (
                    "检查编码器电缆屏蔽并调整读头间隙",
                    "check the encoder cable shield and reset the read-head gap",
                ),
                (
                    "一转就跳，说找不到位置",
                    "it trips as soon as it turns, says it lost its position",
                ),
                "ENC",
            ),
            _f(
                "E021",
                "轴承润滑压力低",
                "bearing lubrication pressure low",
                ("油气润滑最低压力", "minimum oil-air pressure", "bar"),
                ("4.0", "4.5", "4.5"),
                ("检查油气润滑单元和供气压力", "check the oil-air lubrication unit and air supply"),
                (
                    "主轴嗡嗡响，活儿表面一道一道的",
                    "the spindle hums and the part surface shows chatter marks",
                ),
                "LUB",
            ),
            _f(
                "E201",
                "主轴振动过大",
                "spindle vibration high",
                ("振动报警值", "vibration alarm", "mm/s"),
                ("4.5", "5.0", "5.0"),
                ("做刀柄动平衡并检查轴承预紧", "balance the tool holder and check bearing preload"),
                ("转速一上去整台机子都在抖", "the whole machine shakes once the speed goes up"),
                "VIB",
            ),
        ),
    ),
    Machine(
        "SV7",
        "sv7",
        "伺服驱动器",
        "servo drive",
        "制动电阻",
        "braking resistor",
        ("4000", "4000", "6000"),
        ("3.2", "3.4", "3.6"),
        (
            _f(
                "SV0432",
                "直流母线过电压",
                "DC bus over-voltage",
                ("过电压阈值", "over-voltage threshold", "V"),
                ("400", "410", "410"),
                (
                    "检查制动电阻阻值和再生制动设置",
                    "check the braking resistor and regeneration settings",
                ),
                (
                    "一急停驱动器就报电压太高",
                    "every hard stop the drive says the voltage is too high",
                ),
                "OV",
            ),
            _f(
                "SV0423",
                "电机过热",
                "motor over-temperature",
                ("电机温度报警值", "motor temperature alarm", "°C"),
                ("140", "140", "130"),
                ("检查电机风扇和负载率", "check the motor fan and load ratio"),
                (
                    "驱动器说电机烧了，可摸着是凉的",
                    "the drive claims the motor is cooked but it is cold",
                ),
                "MOT",
            ),
            _f(
                "SV0410",
                "抱闸未打开",
                "brake not released",
                ("抱闸释放延时", "brake release delay", "ms"),
                ("100", "120", "120"),
                (
                    "检查抱闸电源 DC 24 V 和释放延时参数",
                    "check the 24 V brake supply and the release delay",
                ),
                ("轴拖着走不动，电流老高", "the axis drags and draws a lot of current"),
                "BRK",
            ),
            _f(
                "SV0436",
                "位置偏差过大",
                "position deviation excessive",
                ("偏差报警值", "deviation alarm", "pulse"),
                ("30000", "30000", "25000"),
                ("检查机械卡滞和增益参数", "check for mechanical binding and the gain settings"),
                ("进给走着走着就报跟不上", "the feed axis gives up saying it cannot keep up"),
                "DEV",
            ),
        ),
    ),
    Machine(
        "AC-75",
        "ac75",
        "螺杆空压机",
        "screw air compressor",
        "主机轴承",
        "airend bearing",
        ("2000", "4000", "4000"),
        ("1.6", "1.8", "2.0"),
        (
            _f(
                "E1020",
                "排气温度过高",
                "discharge temperature high",
                ("排气温度停机值", "discharge trip temperature", "°C"),
                ("105", "110", "110"),
                (
                    "清洗油冷却器并检查油位和温控阀",
                    "clean the oil cooler and check oil level and thermostatic valve",
                ),
                (
                    "夏天下午那台打气的机子老是自己停",
                    "the air machine quits every summer afternoon",
                ),
                "HT",
            ),
            _f(
                "E1050",
                "油分离器压差过高",
                "separator differential high",
                ("油分压差报警值", "separator differential alarm", "bar"),
                ("0.8", "1.0", "1.0"),
                ("更换油分离器芯", "replace the separator element"),
                ("管子里喷出褐色泡沫", "brown froth comes out in the air lines"),
                "SEP",
            ),
            _f(
                "E1030",
                "电机过载",
                "motor overload",
                ("过载电流", "overload current", "A"),
                ("150", "150", "145"),
                ("检查电源电压和主机是否卡滞", "check supply voltage and whether the airend binds"),
                ("一加载就跳闸", "it trips the moment it loads"),
                "OL",
            ),
            _f(
                "E1102",
                "排气压力过高",
                "discharge pressure high",
                ("压力停机值", "pressure trip", "bar"),
                ("8.5", "8.5", "9.0"),
                ("检查最小压力阀和卸载阀", "check the minimum pressure valve and unloader"),
                (
                    "压力表一直往上顶，安全阀都响了",
                    "the gauge keeps climbing until the safety valve pops",
                ),
                "HP",
            ),
        ),
    ),
    Machine(
        "CH-30",
        "ch30",
        "冷水机",
        "chiller",
        "冷凝器",
        "condenser",
        ("1000", "1000", "1500"),
        ("2.0", "2.2", "2.5"),
        (
            _f(
                "E210",
                "冷凝压力过高",
                "condensing pressure high",
                ("高压保护值", "high-pressure cutout", "MPa"),
                ("2.6", "2.8", "2.8"),
                ("清洗冷凝器翅片并检查风机", "clean the condenser fins and check the fan"),
                (
                    "天一热出冷水的机子就罢工，网上全是杨树毛",
                    "when it is hot the cold-water machine quits, the intake net full of fluff",
                ),
                "HP",
            ),
            _f(
                "E102",
                "电源相序错误或缺相",
                "phase sequence fault or phase loss",
                ("相序检测延时", "phase check delay", "s"),
                ("2", "2", "3"),
                ("调换任意两根电源相线", "swap any two supply phases"),
                (
                    "新买的制冷机接上电就是不肯开",
                    "the new chiller just will not start after wiring",
                ),
                "PH",
            ),
            _f(
                "E215",
                "水流量过低",
                "water flow low",
                ("低流量报警值", "low-flow alarm", "L/min"),
                ("20", "20", "25"),
                ("清洗 Y 型过滤器并检查水泵", "clean the Y strainer and check the pump"),
                (
                    "出水量越来越小，最后报警停了",
                    "the outflow keeps dropping until it alarms and stops",
                ),
                "FLW",
            ),
            _f(
                "E211",
                "低压保护",
                "suction pressure low",
                ("低压保护值", "low-pressure cutout", "MPa"),
                ("0.25", "0.25", "0.30"),
                ("检漏并按铭牌补充制冷剂", "find the leak and recharge per the nameplate"),
                ("压缩机开开停停，管子结霜", "the compressor keeps cycling and the pipe frosts"),
                "LPC",
            ),
        ),
    ),
    Machine(
        "PM-3000",
        "pm3000",
        "PLC",
        "PLC",
        "后备电池",
        "backup battery",
        ("8760", "8760", "17520"),
        ("3.5", "4.0", "4.2"),
        (
            _f(
                "0x1020",
                "用户程序看门狗超时",
                "user program watchdog timeout",
                ("看门狗时间", "watchdog time", "ms"),
                ("150", "200", "200"),
                (
                    "缩短循环程序或增大看门狗时间",
                    "shorten the cyclic program or raise the watchdog time",
                ),
                (
                    "一下载新程序柜子里的脑袋就亮红灯死机",
                    "the brain box hangs with a red light after we push new logic",
                ),
                "WDT",
            ),
            _f(
                "0x0102",
                "后备电池电压低",
                "backup battery low",
                ("电池报警电压", "battery alarm voltage", "V"),
                ("2.5", "2.6", "2.6"),
                ("带电更换后备电池 PM-BAT1", "replace battery PM-BAT1 with power on"),
                (
                    "周末一断电计数全没了",
                    "the line forgets its counters over the weekend power-down",
                ),
                "BAT",
            ),
            _f(
                "0x2010",
                "I/O 模块通信中断",
                "I/O module communication lost",
                ("通信超时", "bus timeout", "ms"),
                ("50", "50", "80"),
                ("检查背板连接器和模块供电", "check the backplane connector and module supply"),
                (
                    "几个输入灯全灭，机子不动",
                    "a whole row of input lights is dead and nothing moves",
                ),
                "IO",
            ),
            _f(
                "0x3001",
                "模拟量输入超量程",
                "analog input over range",
                ("量程上限", "range limit", "mA"),
                ("20.5", "20.5", "21.0"),
                ("检查变送器接线和量程设置", "check the transmitter wiring and range"),
                ("温度显示一直顶在最大", "the temperature reading is stuck at the top"),
                "AI",
            ),
        ),
    ),
    Machine(
        "LU-10",
        "lu10",
        "集中润滑泵",
        "centralized lubrication pump",
        "润滑分配器",
        "lube distributor",
        ("250", "250", "400"),
        ("1.0", "1.1", "1.2"),
        (
            _f(
                "E21",
                "润滑压力不足",
                "lubrication pressure low",
                ("最低供油压力", "minimum lube pressure", "bar"),
                ("15", "15", "18"),
                ("检查油管是否破裂并排气", "check for burst lines and bleed the pump"),
                (
                    "打油的小泵一直在响，可是滑轨上干干的",
                    "the little oil pump keeps running but the ways are dry",
                ),
                "LP",
            ),
            _f(
                "E12",
                "油箱液位低",
                "reservoir low",
                ("低液位报警", "low-level alarm", "L"),
                ("0.5", "0.5", "0.8"),
                ("加注 ISO VG 68 导轨油", "fill with ISO VG 68 way oil"),
                ("润滑泵油壶见底了", "the lube pot is empty"),
                "LL",
            ),
            _f(
                "E22",
                "润滑周期超时",
                "lubrication cycle timeout",
                ("周期超时时间", "cycle timeout", "s"),
                ("60", "60", "90"),
                ("检查分配器是否堵塞", "check the distributor for blockage"),
                (
                    "冬天一早打油泵就跳，油稠得像猪油",
                    "on winter mornings the lube pump trips, the grease thick as lard",
                ),
                "TO",
            ),
            _f(
                "E31",
                "电机过流",
                "motor over-current",
                ("过流保护值", "over-current trip", "A"),
                ("1.2", "1.2", "1.5"),
                ("检查电机和泵体是否卡死", "check whether the motor or pump is seized"),
                ("泵一启动就跳闸", "the pump trips right at start"),
                "OC",
            ),
        ),
    ),
    Machine(
        "CV-20",
        "cv20",
        "输送线",
        "conveyor line",
        "驱动链条",
        "drive chain",
        ("1000", "1500", "1500"),
        ("2.0", "2.4", "2.6"),
        (
            _f(
                "F301",
                "变频器过电流",
                "VFD over-current",
                ("过流限值", "current limit", "%"),
                ("150", "150", "160"),
                ("检查电机绝缘和加速时间", "check motor insulation and the acceleration time"),
                ("皮带一满载起步就跳", "the belt trips when it starts fully loaded"),
                "OC",
            ),
            _f(
                "F302",
                "皮带跑偏",
                "belt misalignment",
                ("跑偏报警距离", "misalignment alarm", "mm"),
                ("20", "20", "15"),
                ("调整张紧辊并清理托辊", "adjust the take-up roller and clean the idlers"),
                (
                    "皮带老往一边跑，边都磨毛了",
                    "the belt keeps walking to one side and the edge is frayed",
                ),
                "MIS",
            ),
            _f(
                "F305",
                "急停回路断开",
                "emergency-stop circuit open",
                ("急停复位时间", "e-stop reset time", "s"),
                ("3", "3", "5"),
                ("检查拉绳开关和急停按钮", "check the pull-cord switches and e-stop buttons"),
                (
                    "整条线突然全停，也没人按按钮",
                    "the whole line stops and nobody pressed anything",
                ),
                "ES",
            ),
            _f(
                "F310",
                "链条张力过低",
                "chain tension low",
                ("最小张力", "minimum tension", "kN"),
                ("2.0", "2.0", "2.5"),
                ("调整张紧器并检查链条伸长", "adjust the tensioner and check chain elongation"),
                ("链子哗啦哗啦响，掉过一回", "the chain rattles and came off once"),
                "TEN",
            ),
        ),
    ),
)
STEMS_ZH = ("{m} 报 {c}", "{m}{c}", "{m} 出现 {c} 报警", "{c} {m}")
TEMPLATE_T_ZH = "现象：{sym}，面板 {code}。原因：{cause}。处理：{fix}，试机正常。"
TEMPLATE_T_EN = "symptom: {sym}, panel shows {code}. cause: {cause}. fix: {fix}, test run ok."
SITES = (
    "苏州二厂 注塑车间",
    "无锡一厂 机加车间",
    "Plant 3 assembly",
    "常州工厂 装配三线",
    "Plant 5 machining",
)


def table(rows: list[list[str]]) -> str:
    head, *body = rows
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(out)


def manual(m: Machine, e: int, render: bool) -> str:
    version, valid_from, valid_to = EDITIONS[e]
    codes = [f.code for f in m.faults]
    meta: dict[str, Any] = {
        "doc_id": f"{m.slug}-manual-e{e + 1}",
        "title": f"{m.model} {m.zh} 维护手册 (第{e + 1}版)",
        "doc_type": "manual",
        "language": "zh",
        "version": version,
        "valid_from": dt.date.fromisoformat(valid_from),
        "valid_to": dt.date.fromisoformat(valid_to) if valid_to else None,
        "entities": [m.model, *codes],
    }
    if render:
        meta["render"] = {
            "header": f"{m.model} {m.zh}维护手册 V{version} · 文件编号 {m.slug.upper()}-MM-0{e + 1}",
            "footer": "内部资料 · 请勿外传    第 {page} 页",
            "subject": f"{m.model} {m.zh}维护手册 第{e + 1}版",
        }
    front = yaml_dump(meta)
    parts = [
        f"---\n{front}---\n",
        f"# {m.model} {m.zh} 维护手册（第{e + 1}版）\n",
        f"本手册适用于控制器固件 {m.firmware[e]} 的 {m.model} {m.zh}（{m.en}），"
        f"自 {valid_from} 起生效" + ("，取代上一版手册。" if e else "。") + "\n",
        "## 1 概述\n",
        f"{m.model} 的控制器持续监测温度、压力和电流，发现异常时在面板上显示故障代码，"
        f"并根据严重程度决定报警或停机。维护{m.component_zh}之前必须停机、断电并挂锁。\n",
        "## 2 故障代码表\n",
        f"表 2-1 {m.model} 故障代码（第{e + 1}版）\n",
        table(
            [["代码", "含义", "阈值", "停机方式"]]
            + [[f.code, f.zh, f"{f.values[e]} {f.unit}", f.stop[e]] for f in m.faults for _ in (0,)]
            + [
                [f"{f.code}-{i}", f"{f.zh}（子代码 {i}）", "—", "仅报警"]
                for f in m.faults
                for i in (1, 2, 3, 4, 5, 6)
            ]
        )
        + "\n",
    ]
    for i, f in enumerate(m.faults, 1):
        parts += [
            f"## 3.{i} 故障 {f.code} {f.zh}\n",
            f"{f.code} 表示{f.zh}（{f.en}）。{f.param_zh}为 {f.values[e]} {f.unit}，"
            f"超过后{f.stop[e]}。\n",
            f"检查步骤：先确认{m.component_zh}状态，再读取控制器的历史报警记录。\n",
            f"处理：{f.fix_zh}。\n",
        ]
    parts += [
        "## 4 维护周期\n",
        f"{m.component_zh}的保养周期为每 {m.interval[e]} 运行小时一次。\n",
    ]
    return "\n".join(parts)


def release_note(m: Machine, e: int) -> tuple[str, str]:
    """The firmware note of edition ``e`` (1 or 2): what changed against the edition before."""
    version, valid_from, _ = EDITIONS[e]
    fw = m.firmware[e]
    changed = [f for f in m.faults if f.values[e] != f.values[e - 1]]
    doc_id = f"{m.slug}-firmware-{fw.replace('.', '-')}"
    meta = {
        "doc_id": doc_id,
        "title": f"{m.model} controller firmware {fw} release notes",
        "doc_type": "release_note",
        "language": "en",
        "version": fw,
        "valid_from": dt.date.fromisoformat(valid_from),
        "valid_to": None,
        "entities": [m.model, *(f.code for f in changed)],
    }
    lines = [f"---\n{yaml_dump(meta)}---\n", f"# {m.model} firmware {fw}\n", "## Changes\n"]
    for f in changed:
        lines.append(
            f"- {f.code} ({f.en}): the {f.param_en} changes from {f.values[e - 1]} {f.unit} "
            f"to {f.values[e]} {f.unit}.\n"
        )
    if m.interval[e] != m.interval[e - 1]:
        lines.append(
            f"- Service interval of the {m.component_en}: {m.interval[e - 1]} h to "
            f"{m.interval[e]} h.\n"
        )
    return doc_id, "\n".join(lines)


def yaml_dump(meta: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, default_flow_style=None)


def day(rng: random.Random, start: str, end: str) -> str:
    a, b = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    return (a + dt.timedelta(days=rng.randrange((b - a).days + 1))).isoformat()


def tickets(
    rng: random.Random, n: int
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], list[str]]]:
    out, by_fault = [], {}
    causes_zh = ("散热不良", "接线松动", "部件磨损", "参数被改", "滤网堵塞", "油品变质")
    causes_en = ("poor cooling", "loose wiring", "worn part", "parameter changed", "clogged screen")
    for i in range(n):
        m = rng.choice(MACHINES)
        f = rng.choice(m.faults)
        opened = day(rng, "2022-01-01", "2024-12-31")
        zh = rng.random() < 0.7
        sym = (
            (f.slang_zh if zh else f.slang_en)
            if rng.random() < 0.5
            else (f"{m.model} {f.abbr} alm" if rng.random() < 0.5 else (f.zh if zh else f.en))
        )
        tid = f"TCK-{opened[:4]}-{i:04d}"
        text = (TEMPLATE_T_ZH if zh else TEMPLATE_T_EN).format(
            sym=sym,
            code=f.code,
            cause=rng.choice(causes_zh if zh else causes_en),
            fix=f.fix_zh if zh else f.fix_en,
        )
        out.append(
            {
                "_id": tid,
                "title": f"{m.model} {f.code} {f.abbr}",
                "text": text,
                "metadata": {
                    "doc_type": "ticket",
                    "language": "zh" if zh else "en",
                    "equipment": m.model,
                    "fault_code": f.code,
                    "opened": opened,
                    "closed": opened,
                    "site": rng.choice(SITES),
                },
            }
        )
        by_fault.setdefault((m.model, f.code), []).append(tid)
    return out, by_fault


def logs(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """Routine logs: the machine, its component, temperature and lubrication words; no fault."""
    out = []
    for i in range(n):
        m = rng.choice(MACHINES)
        when = day(rng, "2022-01-01", "2024-12-31")
        temp = rng.randrange(28, 46)
        zh = rng.random() < 0.7
        text = (
            f"{m.model} {m.zh} 定期保养：{m.component_zh}润滑，加注润滑脂，温度 {temp} °C 正常，"
            f"报警记录无。振动、压力检查正常。"
            if zh
            else f"{m.model} {m.en} routine service: {m.component_en} lubrication done, "
            f"temperature {temp} °C normal, no alarm in history, pressure and vibration ok."
        )
        out.append(
            {
                "_id": f"LOG-{when[:4]}-{i:04d}",
                "title": f"{m.model} 保养记录 {when}",
                "text": text,
                "metadata": {
                    "doc_type": "ticket",
                    "language": "zh" if zh else "en",
                    "equipment": m.model,
                    "fault_code": None,
                    "opened": when,
                    "closed": when,
                    "site": rng.choice(SITES),
                },
            }
        )
    return out


def queries(
    rng: random.Random, by_fault: dict[tuple[str, str], list[str]], pdf_models: set[str]
) -> list[tuple[dict[str, Any], dict[str, int]]]:
    """(query, qrels) pairs; every gold answer is in each document judged 2."""
    out: list[tuple[dict[str, Any], dict[str, int]]] = []

    def add(text: str, category: str, rel: dict[str, int], answers: list[str] | None,
            **meta: Any) -> None:  # fmt: skip
        q: dict[str, Any] = {"text": text, "metadata": {"category": category, **meta}}
        if answers:
            q["metadata"]["answers"] = answers
        out.append((q, rel))

    for m in MACHINES:
        manuals = [f"{m.slug}-manual-e{e + 1}" for e in range(3)]
        every = dict.fromkeys(manuals, 2)
        for f in m.faults[:3]:
            zh = rng.random() < 0.6
            stem = rng.choice(STEMS_ZH).format(m=m.model, c=f.code)
            add(stem + " 是什么意思" if zh else f"{f.code} on {m.model} meaning", "exact_code",
                every, [f.zh])  # fmt: skip
        for f in m.faults:
            add(f.slang_zh, "colloquial", every, [f.fix_zh])
        f = m.faults[0]
        add(f.slang_en + f" ({m.en})", "colloquial", every, [f.fix_zh])
        for f in m.faults[1:3]:
            add(f"{m.model.split('-')[0]} {f.abbr} alm 咋处理", "abbreviation", every, [f.fix_zh])
        for e in (0, 2):
            f = m.faults[e + 1 if e == 0 else 0]
            add(f"{m.model} {f.code} {f.param_zh}是多少", "version_as_of",
                {manuals[e]: 2}, [f"{f.param_zh}为 {f.values[e]} {f.unit}"], as_of=AS_OF[e])  # fmt: skip
        f = m.faults[1]
        add(f"{m.model} {f.param_zh}现在是多少", "numeric", {manuals[2]: 2},
            [f"{f.values[2]} {f.unit}"])  # fmt: skip
        add(f"{m.model} {m.component_zh}多少小时保养一次", "numeric", {manuals[2]: 2},
            [f"每 {m.interval[2]} 运行小时"])  # fmt: skip
        changed = [f for f in m.faults if f.values[2] != f.values[1]]
        if changed:
            f = changed[0]
            note = f"{m.slug}-firmware-{m.firmware[2].replace('.', '-')}"
            add(f"After the {m.model} firmware {m.firmware[2]} update, what is the {f.param_en} "
                f"of {f.code}?", "cross_doc", {note: 2, manuals[2]: 1},
                [f"to {f.values[2]} {f.unit}"])  # fmt: skip
        if m.model in pdf_models:
            f = m.faults[0]
            add(f"{m.model} 第3版手册故障代码表里 {f.code} 的停机方式", "table_cell",
                {manuals[2]: 2}, [f.stop[2]])  # fmt: skip
        f = m.faults[0]
        hist = dict.fromkeys(by_fault.get((m.model, f.code), [])[:50], 2)
        if hist:
            add(f"{m.model} {f.code} 以前是怎么修好的", "history", hist, [f.fix_zh])
        add(f"{m.model} E999 报警是什么", "unanswerable", {manuals[2]: 0}, None)
        other = MACHINES[(MACHINES.index(m) + 1) % len(MACHINES)].faults[-1].code
        if other not in {x.code for x in m.faults}:
            add(f"{m.model} {other} alarm meaning", "unanswerable", {manuals[2]: 0}, None)
    # the sample's standards questions, against the sample's standards notes (copied)
    for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q["metadata"].get("category") == "standards":
            rel = {}
            for split in ("test", "dev"):
                for row in (SAMPLE / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
                    qid, doc, score = row.split("\t")
                    if qid == q["_id"]:
                        rel[doc] = int(score)
            add(q["text"], "standards", rel, q["metadata"].get("answers"))
    return out


def render_pdfs(sources: dict[str, str], out: Path) -> dict[str, Any]:
    """The sample's own PDF renderer on each Markdown source: ``{doc path: parsing truth}``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_sample_documents as sample  # the sample's generator

    truth = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in sources.items():
            src_path = Path(tmp) / Path(rel).with_suffix(".md").name
            src_path.write_text(text, encoding="utf-8")
            data, record = sample.build_pdf(sample.read_source(src_path))
            path = out / "docs" / rel
            path.write_bytes(data)
            truth[f"docs/{rel}"] = record
    return truth


def generate(out: Path, seed: int, n_tickets: int, n_logs: int, n_pdf: int) -> dict[str, int]:
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    (out / "docs" / "manuals").mkdir(parents=True)
    (out / "docs" / "release_notes").mkdir(parents=True)
    (out / "docs" / "tickets").mkdir(parents=True)
    (out / "qrels").mkdir()
    pdf_models = {m.model for m in MACHINES[:n_pdf]}
    pdf_sources = {}
    for m in MACHINES:
        for e in range(3):
            render = e == 2 and m.model in pdf_models
            text = manual(m, e, render)
            name = f"{m.slug}-manual-e{e + 1}"
            if render:
                pdf_sources[f"manuals/{name}.pdf"] = text
            else:
                (out / "docs" / "manuals" / f"{name}.md").write_text(text, encoding="utf-8")
        for e in (1, 2):
            doc_id, text = release_note(m, e)
            (out / "docs" / "release_notes" / f"{doc_id}.md").write_text(text, encoding="utf-8")
    truth = render_pdfs(pdf_sources, out) if pdf_sources else {}
    (out / "parsing_truth.json").write_text(
        json.dumps({"documents": truth}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    ticket_rows, by_fault = tickets(rng, n_tickets)
    write_jsonl(out / "docs" / "tickets.jsonl", ticket_rows)
    write_jsonl(out / "docs" / "tickets" / "logs.jsonl", logs(rng, n_logs))
    shutil.copytree(SAMPLE / "standards", out / "standards")
    for name in ("entities.yaml", "synonyms.yaml"):
        shutil.copy(SAMPLE / name, out / name)
    pairs = queries(rng, by_fault, pdf_models)
    rows = {"test": ["query-id\tcorpus-id\tscore"], "dev": ["query-id\tcorpus-id\tscore"]}
    lines = []
    for i, (q, rel) in enumerate(pairs, 1):
        qid = f"L{i:03d}"
        split = "dev" if rng.random() < 0.3 else "test"
        lines.append(json.dumps({"_id": qid, **q}, ensure_ascii=False))
        rows[split] += [f"{qid}\t{d}\t{s}" for d, s in rel.items()]
    (out / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for split, r in rows.items():
        (out / "qrels" / f"{split}.tsv").write_text("\n".join(r) + "\n", encoding="utf-8")
    n_docs = 24 + 16 + n_tickets + n_logs
    return {"documents": n_docs, "queries": len(pairs), "pdf": len(pdf_sources)}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--tickets", type=int, default=1500, help="maintenance tickets (2022-2024)")
    ap.add_argument("--logs", type=int, default=600, help="routine maintenance logs")
    ap.add_argument("--pdf", type=int, default=4, help="machines whose 3rd edition is a PDF")
    args = ap.parse_args(argv)
    counts = generate(args.out, args.seed, args.tickets, args.logs, args.pdf)
    print(f"{args.out}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
