"""The blurry-clue rules of synth.text.clues that must not depend on the process: which phrase comes first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from synth.text.clues import phrases

ROOT = Path(__file__).resolve().parents[3]

# Two segments whose three-word phrases are equally specific and, word for word, equally rare: 0.1 + 0.2 + 0.3
# is 0.6 or 0.6000000000000001 depending on the order the floats are added in, so only an exact sum leaves the
# tie to the phrases' text.
DESCRIPTION = "red round fruit; blue square stone"
RARITY = {"red": 0.1, "round": 0.2, "fruit": 0.3, "blue": 0.1, "square": 0.2, "stone": 0.3}
SCRIPT = f"""
import json
from synth.text.clues import phrases
rarity = {RARITY!r}
print(json.dumps([p.text for p in phrases({DESCRIPTION!r}, rarity=lambda w: rarity.get(w, 0.0))]))
"""


def test_equally_rare_phrases_are_ordered_by_their_text():
    ranked = [p.text for p in phrases(DESCRIPTION, rarity=lambda w: RARITY.get(w, 0.0))]
    # Coarsest first: the two three-word phrases come last, equally specific and equally rare, by their text.
    assert ranked[-2:] == ["blue square stone", "red round fruit"]


def test_the_order_of_phrases_does_not_depend_on_the_hash_seed():
    """Words are a frozenset, iterated in an order Python's hash seed decides."""
    seen = set()
    for seed in range(8):
        out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONHASHSEED=str(seed)))
        seen.add(tuple(json.loads(out.stdout)))
    assert len(seen) == 1


def test_an_adverb_is_kept_only_with_the_word_it_modifies():
    # "Generally horse-drawn means of transport" once gave the clue "a page on generally means".
    for description, whole, broken in [
            ("Generally horse-drawn means of transport", "Generally horse-drawn means", "Generally means"),
            ("Highly venomous snake of Africa", "Highly venomous snake", "Highly snake")]:
        texts = [p.text for p in phrases(description)]
        assert whole in texts and not any(t == broken or t.startswith(broken + " ") for t in texts), texts
    # a word that is an adjective too ("early") stands alone before its noun
    assert "early settlement" in [p.text.lower() for p in phrases("Early settlement in the Andes")]
