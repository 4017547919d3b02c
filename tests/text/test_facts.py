"""Facts and their support (``rag_lab.text.facts``): every case of issue 16 in both directions —
a correct fact written differently is found, a changed one is not."""

from __future__ import annotations

import pytest

from rag_lab.text.facts import extract_facts, normalise_facts_text, slot_names


def facts(answer: str, names: bool = True) -> list[tuple[str, str]]:
    return [(f.kind, f.text) for f in extract_facts(answer, names=names)]


def unsupported(answer: str, context: str) -> list[str]:
    ctx = normalise_facts_text(context)
    return [f.text for f in extract_facts(answer, names=True) if not f.found_in(ctx)]


@pytest.mark.parametrize(
    "answer,context",
    [
        # a CJK character after a number is not its unit unless it is a listed unit
        ("2022冬奥会在北京举行。", "2022年北京冬奥会开幕。"),
        ("2022春运开始。", "2022年春运开始。"),
        ("2021赛季冠军。", "2021赛季中超冠军。"),
        ("10·29索马里海盗事件。", "10·29索马里海盗事件发生。"),
        # year / month / day markers, ISO dates, English dates and ordinals
        ("2022年开幕。", "在2022举行。"),
        ("2018年5月24日发布。", "Released on 2018-05-24."),
        ("2018年5月24日发布。", "Released on May 24, 2018."),
        ("Released on May 24th, 2018.", "Released on May 24, 2018."),
        ("Released on 24 May 2018.", "2018年5月24日发布。"),
        ("It opened on 2014-08-09.", "It opened on 9 August 2014."),  # sentence-final ISO date
        ("5月24日发布。", "2018-05-24发布。"),
        ("Released in May 2018.", "Released on 24 May 2018."),
        # magnitudes scale the value
        ("约1.4万人参加。", "共14,000人参加。"),
        ("About 14,000 people came.", "共1.4 万人参加。"),
        ("The plant has 2250万千瓦.", "总装机容量22,500,000千瓦。"),
        ("It has 16 billion transistors.", "它有160亿个晶体管。"),
        # unit spellings of one group; thousands separators; decimals by value
        ("Keep it below 8 MPa.", "压力上限为8兆帕。"),
        ("最高温度70 ℃。", "The maximum is 70 °C."),
        ("Every 3,000 hours.", "每3000小时更换。"),
        ("It is 2.50 m long.", "It is 2.5 m long."),
        ("3个月后。", "after 3 months"),
        # 个 stands for any measure word; English count nouns are not units
        ("有78至90个座位。", "座位数78至90座。"),
        ("It seats 75,024 people.", "It holds 75,024 spectators."),
        # spelt-out small numbers before a unit of measurement
        ("It took two minutes.", "It took 2 min."),
        ("用了三小时。", "用时3小时。"),
        # codes with optional separators
        ("HX200 fault E-102.", "HX-200 fault E102."),
        # Chinese numerals before a unit, a measure word or an id part, and after 第
        ("隧道为双洞四车道。", "隧道为双洞4车道。"),
        ("隧道为双洞四车道。", "隧道为双洞四车道。"),
        ("它是西格二线的工程。", "西宁至格尔木段增建二线的工程。"),
        ("在第二台阶搭人梯。", "在“第二台阶”搭人梯。"),
        ("第六届会议。", "第6届会议。"),
        ("共有二十五个站。", "共有25座车站。"),
        ("约两万五千人参加。", "约2.5万人参加。"),
        ("长三点五米。", "长3.5米。"),
        ("二〇一九年七月十一日交付。", "2019年7月11日交付。"),
        ("第一次执行任务。", "首次执行任务。"),
        ("首次执行任务。", "第一次执行任务。"),  # (an answer's 首次 is no fact)
        ("是中国第一艘。", "是中国首艘。"),
        ("按第三条执行。", "按第3条执行。"),
        # a unit standing alone after per / 每
        ("200 million positions per second.", "about 200 million positions per second"),
        ("It counts positions per second.", "It counts 200 million positions each second."),
        ("每小时输送45立方米。", "每小时最多输送45立方米水。"),
        ("It runs at 60 miles per hour.", "It runs at 60 mph."),  # part of the number's unit
        # abbreviations are not other names
        ("是极地科考破冰船。", "是极地科学考察破冰船。"),
        ("浙大团队发现。", "浙江大学团队发现。"),
        ("It was built by Acme Corp.", "It was built by the Acme Corporation."),
    ],
)
def test_correct_facts_written_differently_are_found(answer, context):
    assert unsupported(answer, context) == [], facts(answer)


@pytest.mark.parametrize(
    "answer,context,missing",
    [
        ("2026冬奥会在北京举行。", "2022年北京冬奥会开幕。", "2026"),
        ("2020赛季冠军。", "2021赛季中超冠军。", "2020"),
        ("10·28索马里海盗事件。", "10·29索马里海盗事件发生。", "28"),
        ("2023年开幕。", "在2022举行。", "2023年"),
        ("2018年5月25日发布。", "Released on 2018-05-24.", "2018年5月25日"),
        ("Released on May 25th, 2018.", "Released on May 24, 2018.", "may 25th, 2018"),
        ("Released on May 24th, 2019.", "Released on May 24, 2018.", "may 24th, 2019"),
        ("It opened on 2014-09-09.", "It opened on 9 August 2014.", "2014-09-09"),
        ("约1.5万人参加。", "共14,000人参加。", "1.5万人"),
        ("约1.4亿人。", "约1.4万人。", "1.4亿人"),
        ("About 140,000 people came.", "共1.4 万人参加。", "140000"),
        # a changed unit
        ("Keep it below 8 bar.", "压力上限为8兆帕。", "8 bar"),
        ("最高温度70 ℉。", "The maximum is 70 °C.", "70 °f"),
        ("每3000分钟更换。", "每3000小时更换。", "3000分钟"),
        ("It weighs 1025 lb.", "It weighs 1,025 kg.", "1025 lb"),
        ("有3条。", "有3座。", "3条"),
        ("It took two hours.", "It took two minutes.", "two hours"),
        # a changed number or code
        ("It is 2.6 m long.", "It is 2.5 m long.", "2.6 m"),
        ("HX300 fault.", "HX-200 fault.", "hx300"),
        # a changed Chinese numeral
        ("隧道为双洞六车道。", "隧道为双洞四车道。", "6车道"),
        ("它是西格三线的工程。", "西宁至格尔木段增建二线的工程。", "3线"),
        ("在第三台阶搭人梯。", "在“第二台阶”搭人梯。", "3台阶"),
        ("第七届会议。", "第6届会议。", "7届"),
        ("共有二十六个站。", "共有25座车站。", "26个"),
        ("约三万五千人参加。", "约2.5万人参加。", "35000人"),
        ("用了三天。", "用时3天。", None),  # (a control: found, see below)
        ("风云四号C星发射。", "风云四号B星发射。", "c星"),
        # a changed unit after per / 每
        ("200 million positions per minute.", "200 million positions per second", "per minute"),
        ("每分钟输送45立方米。", "每小时最多输送45立方米水。", "每分钟"),
        # an abbreviation-like name that is another name
        ("杭州团队发现。", "浙江大学团队发现。", "杭州"),
    ],
)
def test_a_changed_fact_is_not_found(answer, context, missing):
    if missing is None:
        assert unsupported(answer, context) == [], facts(answer)
    else:
        assert missing in unsupported(answer, context), facts(answer)


def test_chinese_numbers():
    from rag_lab.text.facts import chinese_number, chinese_numerals

    values = {"二十五": 25, "十五": 15, "一百零五": 105, "两万五千": 25000, "三点五": 3.5,
              "二〇一八": 2018, "三亿": 3e8}  # fmt: skip
    assert {k: chinese_number(k) for k in values} == values
    assert [chinese_number(k) for k in ("三四", "一一", "万", "零五")] == [None] * 4
    # numeral words and ambiguous 千 + unit stay as written; numerals after digits are units
    for text in ("十分重要", "一度", "三千米", "75千瓦时", "一个问题", "一座城市", "五番棋"):
        assert chinese_numerals(text) == text


def test_cjk_after_a_number_is_not_a_unit_but_listed_units_are():
    assert facts("2022冬奥会，2021赛季", names=False) == [("number", "2022"), ("number", "2021")]
    assert facts("7卷，3万人，8兆帕", names=False) == [
        ("number", "7卷"),
        ("number", "3万人"),
        ("number", "8兆帕"),
    ]
    # spelt-out numbers only before a unit of measurement; ordinals are numbers, not codes; a
    # lone 一 before a measure word is no count, 第一次 is an ordinal
    assert facts("one of them, 一个问题，十分重要", names=False) == []
    assert facts("第一次", names=False) == [("number", "1次")]
    assert facts("the 24th of May", names=False) == [("number", "24th")]


def test_names():
    ctx = "Brunel designed it with the European Union and Moderna in the Philippine Sea."
    assert unsupported("It was designed by Brunel.", ctx) == []
    assert unsupported("It was designed by Telford.", ctx) == ["telford"]
    assert unsupported("Moderna's vaccine was funded by the EU.", ctx) == []
    assert unsupported("Novavax's vaccine works.", ctx) == ["novavax"]  # a first word like a name
    assert unsupported("The Philippines were nearby.", ctx) == []  # same stem
    assert unsupported("The report said so.", ctx) == []  # an ordinary first word
    zh = "开幕式总导演为张艺谋。东方航空执飞。雄安站位于雄安新区。"
    assert unsupported("张艺谋担任总导演。", zh) == []
    assert unsupported("陈凯歌担任总导演。", zh) == ["陈凯歌"]
    assert unsupported("南方航空执飞。", zh) == ["南方航空"]
    assert unsupported("雄安站位于保定市。", zh) == ["保定市"]
    assert unsupported("该泵由NEDC测试。", "该泵由CLTC测试。") == ["nedc"]  # Latin in Chinese


def test_facts_need_names_flag():
    assert [k for k, _ in facts("It was designed by Brunel.", names=False)] == []


# --- judge16: false alarms on correct held-out answers, each fixed in both directions ----------


@pytest.mark.parametrize(
    "answer,context,missing",
    [
        # demonyms: a regular one by its suffix, an irregular one from DEMONYMS; a different
        # place's demonym is still flagged
        ("He said European growth slowed.", "He said growth slowed in Europe.", None),
        ("He said Asian growth slowed.", "He said growth slowed in Europe.", "asian"),
        ("It was tested by Japanese engineers.", "It was tested in Japan.", None),
        ("It was tested by Korean engineers.", "It was tested in Japan.", "korean"),
        ("American factories made it.", "Factories in the United States made it.", None),
        ("It used British parts.", "Factories in the United States made it.", "british"),
        # acronyms of common nouns are no names; an acronym naming something still is
        ("Its IPO raised $16 billion.", "It went public, raising $16 billion.", None),
        ("It listed on the NYSE.", "It listed in New York.", "nyse"),
        # a count of occurrences stated with a noun ("11 wins" states "11 times"), not 11%
        ("He won 11 times.", "He took 11 wins that season.", None),
        ("He won 12 times.", "He took 11 wins that season.", "12 times"),
        ("It grew 12 times.", "It grew 12% that year.", "12 times"),
        # hyphenated units ("five-second pulse", "1.5-litre engine")
        ("The pulse lasted five seconds.", "The five-second pulse was a record.", None),
        ("The pulse lasted five minutes.", "The five-second pulse was a record.", "five minutes"),
        ("It has a 1.5 litre engine.", "It has a 1.5-litre engine.", None),
        ("It has a 1.5 kg engine.", "It has a 1.5-litre engine.", "1.5 kg"),
        # a Chinese name holding a numeral is matched in the context's form (长征二号 ~ 长征2号)
        # (jieba tags 长征二号 as a name, not 长征四号: that change is caught as the number 4)
        ("悟空号搭乘长征二号丁火箭升空。", "悟空号由长征二号丁运载火箭发射。", None),
        ("悟空号搭乘长征四号丁火箭升空。", "悟空号由长征二号丁运载火箭发射。", "4"),
        ("使用的是长征二号F（CZ-2F）火箭。", "由长征二号F（CZ-2F）火箭发射升空。", None),
        ("使用的是长征二号B（CZ-2F）火箭。", "由长征二号F（CZ-2F）火箭发射升空。", "号b"),
        # a team named without its middle words (中国队 ~ 中国乒乓球男队); another team is flagged
        ("中国队3比0击败德国队。", "中国乒乓球男队以3比0战胜德国队。", None),
        ("日本队3比0击败德国队。", "中国乒乓球男队以3比0战胜德国队。", "日本队"),
        # a score is one fact: 3比1 is not supported by a 3 and a 1 elsewhere
        ("中国队3比1击败德国队。", "中国乒乓球男队以3比0战胜德国队，成为首位选手。", "3:1"),
        ("The final ended 3:0.", "The final ended 3比0.", None),
        # a date's day is no count: 16圈 is not supported by 10月16日
        ("飞船绕地球飞行了16圈。", "飞船绕地球飞行14圈，于10月16日着陆。", "16圈"),
        ("It was built in 2019.", "It opened on 12 March 2019.", None),  # a date's year still is
        # a single-letter id after punctuation (，A股); not a unit letter ("3000 h更换")
        ("股票上市，A股代码是06030。", "股票上市，H股代码为06030。", "a股"),
        ("股票上市，H股代码是06030。", "股票上市，H股代码为06030。", None),
        ("密封件每3000 h更换。", "密封件每3000小时更换。", None),
    ],
)
def test_judge16_false_alarms_and_their_changed_values(answer, context, missing):
    found = unsupported(answer, context)
    if missing is None:
        assert found == [], facts(answer)
    else:
        assert missing in found, facts(answer)


def test_chinese_function_words_carry_no_claim():
    from rag_lab.text.facts import function_words

    assert {"如果", "比"} <= function_words("如果屏幕显示E1，比发行价高出约202%。")
    assert not {"屏幕", "发行价", "高出"} & function_words("如果屏幕显示E1，比发行价高出约202%。")
    assert function_words("If it fails, call us.") == frozenset()


# --- judge16c: the causes the second held-out set found, each fixed in both directions ---------


@pytest.mark.parametrize(
    "answer,context,missing",
    [
        # a lone 两 before a measure word is "the two" in an answer (no fact), a count in a
        # context (supports 2人); a changed count is still flagged
        ("两人的14盘慢棋打成7比7。", "两位棋手的14盘慢棋全部战平，比分7比7。", None),
        ("2人参加了决赛。", "两人参加了决赛。", None),
        ("3人参加了决赛。", "两人参加了决赛。", "3人"),
        # 首 + any measure word is 第一 in a context (首枚, 首颗 as 首次 was)
        ("拿下中国的第一枚金牌。", "获得中国首枚金牌。", None),
        ("拿下中国的第二枚金牌。", "获得中国首枚金牌。", "2枚"),
        ("这是第一颗卫星。", "这是首颗卫星。", None),
        # a code does not absorb a trailing hyphenated word ("IP55-rated" states IP55)
        ("It is IP55-rated.", "It is rated IP55.", None),
        ("It is IP54-rated.", "It is rated IP55.", "ip54"),
        # units from a fuller list: US volumes, Chinese market units, energy and power
        ("It holds 30 gallons.", "It has a 30-gallon tank.", None),
        ("It holds 30 gallons.", "It holds 30 litres.", "30 gallons"),
        ("重911.7斤。", "重911.7市斤。", None),
        ("重911.7斤。", "重911.7公斤。", "911.7斤"),
        ("It is a 2 GW plant.", "它的装机容量为2吉瓦。", None),
        ("It is a 2 GW plant.", "It is a 2 MW plant.", "2 gw"),
        # "nm" names a nanometre or a newton metre: either matches, another unit does not
        ("It is a 4 nm chip.", "它采用4纳米工艺。", None),
        ("It gives 250 Nm of torque.", "It gives 250 N·m of torque.", None),
        ("It uses 405 nm light.", "It uses 405 mm light.", "405 nm"),
        # a Chinese numeral converted next to a Latin token stays apart ("3D两种" -> "3d 2种")
        ("有2D和3D两种版本。", "有2D和3D两种版本。", None),
        # a capitalised first word that is no dictionary word is a name; a word is not
        ("Layerworks began selling it.", "Layerworks sells it.", None),
        ("Creality began selling it.", "Layerworks sells it.", "creality"),
        ("Carrying three people, it dives.", "It dives with three people aboard.", None),
        # names with an apostrophe are one name, in either apostrophe
        ("De'Longhi released it.", "De’Longhi released it in 2023.", None),
        ("De'Longhi released it.", "Caldera released it.", "de'longhi"),
        ("It was made by De'Longhi.", "It was made by De'Medici.", "de'longhi"),
    ],
)
def test_judge16c_causes_and_their_changed_values(answer, context, missing):
    found = unsupported(answer, context)
    if missing is None:
        assert found == [], facts(answer)
    else:
        assert missing in found, facts(answer)


# --- judge16d: the classes the held-out sets found, each rule tested in both directions ---------


@pytest.mark.parametrize(
    "answer,context,missing",
    [
        # a place matches its demonym as a demonym its place (irregular from DEMONYMS, regular by
        # suffix); another place is still flagged
        ("Sofie Lund of Denmark won.", "The Danish golfer Sofie Lund won.", None),
        ("Sofie Lund of Sweden won.", "The Danish golfer Sofie Lund won.", "sweden"),
        ("Lotte Verhaegen of Belgium won.", "The Belgian rider Lotte Verhaegen won.", None),
        ("Lotte Verhaegen of Austria won.", "The Belgian rider Lotte Verhaegen won.", "austria"),
        ("Pablo Arrieta from Spain won.", "The Spanish rider Pablo Arrieta won.", None),
        # a capitalised dictionary word that starts a sentence before a past-tense verb is a name
        ("Canon released the R8.", "The R8 was released by Canon in 2020.", None),
        ("Canon released the R8.", "The R8 was released by Nikon in 2020.", "canon"),
        ("Robots clean its panels.", "A robotic system cleans the panels.", None),
        # a Chinese "name" that is no name by a second signal: an approximation, after a degree
        # adverb, an unknown word ending in a dimension; a real name is still checked
        ("它是现存最古老的石拱桥。", "它是现存最早的石拱桥。", None),
        ("海拔只有2850米左右。", "海拔约2850米。", None),
        ("楼高438米。", "塔楼高度为438米。", None),
        ("马莱莱夺冠。", "马龙夺冠。", "马莱莱"),
        # an organisation's name of two words before its kind; short forms of institutions
        ("由江南造船集团建造。", "雪龙2号由江南造船集团负责建造。", None),
        ("由大连造船集团建造。", "雪龙2号由江南造船集团负责建造。", "大连造船集团"),
        ("登陆上交所科创板。", "在上海证券交易所科创板上市。", None),
        ("登陆深交所科创板。", "在上海证券交易所科创板上市。", "深交所"),
        # a character jieba does not know starts a name; the maker before a Latin product name
        ("哈苏主摄用的是CMOS。", "其中哈苏主摄采用CMOS。", None),
        ("徕卡主摄用的是CMOS。", "其中哈苏主摄采用CMOS。", "徕卡"),
        ("纵维立方的Photon Mono M7是打印机。", "纵维立方Photon Mono M7打印机。", None),
        ("智能派的Photon Mono M7是打印机。", "纵维立方Photon Mono M7打印机。", "智能派"),
        # 第N条 + a noun is an ordinal (a bare number), a clause id in a legal text
        ("第二条跑道开始使用。", "第二跑道投入使用。", None),
        ("第三条跑道开始使用。", "第二跑道投入使用。", "3"),
        ("按《劳动合同法》第39条解除。", "《劳动合同法》第三十九条规定。", None),
        ("按《劳动合同法》第40条解除。", "《劳动合同法》第三十九条规定。", "第40条"),
        # 日 (not a date's day) is the day of a rate: 每天 ~ 日耗电量; another unit is flagged
        ("每天用电0.96千瓦时。", "日耗电量为0.96千瓦时。", None),
        ("每小时用电0.96千瓦时。", "日耗电量为0.96千瓦时。", "每小时"),
        # an institution's number with its kind: 702所 ~ 第702研究所
        ("由702所研制。", "由第702研究所研制。", None),
        ("由703所研制。", "由第702研究所研制。", "703所"),
    ],
)
def test_judge16d_classes_both_ways(answer, context, missing):
    found = unsupported(answer, context)
    if missing is None:
        assert found == [], facts(answer)
    else:
        assert missing in found, facts(answer)


def test_a_word_where_the_context_has_a_name_is_a_name():
    context = "机场位于北京市大兴区与河北省廊坊市交界处。"
    assert [f.text for f in slot_names("位于大兴区和河北保定交界处。", context)] == ["保定"]
    assert slot_names("位于大兴区和河北廊坊交界处。", context) == []
    # a paraphrased verb in a frame is no name: only a name of the context, give or take one
    # character, stands there
    assert slot_names("大桥连接嘉兴和宁波。", "大桥北起嘉兴市海盐县，南至宁波市慈溪市。") == []


def test_chinese_fractions_are_percentages():
    assert normalise_facts_text("约有百分之七十是女性，四分之一来自城市", context=False) == (
        "约有70%是女性,25%来自城市"
    )
    assert facts("三分之二的人") == [("number", "66.7%")]
    assert unsupported("其中四分之一是女性。", "25%的参与者是女性。") == []
    assert unsupported("其中三分之一是女性。", "25%的参与者是女性。") == ["33.3%"]


def test_hyphenated_gene_names_and_a_maker_glued_to_its_model():
    assert ("name", "c-myc") in facts("c-Myc therefore controls IL-4 gene transcription.")
    assert unsupported("c-Myc controls IL-4.", "c-Maf controls IL-4.") == ["c-myc"]
    assert unsupported("c-Maf controls IL-4.", "c-Maf controls IL-4.") == []
    # 小米 is "millet" to jieba, but glued to a model name with a number it is the maker
    assert ("name", "小米") in facts("在小米Mate 60上打开设置。")
    assert unsupported("在小米Mate 60上打开设置。", "华为Mate 60恢复出厂设置的步骤") == ["小米"]
    usb = facts("支持USB 3接口")
    assert ("name", "usb") in usb and ("name", "支持") not in usb  # a verb is no maker


def _sample_texts() -> list[str]:
    """The sample's tickets (Chinese and English, codes, numbers, units), joined as the judge
    joins contexts and with the separators jieba treats specially (CRLF, runs of spaces)."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[2] / "datasets/maintenance_kb/docs/tickets.jsonl"
    texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]
    return [*texts, "\n".join(texts[:6]), "\r\n".join(texts[3:9]), "  \r \n".join(texts[-4:])]


def test_pos_tags_are_jiebas_own_block_by_block():
    """Tagging block by block (each block once) gives jieba's tags of the whole text, word for
    word, on the sample's tickets alone and joined; the second reading of a text is served from
    the blocks already tagged."""
    import jieba
    import jieba.posseg

    from rag_lab.text.facts._name_facts import _block_tags, _pos_tags

    jieba.dt.check_initialized()
    texts = _sample_texts()
    for text in texts:
        expected = tuple(
            (p.word, p.flag, jieba.dt.FREQ.get(p.word, 0) > 0) for p in jieba.posseg.cut(text)
        )
        assert _pos_tags(text) == expected
    before = _block_tags.cache_info().misses
    _pos_tags("\n".join(texts[:3]))  # its blocks were all seen in the tickets
    assert _block_tags.cache_info().misses == before
