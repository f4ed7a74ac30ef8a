"""What the offline oracle agent says before each action: varied wordings that give its reason.

Every turn of a kept trace teaches the student how to reason, so the oracle never
repeats one canned line: each situation has several wordings, picked by the turn's
seeded draw, and the slots quote what the decision rests on -- the clue from the
question and the passage of the observation that matches it.
"""

from __future__ import annotations

import random

PHRASES: dict[str, tuple[str, ...]] = {
    "start": (
        'The question opens with "{opening}". I will search for that starting point first.',
        'Everything hangs on the first entity, named in "{opening}". Let me look it up.',
        'First step: find the article the question starts from ("{opening}").',
        'The chain begins with the entity in "{opening}"; a search should surface its page.',
        'I start where the question does: "{opening}". Searching for it.',
    ),
    "start_again": (
        'None of those titles appears in "{opening}". Let me try a shorter search: "{query}".',
        'The results do not match the starting name in "{opening}"; searching "{query}" instead.',
        'No result is the entity named in "{opening}". I will narrow the search to "{query}".',
    ),
    "open_start": (
        'The result "{title}" is exactly the name in the question\'s first sentence ("{opening}"). Opening it.',
        '"{title}" matches the starting entity the question names, so I will read that page.',
        'The first sentence names {title}, and the search returned a page with that title. Let me open it.',
        'Found the starting point: "{title}" appears word for word in "{opening}". Reading it now.',
    ),
    "open_guess": (
        'Search did not return it, but the question names "{name}" outright; let me try opening that title.',
        'I will try to open "{name}" directly, the name as the question gives it.',
    ),
    "read_on": (
        'Nothing in what I have read of {page} matches the clue "{clue}" yet. Let me read the next part.',
        'The clue "{clue}" is not in the first part of {page}; reading further.',
        '{page} is longer than one window and the part I saw has nothing like "{clue}". Continuing.',
    ),
    "read_candidate": (
        '{page} is long; the passage the next clue quotes ("{clue}") may come further down. Reading on.',
        'I have not yet seen anything like "{clue}" in {page}, but there is more of it. Let me read the rest.',
    ),
    "find": (
        'The clue "{clue}" seems to fit the passage in {page}: "{passage}". Let me locate every mention of '
        '"{text}" there.',
        'To be sure which entity the clue means, I will find "{text}" in {page}. The passage so far: "{passage}".',
        'Before moving on, let me check where {page} talks about "{text}"; the clue was "{clue}".',
    ),
    "open_hop": (
        'The next clue says "{clue}". In {page} the matching passage reads "{passage}", which mentions {name}. '
        'Opening it.',
        'Clue: "{clue}". {page} has "{passage}" -- that fits, and the entity it points to is {name}. '
        'Let me read that page.',
        '"{passage}" in {page} lines up with the clue "{clue}". The linked entity looks like {name}; opening it.',
        'The words of the clue ("{clue}") match this passage of {page}: "{passage}". So the next hop is probably '
        '{name}.',
        'Matching the clue "{clue}" against {page}: the best passage is "{passage}". {name} is named there; '
        'I will open it.',
        'I read the clue as "{clue}". {page} says "{passage}", so {name} should be the next link.',
        'The passage "{passage}" of {page} echoes the clue "{clue}". Next I open {name}, which it mentions.',
    ),
    "open_result": (
        'The clue is "{clue}". The result {name} has "{passage}", which fits it. Opening {name}.',
        'Among the results, {name} fits the clue "{clue}" best ("{passage}"). Let me read it.',
        'For the clue "{clue}", the search shows {name}: "{passage}". That looks right; opening it.',
        '{name} matches the clue "{clue}" -- its snippet says "{passage}". Reading its page.',
    ),
    "search_hop": (
        'The next clue is "{clue}". I will search for "{query}" to see which pages it could mean.',
        'To follow the clue "{clue}", let me search "{query}".',
        'I need the entity behind "{clue}". Searching for "{query}".',
        'No name in {page} clearly answers "{clue}" yet, so I search for "{query}".',
        'Let me search "{query}": the clue "{clue}" should point to one of the results.',
    ),
    "search_name": (
        'The blank in "{clue}" is filled by "{name}", but no page has exactly that title. Let me search for it.',
        'There should be a page for "{name}", the words in the blank of "{clue}"; searching for it.',
        'I will search "{name}": the page it names may have a longer title.',
    ),
    "search_reading": (
        'In {page}, the words after the clue "{clue}" are "{name}", but where the linked name ends is unclear. '
        'Let me search for it and see which titles exist.',
        'The blank in "{clue}" could be "{name}" or only part of it; a search will show which is a page.',
        '{page} continues "{name}" where the clue "{clue}" has its blank. Searching to see which words form a title.',
    ),
    "accept": (
        'This fits: {page} says "{passage}", which matches the next clue "{clue}".',
        'Good, {page} is on the path: "{passage}" lines up with the following clue ("{clue}").',
        '{page} checks out -- its text "{passage}" matches the next clue, "{clue}".',
        'Confirmed: {page} contains "{passage}", the passage the clue "{clue}" describes.',
        '{page} is right: "{passage}" is what the clue "{clue}" talks about.',
    ),
    "recall": (
        'I read {page} already, and it fits here: "{passage}" matches the next clue "{clue}".',
        '{page}, which I opened before, is the one: it holds "{passage}", as the next clue ("{clue}") needs.',
        'No need to open {page} again -- I have read it, and "{passage}" is the passage the clue "{clue}" quotes.',
    ),
    "accept_weak": (
        '{page} is the best fit I have found for "{clue}", so I will continue from it.',
        'Nothing fits "{clue}" better than {page}; I will go on from there.',
    ),
    "reject": (
        '{page} does not fit: nothing in it matches the next clue "{clue}".',
        'That was the wrong page -- {page} has nothing like "{clue}".',
        '{page} is a dead end; the clue "{clue}" does not match its text.',
        'No, {page} does not continue the chain: I cannot find "{clue}" in it.',
    ),
    "answer": (
        'The last clue, "{clue}", matches {prev}: "{passage}". That passage leads to {title}, the end of the chain.',
        'Every clue is accounted for. The final one ("{clue}") pointed from {prev} to {title}.',
        'The chain ends at {title}: {prev} says "{passage}", which is what the last clue ("{clue}") describes.',
        'Following the clues hop by hop, the last link goes from {prev} to {title}.',
        '{title} is the final entity: the last clue ("{clue}") fits the passage of {prev} that names it.',
    ),
    "lost": (
        'What I read earlier is no longer in my context, and I will not answer from memory.',
        'The earlier pages have been dropped from my context; I cannot check the chain, so I will not guess.',
    ),
    "give_up": (
        'I cannot find the next link with any confidence, so I will not guess.',
        'The clues stop matching anything I can read; I do not know the answer.',
        'I have run out of leads for "{clue}".',
    ),
}


def say(kind: str, rnd: random.Random, **slots: str) -> str:
    """One wording of ``kind`` with its slots filled, chosen by ``rnd``."""
    return rnd.choice(PHRASES[kind]).format(**slots)


__all__ = ["PHRASES", "say"]
