"""English sentences for bench.checks: varied in length, with numbers, names, times, money and
abbreviations, all from a seed."""

from __future__ import annotations

import random

_NAMES = ("Alice", "Robert", "Maria", "Johnson", "Priya", "Oliver", "Chen", "Fatima", "Lucas",
          "Smith", "Hannah", "Diego", "Yusuf", "Emma", "Williams", "Sofia")  # fmt: skip
_TITLES = ("Dr.", "Mr.", "Mrs.", "Ms.", "Prof.")
_PLACES = ("Boston", "the harbour", "Main Street", "the city library", "London", "the airport",
           "the train station", "Oak Avenue", "the museum", "Chicago", "the old market",
           "the hospital", "Paris", "the school gym")  # fmt: skip
_THINGS = ("books", "apples", "tickets", "chairs", "letters", "bottles of water", "boxes",
           "new laptops", "bicycles", "umbrellas", "sandwiches", "paintings")  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "March", "May", "July", "September", "November")
_CLAUSES = ("because the weather was lovely", "although nobody expected it",
            "while the children played outside", "so we decided to wait a little longer",
            "and everyone seemed very pleased", "but the line was far too long",
            "after the meeting ended early", "before the shops closed for the night",
            "which surprised the whole team", "even though it started to rain")  # fmt: skip
_SHORT = ("Yes, of course.", "Thank you very much.", "Hello there.", "Good morning.",
          "Not today.", "Please wait here.", "That sounds great.", "See you soon.",
          "I agree.", "Well done.")  # fmt: skip


def _sentence(rng: random.Random) -> str:
    name, place, thing = rng.choice(_NAMES), rng.choice(_PLACES), rng.choice(_THINGS)
    n, day, clause = rng.randint(2, 999), rng.choice(_DAYS), rng.choice(_CLAUSES)
    hour, minutes = rng.randint(1, 12), rng.choice(("00", "15", "30", "45"))
    month, year, share = rng.choice(_MONTHS), rng.randint(1990, 2030), rng.randint(2, 60)
    cents, few, old = rng.randint(10, 99), rng.randint(2, 9), rng.randint(1800, 2024)
    shapes = (
        f"{rng.choice(_TITLES)} {name} bought {n} {thing} in {place} on {day}.",
        f"The meeting with {name} starts at {hour}:{minutes} in {place}.",
        f"Our sales grew by {share} percent in {month} {year}, {clause}.",
        f"{name} paid ${n}.{cents} for {few} {thing} at {place}.",
        f"Please call {name} back before {day}.",
        f"We walked to {place} with {name}, {clause}, and then we went home.",
        f"The train to {place} leaves from platform {rng.randint(1, 20)} at {hour} o'clock.",
        f"There were {n} people waiting outside {place}, {clause}.",
        f"{name} said that the {thing} would arrive on {day} morning.",
        f"In {old}, {name} moved from {place} to {rng.choice(_PLACES)}, {clause}.",
        rng.choice(_SHORT),
        f"Turn left at {place}, then keep going straight for about {share} minutes.",
    )
    return rng.choice(shapes)


def sentences(count: int = 240, seed: int = 7) -> list[str]:
    """`count` distinct sentences."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        sentence = _sentence(rng)
        if sentence not in out:
            out.append(sentence)
    return out
