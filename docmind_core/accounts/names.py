r"""Knowledge-base names that look alike: ``alice_priv``, ``Alice_priv``, ``alice_pr\u0456v`` (Cyrillic i),
``\u0430lice_priv`` (Cyrillic a) and ``alice\u200b_priv`` (a zero-width space) read the same on a screen, so a
second KB under such a name passes for the first one.  :func:`name_skeleton` maps each name to the form two such
names share; creating a KB whose skeleton equals an existing KB's is refused (``Workbench.create_kb``).

The skeleton is NFKC (full-width and compatibility forms: ``ａｌｉｃｅ`` is ``alice``), then casefold, with the
characters that show nothing dropped and the common look-alikes of Latin letters and digits from Cyrillic, Greek
and a few symbol blocks mapped to the Latin letter they imitate.  It is a small table, not the whole Unicode
confusables list (UTS #39): the maintained packages for that (``confusable-homoglyphs``) are not among this
project's dependencies, and KB names are short labels typed by people, where these scripts are the practical
risk; Chinese names are left as they are.
"""

from __future__ import annotations

import re
import unicodedata

# Characters that show nothing or only steer direction (bidi controls, zero-width spaces and joiners, soft
# hyphen, BOM, variation selectors): dropped, so a name padded with them is the name without them.
_INVISIBLE_RE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f"
                           "\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f]")

# After NFKC + casefold (so only lower-case forms are needed): the letter each look-alike imitates.
_LOOK_ALIKES = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j", "к": "k",
    "ӏ": "l", "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "с": "c",
    "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "ү": "y", "з": "3", "ь": "b", "п": "n",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y", "ϲ": "c", "ϳ": "j", "ω": "w", "μ": "u",
    # Latin letters and symbols that pass for others
    "ı": "i", "ɡ": "g", "ɑ": "a", "ʟ": "l", "ꞵ": "b", "ℓ": "l",
    # digits and letters people mistake for each other
    "0": "o", "1": "l", "|": "l",
    # dashes and low lines
    "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-", "﹣": "-", "‗": "_",
})


def name_skeleton(name: str) -> str:
    """The form two look-alike names share (see the module docstring)."""
    text = unicodedata.normalize("NFKC", _INVISIBLE_RE.sub("", name.strip())).casefold()
    text = _INVISIBLE_RE.sub("", text)  # NFKC can bring some back (compatibility forms)
    return " ".join(text.translate(_LOOK_ALIKES).replace("rn", "m").replace("vv", "w").split())


_LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def storable_name(name: str) -> str:
    """A file name as sent (a browser's upload, a script's call) with each lone surrogate, which no UTF-8 text can
    hold (the database refused it with UnicodeEncodeError), as U+FFFD: the file is kept and its name still reads."""
    return _LONE_SURROGATE_RE.sub("\ufffd", name)
