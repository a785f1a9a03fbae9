"""The offline reader picks the sentence or table row that holds the answer, renders rows as sentences, says
when its source is in the other language, and cites only sentences that support what they are quoted for.

Driven through the offline engine (``OfflineLanguageModel.compose_answer``), as the answer stage calls it.
"""

from __future__ import annotations

import pytest

from docmind_core.answer.claims import check_claims
from docmind_core.answer.generate import build_answer_prompt
from docmind_core.backends.offline.chat import OfflineLanguageModel
from docmind_core.values import RetrievedChunk

# chunks as the demo corpus (data/demo) is ingested
PRICING = RetrievedChunk(chunk_id="pricing", document="pricing_comparison.html", text=(
    "## Nimbus appliances\n\nModel | Price | CPU | Memory | Storage | Maximum power draw |\n\n"
    "Nimbus N1 | 1,490 USD | 4-core ARM | 16 GB | 1 TB SSD | 28 W |\n\n"
    "Nimbus N2 | 2,390 USD | 8-core x86 | 32 GB | 2 TB NVMe | see the N2 datasheet |\n\n"
    "Each appliance includes one year of firmware updates and hardware warranty. Extended warranty costs "
    "290 USD per year for the N1 and 390 USD per year for the N2."))
PROFILE = RetrievedChunk(chunk_id="profile", document="company_profile_zh.txt", text=(
    "海岚数据（Halcyon Data）公司简介\n\n海岚数据成立于 2019 年，总部位于杭州，在法兰克福和旧金山设有办事处，目前员工约 "
    "240 人。公司专注于企业知识管理，帮助组织把分散在各处的文档变成可以搜索、可以提问的知识。\n\n公司有两条产品线：\n\n"
    "一、Aurora 知识平台。面向需要跨部门检索文档的团队，提供云服务和私有化部署两种方式，支持中文和英文文档的智能问答。\n\n"
    "二、Nimbus 边缘设备。一款放在客户机房或现场的小型服务器，在本地完成文档解析和索引，适合对数据不出厂区有要求的工厂、"
    "医院和实验室。Nimbus 目前有 N1 和 N2 两个型号。\n\n截至 2025 年底，海岚数据服务了超过 600 家企业客户，其中制造业客户"
    "约占三分之一。公司的使命是“让每一份文档都能回答问题”。"))
MANUAL = RetrievedChunk(chunk_id="manual", document="nimbus_manual_zh.docx", text=(
    "# 安装步骤\n\n第一步：把设备放在通风良好的位置，接上电源和网线。\n\n第二步：用电脑连接管理口，在浏览器中打开默认管理地址 "
    "192.168.50.1。\n\n第三步：使用快速入门卡上的一次性激活码完成激活，并立即设置新的管理员密码。"))
FAQ = RetrievedChunk(chunk_id="faq", document="faq.md", text=(
    "## Data retention\n\nAurora keeps documents and answers for 180 days by default. "
    "Administrators can change the retention period in the console."))
VARADKAR = RetrievedChunk(chunk_id="hp00834", document="Leo Varadkar", text=(
    "Leo Varadkar\nLeo Eric Varadkar ( ; Irish: \"Leo de Varad\" ;born 18 January 1979) is an Irish Fine Gael "
    "politician who has served as Taoiseach, Minister for Defence and Leader of Fine Gael since June 2017. He has "
    "been a Teachta Dála (TD) since 2007, currently for the Dublin West constituency."))
KENNY = RetrievedChunk(chunk_id="hp01234", document="Enda Kenny", text=(
    "Enda Kenny\nEnda Patrick Kenny (born 24 April 1951) is an Irish Fine Gael politician who served as Taoiseach "
    "from 2011 to 2017, Leader of Fine Gael from 2002 to 2017."))


@pytest.fixture(scope="module")
def engine(prompts):
    return OfflineLanguageModel(prompts)


def ask(engine, prompts, question, sources):
    prompt = build_answer_prompt("knowledge_qa", question, list(sources), [], [], prompts)
    return engine.compose_answer(prompt)


def cited_claims(answer, sources):
    return [c for c in check_claims(answer, list(sources)) if c.cited]


def test_chinese_question_over_english_table_gets_rows_as_sentences(engine, prompts):
    text = ask(engine, prompts, "Nimbus N1 和 N2 的价格分别是多少？", [PRICING])
    assert "|" not in text  # not the raw pipe rows
    assert "Nimbus N1: Price 1,490 USD" in text and "Nimbus N2: Price 2,390 USD" in text
    assert "来源为英文" in text  # the note that the source is English, in the question's language
    claims = cited_claims(text, [PRICING])
    assert len(claims) == 2 and all(c.status == "supported" for c in claims)


def test_english_question_over_chinese_source_says_so(engine, prompts):
    text = ask(engine, prompts, "What is the default management address of the Nimbus?", [MANUAL, PRICING])
    assert "192.168.50.1" in text
    assert "the source is in Chinese" in text


def test_a_filler_sentence_is_not_cited(engine, prompts):
    text = ask(engine, prompts, "Nimbus 的默认管理地址是什么？", [PROFILE, MANUAL])
    assert "192.168.50.1" in text
    assert "公司专注于企业知识管理" not in text
    assert "[1]" not in text  # the company profile states no address


@pytest.mark.parametrize("question, sources, expected, not_expected", [
    # the title line and the founding sentence were quoted; the mission sentence was not
    ("海岚数据的使命是什么？", [PROFILE], "让每一份文档都能回答问题", "公司简介"),
    # the sentence was quoted from after its ";", without the name that answers
    ("Since 2 June 2017, the Leader of Fine Gael had been held by which Irish Fine Gael politician who has "
     "served as Taoiseach and Minister for Defence?", [VARADKAR, KENNY], "Leo Eric Varadkar", "Enda"),
])
def test_a_factoid_is_answered_by_the_sentence_that_holds_it(engine, prompts, question, sources, expected,
                                                           not_expected):
    text = ask(engine, prompts, question, sources)
    assert expected in text
    assert not_expected not in text


@pytest.mark.parametrize("question, sources", [
    ("Nimbus N1 和 N2 的价格分别是多少？", [PRICING]),
    ("What is the price of the Nimbus N2?", [PRICING]),
    ("Nimbus 的默认管理地址是什么？", [PROFILE, MANUAL]),
    ("海岚数据总部在哪里？有多少员工？", [PROFILE]),
    ("How long does Aurora keep documents by default?", [FAQ, PROFILE]),
    ("Aurora 默认的数据保留期是多久？", [FAQ, PROFILE]),
])
def test_every_cited_sentence_passes_the_claim_check(engine, prompts, question, sources):
    text = ask(engine, prompts, question, sources)
    claims = cited_claims(text, sources)
    assert claims, text
    assert [c.text for c in claims if c.status != "supported"] == []


DATASHEET = RetrievedChunk(chunk_id="datasheet", document="nimbus_n2_datasheet.pdf", text=(
    "Nimbus N2 Edge Appliance - Datasheet\nDocument revision 2026-01. Applies to hardware revision B.\n"
    "Power and environment\nThe maximum power draw of the Nimbus N2 is 45 W at full load; typical draw while idle "
    "is 18 W."))
RELEASE_NOTES = RetrievedChunk(chunk_id="notes", document="release_notes.md", text=(
    "## Nimbus firmware\n\n### Firmware 3.2.1 — 2026-02-10\n- Fixed: the fan controller could stop the fan after "
    "waking from standby, which raised the chassis temperature and triggered error NIM-201."))
TROUBLESHOOTING = RetrievedChunk(chunk_id="trouble", document="troubleshooting_zh.md", text=(
    "## NIM-201：风扇故障或机箱温度过高\n\n原因：风扇停转或者通风口被堵住。固件 3.2.0 存在待机唤醒后风扇不转的问题。\n\n"
    "处理步骤：\n1. 确认设备周围至少留有 10 厘米的通风空间。\n2. 将固件升级到 3.2.1 或更高版本。"))


def test_a_sibling_row_is_not_quoted_for_the_asked_model(engine, prompts):
    text = ask(engine, prompts, "What is the maximum power draw of the Nimbus N2?", [PRICING, DATASHEET])
    assert "45 W" in text
    assert "Nimbus N1" not in text  # the N1's row holds a power draw, of another model


def test_a_source_in_the_question_language_is_preferred(engine, prompts):
    text = ask(engine, prompts, "Nimbus 报 NIM-201 错误应该怎么办？", [RELEASE_NOTES, TROUBLESHOOTING])
    assert "风扇故障" in text
    assert "来源为英文" not in text and "fan controller" not in text


def test_a_number_of_another_attribute_does_not_win_the_language_preference(engine, prompts):
    # "两个型号" is a number in Chinese; the price is in the English table
    text = ask(engine, prompts, "Nimbus N1 和 N2 的价格分别是多少？", [PROFILE, PRICING])
    assert "Nimbus N1: Price 1,490 USD" in text and "Nimbus N2: Price 2,390 USD" in text
    assert "两个型号" not in text


def test_a_founding_year_does_not_answer_how_long(engine, prompts):
    text = ask(engine, prompts, "Aurora 默认的数据保留期是多久？", [PROFILE, FAQ])
    assert "180 days" in text and "来源为英文" in text
    assert "2019" not in text


def test_a_value_question_is_not_answered_by_a_sentence_about_something_else(engine, prompts):
    # the pricing table is not among the sources: the models are named, their price is not
    text = ask(engine, prompts, "Nimbus N1 和 N2 的价格分别是多少？", [PROFILE, MANUAL])
    assert "两个型号" not in text
    assert "没有能回答这个问题的内容" in text


# --------------------------------------------------------------------------
# Across languages with the encoder (the demo's q12: an English question, the answer in a Chinese manual)
# --------------------------------------------------------------------------

LIGHTS = RetrievedChunk(chunk_id="lights", document="nimbus_manual_zh.docx", text=(
    "# 指示灯说明\n\n本手册适用于 Nimbus N1 和 N2 设备。绿灯常亮表示运行正常；绿灯闪烁表示正在建立索引；黄灯常亮表示固件正在"
    "升级，请勿断电；红灯闪烁表示硬件故障，请查看控制台中的错误代码。"))
OVERVIEW = RetrievedChunk(chunk_id="overview", document="aurora_overview.md", text=(
    "## Edge indexing\n\nAurora can use a Nimbus edge appliance as a local indexing node. A Nimbus appliance works "
    "fully offline once it has been activated."))
RED_LIGHT = "What does a flashing red light on a Nimbus appliance mean?"


@pytest.fixture(scope="module")
def reading_engine(prompts, embedder):
    return OfflineLanguageModel(prompts, encoder=embedder)


def test_words_alone_quote_same_language_filler_for_a_question_answered_in_the_other_language(engine, prompts):
    # what the reader did before it had the encoder: "Nimbus appliance" is all the English sentences share
    text = ask(engine, prompts, RED_LIGHT, [OVERVIEW, LIGHTS])
    assert "红灯闪烁" not in text


def test_the_encoder_finds_the_answer_in_the_other_language_and_says_so(reading_engine, prompts):
    text = ask(reading_engine, prompts, RED_LIGHT, [OVERVIEW, LIGHTS])
    assert "红灯闪烁表示硬件故障" in text and "(the source is in Chinese)" in text
    assert "绿灯" not in text and "local indexing node" not in text  # neither the sibling lights nor filler
    claims = cited_claims(text, [OVERVIEW, LIGHTS])
    assert claims and all(c.cited == [2] and c.status == "supported" for c in claims)


def test_a_same_language_answer_still_wins_over_its_translation(reading_engine, prompts):
    english = RetrievedChunk(chunk_id="lights_en", document="nimbus_manual_en.md", text=(
        "## Indicator lights\n\nA flashing red light on a Nimbus appliance means a hardware fault; check the error "
        "code in the console."))
    text = ask(reading_engine, prompts, RED_LIGHT, [LIGHTS, english])
    assert "hardware fault" in text and "红灯" not in text and "source is in Chinese" not in text


def test_words_that_reach_across_keep_their_reading(reading_engine, prompts):
    # a code and "价格" / "Price" already match the English rows: the encoder changes nothing there
    text = ask(reading_engine, prompts, "Nimbus N1 和 N2 的价格分别是多少？", [PROFILE, PRICING])
    assert "Nimbus N1: Price 1,490 USD" in text and "Nimbus N2: Price 2,390 USD" in text


def test_nothing_close_in_the_other_language_is_not_quoted(reading_engine, prompts):
    text = ask(reading_engine, prompts, "How do I rotate the API signing keys?", [MANUAL, LIGHTS])
    assert "do not contain an answer" in text


OFFLINE_FAQ = RetrievedChunk(chunk_id="faq_offline", document="faq.md", text=(
    "## Can Nimbus run without an internet connection?\n\nA Nimbus appliance works fully offline once it has been "
    "activated. It needs a connection only to download firmware updates."))


@pytest.mark.parametrize("question, expected", [
    ("Nimbus 的默认管理地址是什么？", "192.168.50.1"),
    ("如何修改 Aurora 的数据保留期？允许的范围是多少？", "30 天到 720 天"),
])
def test_a_same_language_sentence_holding_what_is_asked_is_not_overruled_by_meaning(reading_engine, prompts,
                                                                                   question, expected):
    guide = RetrievedChunk(chunk_id="guide", document="aurora_admin_guide_zh.md", text=(
        "# 数据保留\n\n数据保留期可以设置为 30 天到 720 天之间的任意天数。缩短保留期后，超出新期限的数据会在 24 小时内被永久删除。"))
    text = ask(reading_engine, prompts, question, [OFFLINE_FAQ, MANUAL, guide, FAQ])
    assert expected in text and "来源为英文" not in text


def test_an_encoder_that_fails_leaves_the_answer_to_words(prompts):
    class BrokenEncoder:
        id, dim = "broken", 3

        def embed(self, texts):
            raise RuntimeError("the model server went away")

    engine = OfflineLanguageModel(prompts, encoder=BrokenEncoder())
    text = ask(engine, prompts, RED_LIGHT, [OVERVIEW, LIGHTS])
    assert text == ask(OfflineLanguageModel(prompts), prompts, RED_LIGHT, [OVERVIEW, LIGHTS])


def test_a_same_language_answer_closer_in_meaning_wins_though_it_shares_few_words(reading_engine, prompts):
    # "red" is its only content word in common with the question (below the share that keeps words outright); its
    # meaning is clearly closer than the Chinese line's, so the answer stays in the question's language
    status = RetrievedChunk(chunk_id="status", document="nimbus_status.md", text=(
        "## Status\n\nOn a Nimbus, a blinking red indicator means a hardware fault; read the error code in the "
        "console."))
    text = ask(reading_engine, prompts, RED_LIGHT, [LIGHTS, status])
    assert "blinking red indicator" in text and "红灯" not in text and "source is in Chinese" not in text
