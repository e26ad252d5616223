"""A free-text topic ("churn", "late deliveries", "fraud in card payments") → the world to build and the variables
its tasks should target.

Matching is lexical and deterministic on purpose: the router already reduced the request to a topic phrase, and the
templates carry their own vocabulary (title, description, entity and variable names and descriptions). Words match
after a light suffix stemming, or when one stem extends the other by at most two letters, which covers inflections
("cancellations" ~ "cancelled", "churn" ~ "churned", "price" ~ "pricing") without "read" ~ "readmission".
A variable hit weighs more than a hit on the template's title or description, because tasks target variables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel

from worldsmith.core.world_contract import Domain, WorldContract

STOPWORDS = frozenset(
    "a an and about are as at be by data dataset do does for from how in into is it its of on or over per set "
    "tasks task the their this to what which who why with world".split()
)
MIN_STEM = 4
SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ions", "ion", "ers", "er", "ed", "es", "ly", "s")


class TopicMatch(BaseModel):
    domain: str
    template_id: str
    score: int
    variables: list[str]
    terms: list[str]


def words(text: str) -> list[str]:
    """Lowercase alphabetic words of a name or sentence (``usage_hours`` → usage, hours)."""
    return [w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS and len(w) > 1]


def topic_terms(topic: str) -> list[str]:
    return list(dict.fromkeys(words(topic)))


def stem(word: str) -> str:
    if word.endswith("ies") and len(word) - 3 >= MIN_STEM - 1:
        return word[:-3] + "y"
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM:
            return word[: -len(suffix)]
    return word


def _close(a: str, b: str) -> bool:
    a, b = sorted((stem(a), stem(b)), key=len)
    return a == b or (len(a) >= MIN_STEM and b.startswith(a) and len(b) - len(a) <= 2)


def _hits(terms: Iterable[str], vocab: Iterable[str]) -> list[str]:
    vocab = list(vocab)
    return [t for t in terms if any(_close(t, v) for v in vocab)]


def _variable_hits(contract: WorldContract, terms: list[str]) -> dict[str, list[str]]:
    """Topic words each variable's name or description matches (variables with none left out)."""
    hits = {v.name: _hits(terms, words(v.name) + words(v.description)) for v in contract.variables}
    return {name: h for name, h in hits.items() if h}


def _ranked(hits: dict[str, list[str]]) -> list[str]:
    return sorted(hits, key=lambda name: (-len(hits[name]), name))


def topic_variables(contract: WorldContract, topic: str) -> list[str]:
    """Variables whose name or description mentions the topic, best first (most topic words matched)."""
    return _ranked(_variable_hits(contract, topic_terms(topic)))


def score_contract(contract: WorldContract, topic: str) -> TopicMatch:
    terms = topic_terms(topic)
    hits = _variable_hits(contract, terms)
    variables = _ranked(hits)
    var_terms = [t for t in terms if any(t in h for h in hits.values())]
    general = words(" ".join([contract.domain.value, contract.title, contract.description,
                              *(e.name + " " + e.description for e in contract.entities)]))
    general_terms = _hits(terms, general)
    return TopicMatch(domain=contract.domain.value, template_id=contract.id,
                      score=2 * len(var_terms) + len(general_terms), variables=variables,
                      terms=list(dict.fromkeys(var_terms + general_terms)))


def match_topic(topic: str) -> list[TopicMatch]:
    """Templates that match the topic at all, best first (ties broken by domain name, so the choice is stable)."""
    from .templates import load_template

    matches = [score_contract(load_template(d.value), topic) for d in Domain]
    return sorted((m for m in matches if m.score > 0), key=lambda m: (-m.score, m.domain))
