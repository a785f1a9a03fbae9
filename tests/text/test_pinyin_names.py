"""Chinese names across scripts (issue 22): a romanised name in an English question found in Chinese text by its
pinyin, and a Chinese question's person and place names found in English text."""

from __future__ import annotations

from docmind_core.text.pinyin_names import NameBridge, chinese_names, romanised_names


def _names(question: str) -> list[str]:
    return [n.text for n in romanised_names(question)]


def test_runs_of_capitalised_pinyin_words_are_names_and_other_capitalised_words_are_not():
    assert _names("Who was Sima You, the Prince of Dong'an in the Western Jin dynasty?") == ["Sima You", "Dong'an"]
    # "Metro" is no pinyin; "Line" spells li-ne, kept here, and counts only where some passage holds it
    assert _names("Which buildings surround Dashadi station of Guangzhou Metro Line 5?") == [
        "Dashadi", "Guangzhou", "Line"]
    assert _names("Who founded the Ming dynasty?") == []  # one syllable matches too many characters
    assert _names("Where did Lǚ Bù die?") == ["Lu Bu"]  # tone marks and ü as an English writer may keep them
    assert _names("what does sima you mean?") == []  # a name is capitalised


def test_a_romanised_name_finds_its_characters_whatever_their_other_readings():
    assert NameBridge("Who was Dao Tong, the magistrate of Panyu county?").shares(
        ["道同任番禺知县，为官正直。", "番禺区位于广州南部。", "同道中人。"]) == [1.0, 0.5, 0.0]  # 番 reads fan and pan
    assert NameBridge("What happened in Chang'an in 763?").shares(["长安城被吐蕃攻占。"]) == [1.0]


def test_a_share_counts_only_the_names_some_passage_of_the_batch_holds():
    bridge = NameBridge("Which buildings surround Dashadi station of Guangzhou Metro Line 5?")
    shares = bridge.shares(["大沙地站位于广州市黄埔区，周边有黄埔区政府。", "大沙东站是广州地铁5号线的车站。",
                            "Dashadi station is near the river."])
    # "Line" (li-ne) is in no passage, so it is no name here: 2 of 2 names, 1 of 2, and 0 for the English text
    assert shares == [1.0, 0.5, 0.0]
    assert NameBridge("Which river flows through the old town?").empty


def test_a_chinese_question_s_names_are_found_in_english_text_as_writers_spell_them():
    [(word, pattern)] = chinese_names("司马迁写了哪部史书？")
    assert word == "司马迁"
    for text in ("Sima Qian wrote the Records", "SIMAQIAN", "Sima-Qian's history"):
        assert pattern.search(text), text
    assert not pattern.search("Simaqiang") and not pattern.search("Sima is a surname; Qian another")
    bridge = NameBridge("司马迁在长安写了什么？")
    assert bridge.shares(["Sima Qian wrote the Records of the Grand Historian in Chang'an.",
                          "Simaqian is a romanised name.", "司马迁是西汉史学家。"]) == [1.0, 0.5, 0.0]


def test_a_question_without_names_bridges_nothing():
    for question in ("什么是向量数据库？", "How long is the pump warranty?"):
        bridge = NameBridge(question)
        assert bridge.empty and bridge.shares(["任意文本", "any text"]) == [0.0, 0.0]


def test_a_word_that_almost_spells_pinyin_is_read_in_linear_steps(monkeypatch):
    """"Ananan...x" used to be cut every possible way (2^n) before failing at the x; now only cuts that can reach
    the word's end are walked, and an over-long word is no name at all."""
    import docmind_core.text.pinyin_names as module

    table = module._characters_by_syllable()

    class Counting(dict):
        lookups = 0

        def __contains__(self, key):
            Counting.lookups += 1
            return dict.__contains__(self, key)

    monkeypatch.setattr(module, "_characters_by_syllable", lambda: Counting(table))
    word = "ananananananananananana" + "x"
    assert module._splits(word) == []
    assert Counting.lookups <= 6 * len(word)  # the old walk made thousands here
    assert module._splits("b" * 40) == [] and module._splits("sima") == [("si", "ma")]
