"""One served model's tokenizer: text <-> ids in batches and chat templates (DESIGN.md "tokenizer" service)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ChatMessage = Mapping[str, str]


@dataclass(frozen=True)
class ChatPrompt:
    """A chat rendered by the model's template: the prompt text and its token ids."""

    text: str
    token_ids: list[int]


class ModelTokenizer:
    """Wraps a Hugging Face fast tokenizer with the batch calls the tokenizer service needs."""

    def __init__(self, name: str, hf_tokenizer: Any) -> None:
        self.name = name
        self._tokenizer = hf_tokenizer

    @property
    def vocab_size(self) -> int:
        """Number of ids, added special tokens included."""
        return len(self._tokenizer)

    @property
    def eos_token_id(self) -> int | None:
        return self._tokenizer.eos_token_id

    @property
    def has_chat_template(self) -> bool:
        return bool(self._tokenizer.chat_template)

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
        if not texts:
            return []
        encoded = self._tokenizer(list(texts), add_special_tokens=add_special_tokens)
        return [list(ids) for ids in encoded["input_ids"]]

    def decode_batch(self, ids_lists: Sequence[Sequence[int]], skip_special_tokens: bool = False) -> list[str]:
        # clean-up of spaces would break the exact round trip encode -> decode
        return self._tokenizer.batch_decode(
            [list(ids) for ids in ids_lists],
            skip_special_tokens=skip_special_tokens,
            clean_up_tokenization_spaces=False,
        )

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self.decode_batch([ids], skip_special_tokens)[0]

    def apply_chat_template(
        self, messages: Sequence[ChatMessage], add_generation_prompt: bool = True
    ) -> ChatPrompt:
        """Render ``messages`` (each with ``role`` and ``content``) with the model's chat template.

        Raises:
            ValueError: the model has no chat template, or a message lacks ``role``/``content``.
        """
        if not self.has_chat_template:
            raise ValueError(f"model {self.name!r} has no chat template")
        for index, message in enumerate(messages):
            if not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
                raise ValueError(f"messages[{index}] needs string 'role' and 'content'")
        text = self._tokenizer.apply_chat_template(
            [dict(message) for message in messages], tokenize=False, add_generation_prompt=add_generation_prompt
        )
        # the template already contains the special tokens, so none are added again
        return ChatPrompt(text=text, token_ids=self.encode_batch([text], add_special_tokens=False)[0])
