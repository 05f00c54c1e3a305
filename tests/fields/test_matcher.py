"""The trigger-word matcher finds exactly what a plain alternation scan finds."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fincrowd_ltr.fields import vocabulary as V
from fincrowd_ltr.fields.matcher import (
    BOUNDARY_AFTER,
    BOUNDARY_BEFORE,
    WORD,
    TextIndex,
    TriggerMatcher,
    first_words,
)


def naive(vocab, text):
    found = set()
    for canonical, forms in vocab.items():
        pattern = re.compile(f"{BOUNDARY_BEFORE}(?:{'|'.join(forms)}){BOUNDARY_AFTER}")
        if pattern.search(text):
            found.add(canonical)
    return found


def test_first_words_of_common_forms():
    assert first_words(r"revenues?") == {"revenue", "revenues"}
    assert first_words(r"(?:stock|share) repurchases?") == {"stock", "share"}
    assert first_words(r"(?:total |long[- ]term )?debt") == {"total", "long", "debt"}
    assert first_words(r"(?<!fixed )asset turnover") == {"asset"}
    assert first_words(r"cash (?:flows? )?from operat\w*") == {"cash"}
    assert first_words(r"\(loan\)") is None  # starts with a non-word character
    assert first_words(r"\w+ segment") is None


FRAGMENTS = [
    "revenue",
    "revenues",
    "net sales",
    "deferred revenue",
    "capex",
    "purchases of",
    "property, plant and equipment",
    "in millions",
    "(in millions",
    "(loan)",
    "stock",
    "repurchases",
    "asset turnover",
    "fixed asset turnover",
    "total debt",
    "r&d",
    "operating income % margin",
    "balance sheet",
    "off-balance sheet",
    "x",
    "2019",
    ",",
    "emea",
    "apac",
    "domestic segment",
    "usd",
    "eur",
    "cash and cash equivalents",
]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12), st.sampled_from([" ", "\n", "-", ""]))
def test_matcher_equals_plain_scan(parts, sep):
    text = sep.join(parts)
    for vocab in (V.METRICS, V.UNITS, V.STATEMENTS, V.SEGMENTS, V.CURRENCIES):
        assert TriggerMatcher(vocab).find(text) == naive(vocab, text), text


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(codec=None) | st.sampled_from("az09 _&-\n"), max_size=40))
def test_text_index_reads_the_words_and_offsets_the_regex_reads(text):
    text = text.lower()  # the index's contract: lower-cased text
    index = TextIndex(text)
    assert index.words == set(WORD.findall(text))
    for word in index.words:
        starts = [m.start() for m in WORD.finditer(text) if m.group() == word]
        assert index.positions(word) == starts


def test_text_index_treats_every_character_as_the_regex_does():
    """Each code point below U+0300 (and a lone surrogate) between two words: a word character of
    ``[a-z0-9]`` joins them, anything else separates them; the offsets' left-neighbour test
    agrees with ``isascii() and isalnum()``."""
    for code in [*range(0x300), 0xD800]:
        char = chr(code)
        text = f"ab{char}cd"
        assert TextIndex(text).words == set(WORD.findall(text)), repr(char)
        left = TextIndex(f"{char}x9")
        assert left.positions("x9") == ([] if char.isascii() and char.isalnum() else [1]), repr(
            char
        )
