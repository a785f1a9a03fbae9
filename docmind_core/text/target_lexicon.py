"""The words that say *which* value a text states: qualifiers ("idle", "最大"), variant words ("Lite", "青春版"),
places and comparison cues, in English and Chinese.  Data only; ``text/targets.py`` reads questions and
statements with them.

A qualifier group is one condition a value is stated under.  A question that names a group's word asks for
the value under that condition, and a statement answers it only when it carries a word of the same group
(in either language) where the value stands: "typical draw while idle is 18 W" answers "idle power draw";
"Maximum power draw: 28 W" does not.  The groups are kept apart on purpose: "typical" is not "average", and
"default" is not "recommended", because a source that states one often states the other next to it.
"""

from __future__ import annotations

# group -> (English words and phrases, matched as whole words; Chinese strings, matched as substrings)
QUALIFIERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "idle": (("idle", "idling", "standby", "at rest", "sleep mode"), ("待机", "空闲", "闲置", "静置", "空载")),
    "maximum": (("maximum", "max", "peak", "highest", "at most", "up to", "full load", "upper limit", "top speed",
                 "largest"),
                ("最大", "最高", "峰值", "满载", "上限", "至多", "最多", "满负荷")),
    "minimum": (("minimum", "min", "lowest", "at least", "smallest", "lower limit", "starts at", "starting at",
                 "starting from"),
                ("最小", "最低", "至少", "下限", "起步", "最少")),
    "typical": (("typical", "typically", "nominal", "normal operation", "usual", "usually"),
                ("典型", "通常", "一般情况", "常规")),
    "average": (("average", "averages", "mean", "avg", "on average"), ("平均", "均值")),
    "default": (("default", "defaults", "by default", "out of the box", "factory setting", "factory settings",
                 "preset"),
                ("默认", "缺省", "出厂设置", "预设")),
    "recommended": (("recommended", "recommend", "suggested"), ("推荐", "建议")),
    "allowed range": (("range", "allowed", "permitted", "between", "from", "valid values"),
                      ("范围", "允许", "区间", "之间")),
    "annual": (("annual", "annually", "yearly", "per year", "a year", "each year", "every year"),
               ("每年", "年度", "年付", "按年", "一年")),
    "monthly": (("monthly", "per month", "a month", "each month", "every month"),
                ("每月", "月度", "月付", "按月", "每个月")),
}

# Words of a qualifier group that, in a question, are too common to ask for the condition on their own
# ("How much storage do I get *from* the Team plan?" asks for no range; "a year" is a duration).
QUESTION_ONLY_WEAK = frozenset({"from", "between", "a year", "a month", "up to", "usual", "usually", "mean", "一年",
                                "min", "max", "每年", "每月", "每个月", "一般情况", "通常"})

# Currencies a question may ask a price in: the value's unit must be one of the group's.
CURRENCIES: dict[str, tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]] = {
    "usd": (("usd", "us dollars", "dollars", "dollar", "$"), ("美元", "美金"), frozenset({"usd"})),
    "eur": (("eur", "euro", "euros", "€"), ("欧元",), frozenset({"eur"})),
    "cny": (("rmb", "cny", "yuan", "renminbi", "¥"), ("人民币", "元"), frozenset({"cny"})),
    "jpy": (("jpy", "yen"), ("日元",), frozenset({"jpy"})),
    "gbp": (("gbp", "pounds", "sterling", "£"), ("英镑",), frozenset({"gbp"})),
}

# Words that mark a variant of a named product: "N1" is not "N1 Lite".  Compared whole-word, lower case.
VARIANT_WORDS = frozenset("""lite light pro plus max mini nano ultra air se xl xs neo turbo prime premium basic standard
    advanced elite edge compact slim go one duo classic gen""".split()) - {"edge", "one", "go"}
ZH_VARIANT_WORDS = ("轻量版", "青春版", "专业版", "增强版", "旗舰版", "标准版", "精简版", "迷你版", "高配版", "低配版",
                    "基础版", "豪华版", "企业版", "团队版", "商业版", "个人版", "家庭版", "版")

# Places a question names, both languages (a small list of those product, pricing and company documents use;
# capitalised English place names are read as names anyway).
ZH_PLACES = ("中国大陆", "中国", "大陆", "香港", "台湾", "日本", "韩国", "美国", "欧盟", "欧洲", "英国", "德国", "法国",
             "新加坡", "印度", "澳大利亚", "加拿大", "北京", "上海", "杭州", "深圳", "广州", "成都", "南京", "武汉",
             "法兰克福", "旧金山", "纽约", "伦敦", "东京", "巴黎", "柏林", "弗吉尼亚", "亚洲", "北美", "全球")
# English place names (lower case): a place is read in the clause its value stands in, not the whole sentence
EN_PLACES = frozenset({"us", "u.s.", "usa", "united states", "eu", "european union", "europe", "uk", "china",
                       "china mainland", "mainland china", "hong kong", "taiwan", "japan", "korea", "germany",
                       "france", "singapore", "india", "australia", "canada", "beijing", "shanghai", "hangzhou",
                       "shenzhen", "guangzhou", "frankfurt", "san francisco", "new york", "london", "tokyo", "paris",
                       "berlin", "virginia", "asia", "north america", "emea", "apac"})

# A question that compares: it must be answered for each side it names.
COMPARISON_CUES_EN = ("compare", "comparison", "compared", "difference", "differences", "differ", "versus", "vs",
                      "both", "between", "respectively", "each of")
COMPARISON_CUES_ZH = ("比较", "对比", "区别", "差异", "异同", "分别", "各自", "相比", "两者", "有何不同", "有什么不同")
