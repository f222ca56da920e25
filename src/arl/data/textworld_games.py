"""Small TextWorld games generated on the spot, with fixed seeds, in a train and a held-out split.

Each game is a real TextWorld game (Côté et al. 2018, the `textworld` package): a few rooms and
objects and one quest (e.g. "take the latchkey from the basket, then unlock the box with it"),
compiled by Inform 7 into a Z-machine file and played by jericho. Its size is drawn from its seed
(`min_rooms`..`max_rooms` rooms, `min_quest_length`..`max_quest_length` quest steps, `n_objects`
objects), so a split mixes easy and harder games. Training games have seeds from 0 up, development
games (for choosing presets and cold starts) seeds from `DEV_SEED` up, held-out games seeds from
`TEST_SEED` up: no development or held-out game is ever trained on. A split keeps the games whose
walkthrough wins (in larger games two objects can share a name the parser cannot tell apart).
Generating a game takes about 0.6 s; each is built once into the cache (`$ARL_HOME/textworld/`) with
its objective, its walkthrough (the quest's winning commands, which the SFT cold start demonstrates),
whether it wins, and its opening state.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass
from pathlib import Path

from .. import extras, settings
from ..models.cache import ensure_built, read_manifest

BUILD = 2
"""Bump when the generation or the recorded fields change, so cached games are rebuilt."""
TEST_SEED = 1_000_000
"""Held-out games have seeds TEST_SEED, TEST_SEED + 1, ...: disjoint from every training seed."""
DEV_SEED = 2_000_000
"""Development games have seeds DEV_SEED, DEV_SEED + 1, ...: disjoint from training and held-out seeds."""
SPLITS = {"train": 0, "dev": DEV_SEED, "test": TEST_SEED}
"""Each split's first seed; a split of n games has seeds first..first+n-1 (n < 1,000,000)."""
# jericho warns that it cannot track score and moves in TextWorld's games; TextWorld tracks both itself
warnings.filterwarnings("ignore", message=r"Game .* is not fully supported")
HIDDEN = ("examine ", "look", "inventory")
"""Admissible commands that are not listed in observations (they never advance a quest; listing
them would double the tokens of every observation): they stay valid if the model sends them."""


@dataclass(frozen=True)
class Game:
    seed: int
    path: str
    """The compiled game (.z8)."""
    rooms: int
    quest_length: int
    """Commands of its walkthrough (a few games' are fewer than the quest length their size asked for)."""
    objective: str
    """The game's own statement of the quest."""
    walkthrough: tuple[str, ...]
    """The quest's winning commands, in order."""
    room: str
    """The name of the starting room."""
    admissible: tuple[str, ...]
    """Admissible commands in the starting state."""
    wins: bool = True
    """Its walkthrough wins the game. A few generated games' do not: two objects the parser cannot tell
    apart ("the chest" and "the type O chest") make a walkthrough command ambiguous."""


def require_textworld():
    """The `textworld` module, or `MissingExtra` naming the extra that installs it (jericho, which it
    brings, compiles from source: gcc and g++; Linux and macOS)."""
    return extras.require("textworld", "the TextWorld games")


def game_size(seed: int, max_rooms: int, max_quest_length: int, min_rooms: int = 1,
              min_quest_length: int = 1) -> tuple[int, int]:
    """(rooms, quest length) of game `seed`: drawn uniformly from min..max, from the seed alone."""
    if not 1 <= min_rooms <= max_rooms or not 1 <= min_quest_length <= max_quest_length:
        raise ValueError(f"rooms {min_rooms}..{max_rooms}, quest length {min_quest_length}..{max_quest_length}: "
                         "each range must start at 1 or more and not end below its start")
    rng = random.Random(f"textworld-size-{seed}")
    return rng.randint(min_rooms, max_rooms), rng.randint(min_quest_length, max_quest_length)


def make_game(seed: int, max_rooms: int = 2, n_objects: int = 4, max_quest_length: int = 3, min_rooms: int = 1,
              min_quest_length: int = 1) -> Game:
    """Game `seed` (generated and compiled once, then read from the cache)."""
    textworld = require_textworld()
    rooms, quest_length = game_size(seed, max_rooms, max_quest_length, min_rooms, min_quest_length)
    stamp = {"kind": "textworld-game", "build": BUILD, "textworld": textworld.__version__, "seed": seed,
             "rooms": rooms, "objects": n_objects, "quest_length": quest_length}
    folder = settings.get().home / "textworld" / f"r{rooms}-o{n_objects}-q{quest_length}-seed{seed}"
    ensure_built(folder, stamp, lambda tmp: _generate(textworld, tmp, seed, rooms, n_objects, quest_length))
    m = read_manifest(folder)
    return Game(seed, str(folder / "game.z8"), rooms, len(m["walkthrough"]), m["objective"], tuple(m["walkthrough"]),
                m["room"], tuple(m["admissible"]), m["wins"])


def make_games(n_train: int, n_test: int, max_rooms: int = 2, n_objects: int = 4,
               max_quest_length: int = 3) -> tuple[list[Game], list[Game]]:
    """(training games: seeds 0..n_train-1, held-out games: seeds TEST_SEED..TEST_SEED+n_test-1)."""
    size = dict(max_rooms=max_rooms, n_objects=n_objects, max_quest_length=max_quest_length)
    return make_split("train", n_train, **size), make_split("test", n_test, **size)


def make_split(split: str, n: int, **size) -> list[Game]:
    """The first `n` games of `split` (train, dev or test; `SPLITS`) of `size` (`make_game`'s keywords)
    whose walkthrough wins: seeds from the split's first up, skipping the unwinnable ones."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: use one of {', '.join(SPLITS)}")
    if not 0 <= n < 1_000_000:
        raise ValueError(f"{n} {split} games: use 0..999,999 (the splits' seed ranges are a million apart)")
    games, seed = [], SPLITS[split]
    while len(games) < n:
        if seed >= SPLITS[split] + 1_000_000:
            raise ValueError(f"{split}: fewer than {n} winnable games of this size in its seed range")
        game = make_game(seed, **size)
        seed += 1
        if game.wins:
            games.append(game)
    return games


def shown_commands(admissible) -> list[str]:
    """The commands an observation lists: the admissible ones but `HIDDEN`, sorted."""
    return sorted(c for c in admissible if not c.startswith(HIDDEN))


def _generate(textworld, tmp: Path, seed: int, rooms: int, n_objects: int, quest_length: int) -> dict:
    options = textworld.GameOptions()
    options.nb_rooms, options.nb_objects, options.quest_length = rooms, n_objects, quest_length
    options.seeds = seed
    options.path = str(tmp / "game.z8")
    options.force_recompile = True
    path, game = textworld.make(options)
    walkthrough = list(game.metadata.get("walkthrough") or game.main_quest.commands)
    env = textworld.start(path, request_infos=textworld.EnvInfos(admissible_commands=True, description=True, won=True))
    try:
        state = env.reset()
        room = state.description.strip().splitlines()[0].strip("-= ").strip()
        admissible = list(state.admissible_commands)
        for command in walkthrough:  # as the environment sends it: lower case, single spaces
            state, _, _ = env.step(" ".join(command.lower().split()))
        wins = bool(state.won)
    finally:
        env.close()
    # the walkthrough can be shorter than the quest length asked for: the manifest keeps the stamp's
    # (asked) length, so the cache still finds the game, and `Game.quest_length` counts the walkthrough
    return {"objective": game.objective, "walkthrough": walkthrough, "room": room, "admissible": admissible, "wins": wins}
