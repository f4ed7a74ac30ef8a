"""What the offline oracle agent says before each action: varied wordings that give its reason.

Every turn of a kept trace teaches the student how to reason, so the oracle never repeats
one canned line: each situation has several wordings, picked by the turn's seeded draw,
and the slots name what the decision rests on -- the clue from the question, the page it
stands on, and what the candidate page says it is.
"""

from __future__ import annotations

import random

PHRASES: dict[str, tuple[str, ...]] = {
    "start": (
        'The question opens with "{opening}". I will search for that starting point first.',
        'Everything hangs on the first entity, named in "{opening}". Let me look it up.',
        'First step: find the article the question starts from ("{opening}").',
        'I start where the question does: "{opening}". Searching for it.',
    ),
    "start_again": (
        'None of those titles appears in "{opening}". Let me try "{query}" instead.',
        'The results do not match the starting name in "{opening}"; searching "{query}".',
    ),
    "open_start": (
        'The result "{title}" is exactly the name in the question\'s first sentence ("{opening}"). Opening it.',
        '"{title}" matches the starting entity the question names, so I will read that page.',
        'Found the starting point: "{title}" appears word for word in "{opening}". Reading it now.',
    ),
    "open_direct": (
        'The question names its starting page outright: {title}. Opening it.',
        'I can open the first page by its title, {title}, as the question gives it.',
        'The trail starts at {title}; let me read that article.',
    ),
    "open_guess": (
        'Search did not return it, but the question names "{name}" outright; let me try opening that title.',
        'I will try to open "{name}" directly, the name as the question gives it.',
    ),
    "read_on": (
        '{page} goes on past this window; I will read the rest to see every page it links to.',
        'There is more of {page}. The page I need is {clue}, so let me read on and collect its links.',
        'Before choosing, I want all of the links of {page}: reading the next part.',
    ),
    "search": (
        'The next page should be {clue}, linked from {page}. Searching "{query}" to see which pages fit, then '
        'keeping those {page} links to.',
        'I am looking for {clue} among the pages {page} links to. A search for "{query}" should show candidates.',
        '{page} links to many pages; to find {clue} among them I will search "{query}".',
        'Clue: {clue}. Let me search "{query}" and compare the results with the links of {page}.',
    ),
    "find": (
        'Before opening {name}, let me see where {page} mentions it ("{anchor}").',
        'I will check the passage of {page} that links to {name} first.',
        'To be sure {name} is the link the clue means, I look up "{anchor}" in {page}.',
    ),
    "open_link": (
        '{page} links to {name}{why}. Opening it to check whether it is {clue}.',
        'Of the links on {page}, {name} looks most like {clue}{why}. Let me read it.',
        'The clue asks for {clue}. {page} links to {name}{why}; checking that page.',
        '{name} is linked from {page}{why}. If it is {clue}, it is the next stop.',
    ),
    "accept": (
        '{page} says it is {desc}: that is {clue}.',
        'This fits: {page} is {desc}, which is what the clue describes ({clue}).',
        '{page} checks out -- {desc} matches {clue}.',
        'Confirmed: {page}, {desc}, is {clue}.',
    ),
    "hasty": (
        '{page} ({desc}) looks close enough to {clue}; I will go on from it.',
        'Probably {page}: it is {desc}, near enough to {clue}.',
    ),
    "recall": (
        'I read {page} already: it is {desc}, which fits {clue}.',
        'No need to open {page} again -- it is {desc}, as the clue ({clue}) needs.',
    ),
    "reject": (
        '{page} is {desc}, not {clue}.',
        'That is not it: {page} is {desc}, and the clue asks for {clue}.',
        '{page} does not fit {clue} ({desc}). Back to the other candidates.',
        'No: {page} is {desc}. I still need {clue}.',
    ),
    "forced": (
        'Nothing fits {clue} better than {page}, so I will continue from it.',
        'Of what I found, {page} is the closest to {clue}; going on from there.',
    ),
    "failed": (
        'There is no page titled "{name}".', '"{name}" is not a page title here.', 'Opening "{name}" failed.',
    ),
    "answer": (
        'The last clue asks for {clue} linked from {prev}: that is {title}, the end of the chain.',
        'Every clue is accounted for. The final one, {clue}, led from {prev} to {title}.',
        'The chain ends at {title}: {prev} links to it, and it is {clue}.',
        'Following the clues hop by hop, the last link goes from {prev} to {title}.',
    ),
    "reopen": (
        'Back to {page}: I need its links in front of me to find {clue}.',
        'To look for {clue} I need the links of {page} again; reopening it.',
        'Let me read {page} again and pick {clue} from its links.',
    ),
    "give_up": (
        'I cannot find {clue} with any confidence, so I will not guess.',
        'The clues stop matching anything I can read; I do not know the answer.',
        'I have run out of leads for {clue}.',
    ),
}


def say(kind: str, rnd: random.Random, **slots: str) -> str:
    """One wording of ``kind`` with its slots filled, chosen by ``rnd``."""
    return rnd.choice(PHRASES[kind]).format(**slots)


__all__ = ["PHRASES", "say"]
