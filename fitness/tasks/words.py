"""Small built-in English vocabularies for the generated tasks (no downloads).

None of these words occurs in the noise haystack, so a word needle appears only where we put it.
"""

from __future__ import annotations

import random

ADJECTIVES = tuple(
    """
    able bold brave bright calm clever cosmic crisp curious daring eager early elegant fancy
    fierce gentle giant glad golden grand happy honest humble icy jolly keen kind lively lucky
    mellow merry mighty misty modest noble odd patient plain polite proud quick quiet rapid rare
    rustic sharp shiny silent silver simple sleek smooth solid spicy steady stormy strong sturdy
    sunny swift tall tender tidy tiny vivid warm wild wise witty young zesty
    """.split()
)

NOUNS = tuple(
    """
    anchor apple arrow badge bakery ball balloon banana basket beach bell bicycle blanket boat
    bottle bracelet bread brick bridge brush bucket button cabin cactus camera candle canoe canyon
    carpet castle cat cello chair cherry chimney circle clock cloud coat comet compass cookie
    copper cottage crayon crown cup curtain daisy desk diamond dolphin door dragon drum eagle
    engine feather fence fiddle flag flute forest fountain fox garden garlic gate giraffe glove
    guitar hammer harbor harp hat helmet hill honey horse island jacket jar jewel kettle kite
    ladder lamp lantern lemon letter lion lizard magnet mango map marble meadow mirror monkey moon
    mountain nest notebook oak ocean olive orange otter owl paddle palace panda parrot
    peach pearl pebble pencil pepper piano pigeon pillow planet plum pocket pond pumpkin puzzle
    rabbit radio rainbow ribbon river robot rocket saddle sail sandal scarf shell ship shovel
    silk spoon squirrel star statue stone storm sugar sweater table teapot tiger tower tractor
    train trumpet tulip turtle umbrella valley vase violin wagon wallet walnut whale whistle
    window wolf zebra
    """.split()
)


def word_pool(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct words in random order: single nouns first, then adjective-noun
    compounds ("brave-otter") when more are needed than the noun list holds."""
    words = list(NOUNS)
    rng.shuffle(words)
    if count <= len(words):
        return words[:count]
    compounds = [f"{a}-{n}" for a in ADJECTIVES for n in NOUNS]
    rng.shuffle(compounds)
    if count > len(words) + len(compounds):
        raise ValueError(f"cannot make {count} distinct words")
    return words + compounds[: count - len(words)]


def random_key(rng: random.Random) -> str:
    """A needle key such as "brave-otter" (about 11k combinations)."""
    return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"
