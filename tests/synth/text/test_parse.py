"""What the parser says of clue text: whole noun phrases, the relation a sentence states, entity types."""

import pytest

from synth.text.parse import CONCEPT, cut_short, entity_type, is_named, is_noun_phrase, named_in, named_title, relation


@pytest.mark.parametrize("phrase", ["a river in Asia", "circular machine", "an Italian painter", "part of speech",
                                    "one of the organic compounds", "a 1990s film"])
def test_whole_noun_phrases_pass(phrase):
    assert is_noun_phrase(phrase)


@pytest.mark.parametrize("fragment", ["to a small", "a small", "of the", "located in", "runs quickly", ""])
def test_fragments_are_not_noun_phrases(fragment):
    assert not is_noun_phrase(fragment)


@pytest.mark.parametrize("sentence, anchor, words, word", [
    ("The Rhine flows through Germany and the Netherlands.", "Netherlands", "flows through", "flows"),
    ("Leonardo was born in Vinci.", "Vinci", "was born in", "born"),
    ("Ford manufactures the Model T.", "Ford", "is manufactured by", "manufactures"),
    ("Paris is the capital of France.", "France", "is the capital of", "capital"),
    ("Larvae are produced from eggs.", "eggs", "is produced from", "produced"),
])
def test_the_relation_a_sentence_states_is_read_finite_and_singular(sentence, anchor, words, word):
    rel = relation(sentence, anchor)
    assert rel is not None and (rel.words, rel.word) == (words, word)


@pytest.mark.parametrize("sentence, anchor", [
    ("Polo is a stick and ball game.", "Ball"),  # a modifier inside a compound: no relation
    ("Polo is a game.", "Cricket"),  # the anchor is not in the sentence
])
def test_no_relation_where_the_sentence_states_none(sentence, anchor):
    assert relation(sentence, anchor) is None


def test_named_entities_are_told_from_concepts():
    assert is_named(entity_type("Paris", "Paris is the capital and most populous city of France."))
    assert is_named(entity_type("1755 Lisbon earthquake", "The 1755 Lisbon earthquake struck Portugal."))
    assert entity_type("Weight", "In science, the weight of an object is a force.") == CONCEPT
    assert named_title("ABBA") and named_title("A Christmas Carol") and not named_title("Climate change")
    assert named_in("The Rhine flows through Germany.", "Germany")
    assert not named_in("Gas is a state of matter. Gas expands.", "Gas")


@pytest.mark.parametrize("phrase, source, short", [
    ("a multicellular", "Animals are multicellular eukaryotic organisms of the kingdom Animalia.", True),
    ("a small", "Small roll of tobacco made to be smoked", True),
    ("an inorganic", "Inorganic compound of hydrogen and oxygen", True),
    ("a small roll", "Small roll of tobacco made to be smoked", False),
    ("a compound", "Chemical compound of hydrogen and oxygen", False),
    ("a star", "Star at the center of the Solar System", False),
])
def test_a_phrase_cut_before_its_noun_is_told_by_its_source(phrase, source, short):
    # Alone, spaCy's small model tags "an inorganic" a noun phrase; in its source the word modifies a noun.
    assert cut_short(phrase, source) is short
