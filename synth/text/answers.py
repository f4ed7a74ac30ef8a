"""Answer matching with the SQuAD / HotpotQA normalisation.

``normalize_answer`` lower-cases, drops punctuation and the articles a/an/the, and
folds whitespace, exactly as the official SQuAD v1.1 and HotpotQA evaluation
scripts do.  Scores are taken against the best of the gold answer and its aliases.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower case, remove punctuation, articles and extra whitespace (SQuAD/HotpotQA).

    The steps are the official scripts', in their order; the punctuation goes in one
    ``str.translate`` (the question validators and the oracle's writer normalise every
    question and clue, so this runs often)."""
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_PUNCT)).split())


def exact_match(prediction: str, gold: str) -> bool:
    """Normalised exact match."""
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> float:
    """Token-level F1 between normalised strings (HotpotQA: yes/no/noanswer must match exactly)."""
    p, g = normalize_answer(prediction), normalize_answer(gold)
    special = {"yes", "no", "noanswer"}
    if (p in special or g in special) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    common = Counter(pt) & Counter(gt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(gt)
    return 2 * precision * recall / (precision + recall)


def best_match(prediction: str | None, golds: Iterable[str]) -> tuple[bool, float]:
    """(exact match against any gold, best F1 over golds); (False, 0.0) for no prediction."""
    if prediction is None:
        return False, 0.0
    golds = [g for g in golds if g]
    if not golds:
        return False, 0.0
    em = any(exact_match(prediction, g) for g in golds)
    f1 = max(f1_score(prediction, g) for g in golds)
    return em, f1


def is_correct(prediction: str | None, golds: Iterable[str], min_f1: float = 1.0) -> bool:
    """Correct when the normalised answer matches exactly or its token F1 reaches ``min_f1``."""
    em, f1 = best_match(prediction, golds)
    return em or f1 >= min_f1


def mentions(text: str, name: str) -> bool:
    """Whether ``name`` occurs in ``text`` as a whole phrase, after normalisation."""
    n = normalize_answer(name)
    if not n:
        return False
    return f" {n} " in f" {normalize_answer(text)} "


_QUALIFIER = re.compile(r"\s*\([^)]*\)$")


def names_of(entity: dict) -> list[str]:
    """An entity's title, its title without a '(qualifier)', and its aliases."""
    names = [entity["title"]]
    bare = _QUALIFIER.sub("", entity["title"]).strip()
    if bare and bare != entity["title"]:
        names.append(bare)
    names += [a for a in entity.get("aliases") or [] if a]
    return names
