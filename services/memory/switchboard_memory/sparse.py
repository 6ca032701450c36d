"""The keyword side of hybrid search: a BM25 sparse vector per text, with no model to load.

Qdrant applies the IDF part itself (the collection's sparse vector has ``Modifier.IDF``), so a
document's vector carries only BM25's saturated term frequency,
``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len))``, and a query's carries 1 per
distinct term. Terms are lower-cased words without stop words, stemmed (Snowball, English),
each mapped to a 31-bit index by a stable hash (the same term always lands on the same index,
in every process and across restarts)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass

import Stemmer

K1 = 1.2
B = 0.75
# Qdrant does not know the average document length; memory entries are short chat turns and
# notes, documents chunks of ~1000 characters: a fixed average in words.
AVG_LEN = 24.0

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?", re.UNICODE)
_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves s t don
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]


class Bm25Encoder:
    def __init__(self, k1: float = K1, b: float = B, avg_len: float = AVG_LEN) -> None:
        self.k1 = k1
        self.b = b
        self.avg_len = avg_len
        self._stemmer = Stemmer.Stemmer("english")
        self._index_cache: dict[str, int] = {}

    def terms(self, text: str) -> list[str]:
        words = [w.replace("\u2019", "'") for w in _WORD.findall(text.lower())]
        kept = [w.split("'", 1)[0] for w in words]
        return self._stemmer.stemWords([w for w in kept if w and w not in STOP_WORDS])

    def _index(self, term: str) -> int:
        found = self._index_cache.get(term)
        if found is None:
            digest = hashlib.blake2b(term.encode(), digest_size=4).digest()
            found = int.from_bytes(digest, "little") & 0x7FFFFFFF
            if len(self._index_cache) < 200_000:
                self._index_cache[term] = found
        return found

    def document(self, text: str) -> SparseVector:
        terms = self.terms(text)
        counts = Counter(self._index(t) for t in terms)
        norm = self.k1 * (1 - self.b + self.b * len(terms) / self.avg_len)
        indices = sorted(counts)
        values = [counts[i] * (self.k1 + 1) / (counts[i] + norm) for i in indices]
        return SparseVector(indices, values)

    def query(self, text: str) -> SparseVector:
        indices = sorted({self._index(t) for t in self.terms(text)})
        return SparseVector(indices, [1.0] * len(indices))
