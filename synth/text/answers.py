"""Answer matching: the SQuAD / HotpotQA normalisation, Unicode folding, and the page-identity judge.

``normalize_answer`` lower-cases, drops punctuation and the articles a/an/the, and
folds whitespace, exactly as the official SQuAD v1.1 and HotpotQA evaluation
scripts do.  Answers are compared after :func:`fold` too (NFKD with the combining
marks stripped, dashes as spaces, other Unicode punctuation dropped, case folded), so
"Zurich" is Zürich and "Acid-base reaction" is "Acid–base reaction": :func:`answer_text`.
Scores are taken against the best of the gold answer and its aliases.

A teacher answers with a page, so :func:`judge` decides by page identity first
(:class:`AnswerKey`: the gold page's names, and the titles of *other* pages of the
corpus that token F1 would mistake for it); token F1 is the fallback for free text only.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower case, remove punctuation, articles and extra whitespace (SQuAD/HotpotQA).

    The steps are the official scripts', in their order; the punctuation goes in one
    ``str.translate`` (the question validators and the oracle's writer normalise every
    question and clue, so this runs often)."""
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_PUNCT)).split())


def fold(s: str) -> str:
    """``s`` with its Unicode folded the way titles are written in ASCII: compatibility-decomposed (NFKD)
    with the combining marks stripped ("Zürich" -> "Zurich", "ﬁ" -> "fi"), every dash (Unicode category Pd,
    and the minus sign) a space, other non-ASCII punctuation (curly quotes, guillemets) dropped, and case
    folded ("Straße" -> "strasse").  ASCII punctuation is left to :func:`normalize_answer`, except the
    hyphen, which is a dash like the others: "Acid-base", "Acid–base" and "Acid base" read the same."""
    out = []
    for c in unicodedata.normalize("NFKD", s):
        if c.isascii():
            out.append(" " if c == "-" else c)
            continue
        cat = unicodedata.category(c)
        if cat == "Mn":
            continue
        if cat == "Pd" or c == "\u2212":
            out.append(" ")
        elif cat[0] != "P":
            out.append(c)
    return "".join(out).casefold()


def answer_text(s: str) -> str:
    """The form two answers are compared in: :func:`fold`, then :func:`normalize_answer`."""
    return normalize_answer(fold(s))


def exact_match(prediction: str, gold: str) -> bool:
    """Exact match after folding and normalisation (:func:`answer_text`)."""
    return answer_text(prediction) == answer_text(gold)


def _f1(p: str, g: str) -> float:
    """Token F1 between two :func:`answer_text` forms (HotpotQA: yes/no/noanswer must match exactly)."""
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


def f1_score(prediction: str, gold: str) -> float:
    """Token-level F1 between folded, normalised strings (HotpotQA: yes/no/noanswer must match exactly)."""
    return _f1(answer_text(prediction), answer_text(gold))


def best_match(prediction: str | None, golds: Iterable[str]) -> tuple[bool, float]:
    """(exact match against any gold, best F1 over golds), after folding; (False, 0.0) for no prediction."""
    if prediction is None:
        return False, 0.0
    gold_forms = [answer_text(g) for g in golds if g]
    if not gold_forms:
        return False, 0.0
    p = answer_text(prediction)
    return p in gold_forms, max(_f1(p, g) for g in gold_forms)


def is_correct(prediction: str | None, golds: Iterable[str] | "AnswerKey", min_f1: float = 1.0) -> bool:
    """Correct by :func:`judge`: ``golds`` is an :class:`AnswerKey`, or the gold answer and its aliases (a key
    without other titles: exact match after folding, else token F1 ``>= min_f1``)."""
    key = golds if isinstance(golds, AnswerKey) else AnswerKey.of(golds)
    return judge(prediction, key, min_f1).correct


# ---- page identity ---------------------------------------------------------------------------------------

# How a verdict was reached (``Judgement.basis``, the ``match`` column of ``filter/verdicts``).
PAGE = "page"  # the answer is a name of the gold page (its title, a corpus alias, a redirect-like form)
F1 = "f1"  # free text whose token F1 against a name reaches min_f1
OTHER_PAGE = "other_page"  # the title of another page of the corpus
QUALIFIED = "qualified"  # a gold name with a "(qualifier)" the gold page does not carry: a sibling page
NO_MATCH = "none"  # nothing above (also an empty answer)
BASES = (PAGE, F1, OTHER_PAGE, QUALIFIED, NO_MATCH)


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """What an answer is judged against: the gold page's ``names`` (its title first, then the forms the corpus
    supports: the title without its qualifier, its aliases, the teacher's aliases the corpus backs) and the
    titles of ``other_titles``: other pages of the corpus whose token F1 against a name reaches ``min_f1``, so
    the F1 fallback would mistake them for the gold page ("New York City" for New York).  ``min_f1`` is the
    threshold ``other_titles`` was gathered at (None: no corpus was consulted, as for a bare list of golds);
    judging at a lower threshold could accept a title the key does not list, so :func:`judge` refuses it.

    Built from the corpus by :func:`synth.corpus.answerkeys.answer_keys`; it travels to verl's reward inside
    ``rl_pool``'s ``reward_model.ground_truth`` (:meth:`ground_truth`, :meth:`from_ground_truth`)."""

    names: tuple[str, ...]
    other_titles: tuple[str, ...] = ()
    min_f1: float | None = None

    @classmethod
    def of(cls, golds: Iterable[str]) -> "AnswerKey":
        """A key from the gold answer and its aliases alone (no corpus: no other titles)."""
        return cls(tuple(g for g in golds if isinstance(g, str) and g))

    def ground_truth(self) -> dict[str, Any]:
        """``reward_model.ground_truth`` of an ``rl_pool`` row: ``target`` (the names), ``other_titles`` and the
        ``min_f1`` they were gathered at."""
        return {"target": list(self.names), "other_titles": list(self.other_titles), "min_f1": self.min_f1}

    @classmethod
    def from_ground_truth(cls, ground_truth: Any) -> "AnswerKey":
        """The key of ``reward_model.ground_truth``: ``{"target", "other_titles", "min_f1"}`` as
        :meth:`ground_truth` writes it; a bare ``{"target": [...]}``, list or string (rows written before
        other titles travelled) is a key of names alone."""
        if isinstance(ground_truth, dict):
            names = _strings(ground_truth.get("target"))
            others = _strings(ground_truth.get("other_titles"))
            floor = ground_truth.get("min_f1")
            return cls(tuple(names), tuple(others), float(floor) if isinstance(floor, (int, float)) else None)
        return cls(tuple(_strings(ground_truth)))


def _strings(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v] if v else []
    if hasattr(v, "tolist"):  # numpy arrays, as verl hands over Parquet lists
        v = v.tolist()
    return [x for x in v if isinstance(x, str) and x] if isinstance(v, (list, tuple)) else []


@dataclass(frozen=True, slots=True)
class Judgement:
    """One answer judged: ``correct``, whether it equals a name (``em``), its best token F1 against the names,
    and how the verdict was reached (``basis``, one of :data:`BASES`)."""

    correct: bool
    em: bool
    f1: float
    basis: str


@lru_cache(maxsize=8192)
def _forms(texts: tuple[str, ...]) -> tuple[str, ...]:
    """The non-empty :func:`answer_text` forms of ``texts``, in order (a key is judged many times: cached)."""
    return tuple(f for f in (answer_text(t) for t in texts if t) if f)


@lru_cache(maxsize=8192)
def _form_set(texts: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_forms(texts))


_QUALIFIED = re.compile(r"^(.*\S)\s*\(([^()]*)\)\s*$")


def judge(prediction: str | None, key: AnswerKey, min_f1: float) -> Judgement:
    """Whether ``prediction`` names the gold page of ``key``, page identity first:

    1. it equals a name of the gold page after folding and normalisation (:func:`answer_text`): correct
       (``page``);
    2. it equals the title of another page of the corpus (``key.other_titles``): wrong (``other_page``),
       however many words it shares with a name;
    3. it is a name with a parenthesised qualifier that no name carries ("Milky Way (disambiguation)",
       "Arctic Ocean (1757)"): by the encyclopedia's own convention that is another page, wrong
       (``qualified``), whether or not the corpus holds it;
    4. otherwise free text: correct when its token F1 against the best name reaches ``min_f1`` (``f1``).

    The filter (:mod:`filters.correctness`) and the RL reward (:mod:`filters.reward`) both judge with it.
    ``min_f1`` below ``key.min_f1`` raises ValueError: the key lists the other titles from its own
    threshold up, so a lower one could accept an unlisted title."""
    if key.min_f1 is not None and min_f1 < key.min_f1 - 1e-9:
        raise ValueError(f"min_f1 {min_f1:g} is below {key.min_f1:g}, the threshold the answer key's other titles "
                         "were gathered at (filters.min_f1 of the run that wrote it): titles between the two would "
                         "be accepted unchecked; judge at >= that threshold")
    if prediction is None or not prediction.strip():
        return Judgement(False, False, 0.0, NO_MATCH)
    names = _forms(key.names)
    p = answer_text(prediction)
    if not names or not p:
        return Judgement(False, False, 0.0, NO_MATCH)
    f1 = max(_f1(p, n) for n in names)
    if p in names:
        return Judgement(True, True, f1, PAGE)
    if key.other_titles and p in _form_set(key.other_titles):
        return Judgement(False, False, f1, OTHER_PAGE)
    m = _QUALIFIED.match(prediction.strip())
    if m and answer_text(m.group(1)) in names:
        return Judgement(False, False, f1, QUALIFIED)
    if f1 >= min_f1:
        return Judgement(True, False, f1, F1)
    return Judgement(False, False, f1, NO_MATCH)


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
