"""Approximate GPT-2 byte-level BPE encoder, for sanity checks only.

Used by `reference_forward.py --text` to turn a short ASCII prompt into ids
without any HF dependency.  The pre-tokenizer is a plain-`re` approximation of
the GPT-2 split pattern (letters / single digits / punctuation runs / spaces),
and special tokens of the form <|...|> or <...> that exist in the vocabulary
are matched literally.  This is NOT the engine's tokenizer and the test suite
never relies on it; it is good enough for English ChatML prompts.
"""
from __future__ import annotations

import re

_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def _byte_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _bpe(word: str, ranks: dict[tuple[str, str], int]) -> list[str]:
    parts = list(word)
    while len(parts) > 1:
        best = None
        best_rank = None
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            break
        parts = parts[:best] + [parts[best] + parts[best + 1]] + parts[best + 2:]
    return parts


def encode_text(tokens: list[str], merges: list[str] | None, text: str) -> list[int]:
    vocab = {t: i for i, t in enumerate(tokens)}
    ranks: dict[tuple[str, str], int] = {}
    for r, mline in enumerate(merges or []):
        a, _, b = mline.partition(" ")
        ranks[(a, b)] = r
    specials = sorted((t for t in tokens if re.fullmatch(r"<\|[^|]+\|>|<[a-z_]+>", t)), key=len, reverse=True)
    b2u = _byte_to_unicode()
    ids: list[int] = []
    if specials:
        pat = re.compile("(" + "|".join(re.escape(s) for s in specials) + ")")
        chunks = pat.split(text)
    else:
        chunks = [text]
    for chunk in chunks:
        if not chunk:
            continue
        if chunk in specials:
            ids.append(vocab[chunk])
            continue
        for piece in _SPLIT.findall(chunk):
            mapped = "".join(b2u[b] for b in piece.encode("utf-8"))
            for sym in _bpe(mapped, ranks):
                if sym in vocab:
                    ids.append(vocab[sym])
                else:  # fall back to single byte symbols
                    ids.extend(vocab[ch] for ch in sym)
    return ids
