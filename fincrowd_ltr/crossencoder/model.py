"""A cross-encoder: a BERT-style encoder reads question and passage together; a one-logit head on
the mean-pooled token states (or [CLS]) scores relevance. Fine-tuned with LoRA (peft) on the
attention projections, so a trained model is a small adapter plus the head over the frozen shipped
MiniLM.

Long passages: a cross-encoder reads ``max_length`` word pieces, far less than a filing page, so
each passage is cut to the window of ``focus_words`` words that shares the most terms with the
question (query-focused passage selection) before tokenisation.

Saved layout (``save``): ``adapter/`` (peft ``save_pretrained``), ``head.safetensors`` and
``cross_encoder.json`` (base model, LoRA settings, lengths, training summary).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from bm25s.stopwords import STOPWORDS_EN
from safetensors.torch import load_file, save_file
from torch import nn

from fincrowd_ltr.data.schema import DataError

CONFIG_FILE = "cross_encoder.json"
HEAD_FILE = "head.safetensors"
ADAPTER_DIR = "adapter"
FORMAT = "fincrowd-cross-encoder"
_WORD = re.compile(r"\w+")
_STOP = frozenset(STOPWORDS_EN)


@dataclass
class CrossEncoderConfig:
    """Settings of a cross-encoder (saved beside its weights)."""

    base_model: str = "all-MiniLM-L6-v2"
    max_length: int = 128
    focus_words: int = 96
    pooling: str = "mean"  # MiniLM was trained with mean pooling; "cls" reads [CLS] only
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    target_modules: list[str] = field(default_factory=lambda: ["query", "value"])
    training: dict = field(default_factory=dict)


def focus(query: str, text: str, words: int) -> str:
    """The window of ``words`` words of ``text`` that holds the most distinct question terms
    (stride half a window; first window on ties; short texts are returned whole)."""
    tokens = text.split()
    if len(tokens) <= words:
        return text
    terms = {t for t in _WORD.findall(query.lower()) if t not in _STOP}
    stride = max(1, words // 2)
    best, best_hits = 0, -1
    for start in range(0, len(tokens) - words // 2, stride):
        window = " ".join(tokens[start : start + words]).lower()
        hits = len(terms & set(_WORD.findall(window)))
        if hits > best_hits:
            best, best_hits = start, hits
    return " ".join(tokens[best : best + words])


class CrossEncoder(nn.Module):
    """Encoder (optionally wrapped by peft) plus a linear one-logit head on the pooled states.

    Args:
        encoder: A ``transformers`` encoder (``BertModel``-like), or its peft wrapper.
        tokenizer: Its tokenizer.
        config: Lengths and LoRA settings.
    """

    def __init__(self, encoder: nn.Module, tokenizer, config: CrossEncoderConfig) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.config = config
        self.head = nn.Linear(encoder.config.hidden_size, 1)

    @classmethod
    def with_lora(cls, encoder: nn.Module, tokenizer, config: CrossEncoderConfig) -> CrossEncoder:
        """A new cross-encoder whose encoder is frozen except for LoRA adapters."""
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.target_modules),
        )
        return cls(get_peft_model(encoder, lora), tokenizer, config)

    @classmethod
    def from_minilm(
        cls, config: CrossEncoderConfig | None = None, seed: int | None = None
    ) -> CrossEncoder:
        """LoRA cross-encoder over the shipped all-MiniLM-L6-v2 (offline); ``seed`` draws its
        new LoRA and head weights (the same seed, the same model; None: torch's current
        state)."""
        from transformers import AutoModel, AutoTokenizer

        from fincrowd_ltr.retrieval.dense import minilm_path

        path = str(minilm_path())
        if seed is not None:
            torch.manual_seed(seed)
        return cls.with_lora(
            AutoModel.from_pretrained(path),
            AutoTokenizer.from_pretrained(path),
            config or CrossEncoderConfig(),
        )

    def encode(self, queries: list[str], texts: list[str]) -> dict[str, torch.Tensor]:
        """Tokenised (question, focused passage) pairs, cut to ``max_length`` word pieces (the
        longer of the two is cut first: the passage, unless the question is longer)."""
        words = self.config.focus_words
        focused = [focus(q, t, words) for q, t in zip(queries, texts, strict=True)]
        return self.tokenizer(
            queries,
            focused,
            truncation="longest_first",  # the passage first; a very long question too
            max_length=self.config.max_length,
            padding=True,
            return_tensors="pt",
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """One relevance logit per pair, shape ``(batch,)``."""
        hidden = self.encoder(**batch).last_hidden_state
        if self.config.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return self.head(pooled).squeeze(-1)

    @torch.inference_mode()
    def score(self, query: str, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Relevance logits of ``texts`` for ``query``, float64."""
        was_training = self.training
        self.eval()
        out = []
        for i in range(0, len(texts), batch_size):
            chunk = texts[i : i + batch_size]
            out.append(self(self.encode([query] * len(chunk), chunk)).double().numpy())
        self.train(was_training)
        return np.concatenate(out) if out else np.zeros(0)

    def save(self, folder: Path) -> None:
        """Write the adapter, the head and the config (see the module docstring)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if not hasattr(self.encoder, "save_pretrained") or not hasattr(self.encoder, "peft_config"):
            raise DataError("only LoRA (peft) cross-encoders can be saved as adapters")
        self.encoder.save_pretrained(str(folder / ADAPTER_DIR))
        save_file(
            {k: v.contiguous() for k, v in self.head.state_dict().items()}, str(folder / HEAD_FILE)
        )
        (folder / CONFIG_FILE).write_text(
            json.dumps({"format": FORMAT, **asdict(self.config)}, indent=1)
        )

    @classmethod
    def load(cls, folder: Path, encoder: nn.Module | None = None, tokenizer=None) -> CrossEncoder:
        """Load a saved cross-encoder over its base encoder (default: the shipped MiniLM)."""
        from peft import PeftModel

        folder = Path(folder)
        path = folder / CONFIG_FILE
        if not path.exists():
            raise DataError(f"{folder}: not a cross-encoder folder (no {CONFIG_FILE})")
        from fincrowd_ltr.data.jsonl import read_json

        raw = read_json(path)  # a malformed file is named with its line
        if not isinstance(raw, dict) or raw.pop("format", None) != FORMAT:
            raise DataError(f"{path}: not a {FORMAT} config")
        try:
            config = CrossEncoderConfig(**raw)
        except TypeError as err:
            raise DataError(f"{path}: not a {FORMAT} config ({err})") from None
        if encoder is None:
            from transformers import AutoModel, AutoTokenizer

            from fincrowd_ltr.retrieval.dense import minilm_path

            base = str(minilm_path())
            encoder = AutoModel.from_pretrained(base)
            tokenizer = AutoTokenizer.from_pretrained(base)
        adapted = PeftModel.from_pretrained(encoder, str(folder / ADAPTER_DIR))
        model = cls(adapted, tokenizer, config)
        model.head.load_state_dict(load_file(str(folder / HEAD_FILE)))
        return model.eval()
