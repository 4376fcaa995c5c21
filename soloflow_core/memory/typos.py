"""A word and its typos: a job's texts misspell its words now and then (``invioce``,
``pasword``), and a word every one of them holds, but for a typo, is still one they all hold.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

__all__ = ["held", "one_edit", "spelled_right"]


def held(word: str, terms: Collection[str]) -> bool:
    """Whether ``terms`` hold ``word``, or, when it has five letters or more, a typo of it:
    one letter left out, added, changed, or two swapped (``invioc`` for ``invoic``)."""
    if word in terms:
        return True
    return len(word) >= 5 and any(one_edit(word, t) for t in terms if abs(len(t) - len(word)) < 2)


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by one letter left out, added or changed, or two
    swapped."""
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
        return len(diff) == 1 or (swapped and a[diff[1]] == b[diff[0]])
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def spelled_right(words: Iterable[str], df: Mapping[str, int]) -> list[str]:
    """``words`` without the typos of one another: of ``invoic`` and ``invioc``, the one
    more texts hold (``df``: word → how many texts hold it).

    Example:
        >>> spelled_right(["invioc", "invoic"], {"invoic": 7, "invioc": 1})
        ['invoic']
    """
    kept: list[str] = []
    for w in sorted(words, key=lambda w: (-df.get(w, 0), w)):
        if not any(held(w, [k]) for k in kept):
            kept.append(w)
    return kept
