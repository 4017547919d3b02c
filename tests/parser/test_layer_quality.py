"""The text-layer check (``rag_lab.parser._layer_quality``): random glyphs score low, manual
text of every kind the sample holds scores high."""

from __future__ import annotations

import random

import pytest

from rag_lab.parser._layer_quality import readable_share


def random_layer(seed: int, n: int = 60) -> str:
    rng = random.Random(seed)
    glyphs = [chr(c) for c in range(33, 127)]
    return " ".join("".join(rng.choice(glyphs) for _ in range(rng.randint(2, 9))) for _ in range(n))


MANUAL = [
    "Spindle overheating alarm E417: check the coolant pump and clean the fan filter.",
    "Keep the pressure ≤ 0.5 MPa and the oil within ±2 ℃ of 40 ℃; the coil reads 10 Ω.",
    "The gap is 25 μm, the flow ≥ 12 L/min, the noise 72 dB(A) at 1,450 rpm (see 3.2).",
    "HX-200 pump, SV7-04A drive, fault AL.912, seal kit P-21, thread 5/8″-18, −20–120 °C.",
    "液压泵在启动前必须检查油位，油温不得超过六十摄氏度。E102 油温过高：清洗冷却器散热片。",
    "| Part | Interval | Torque | Filter | 500 h | 25 Nm | Seal | 1000 h | 40 Nm |",
    "Don't run the supplier's pump dry. Réglez la pression à 0,5 MPa. Проверьте уровень масла.",
]


@pytest.mark.parametrize("text", MANUAL)
def test_manual_text_of_every_kind_is_readable(text):
    assert readable_share(text) >= 0.9, text


@pytest.mark.parametrize("seed", range(5))
def test_random_glyphs_are_not(seed):
    assert readable_share(random_layer(seed)) < 0.35


@pytest.mark.parametrize(
    "text",
    [
        "(cid:12)(cid:7) (cid:40)(cid:41)(cid:9) " * 5,  # a font without a Unicode map
        "\x01\x02abc \x03\x04def \x05ghi\x06 " * 5,  # control characters
        "Spіndle оverheating аlarm Е417 " * 3,  # Cyrillic letters among Latin ones (mojibake)
        "qWzkT tbrpk XvQnn mPrrS zzkwT hGfdS " * 3,  # no vowels, random letter case
    ],
)
def test_unmapped_control_mixed_script_and_shapeless_words_are_not(text):
    assert readable_share(text) < 0.5, text


def test_too_little_text_is_not_judged():
    assert readable_share("") is None and readable_share("E417 ok") is None
