"""Generated TextWorld games as an `EnvTask`: what the TextWorld, TEMPO and AgentOPSD chapters share.

`GamesConfig` holds the games' fields (how many per split, their size, the reward's charges, the cold
start's stages); `games_task` turns a config into the task: the training games, the evaluated split
(`eval_split`: dev while choosing presets and cold starts, test for the reported results), a fresh
`TextWorldEnv` per episode, and the SFT cold start on the training games' walkthroughs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..coldstart import content_digest, privileged_mask
from ..config import check_eval_split
from ..data.textworld_games import Game, make_split
from ..data.textworld_skills import skills_for
from ..envs.textworld import COUNTERS, STOP_REASONS, TextWorldEnv, opening, walkthrough_messages
from .config import Group
from .self_teacher import privileged_opening
from .task import EnvTask

LONG_HORIZON = dict(n_train=2000, n_dev=50, n_test=100, min_rooms=2, max_rooms=3, n_objects=4, min_quest_length=2,
                    max_quest_length=4, invalid_penalty=0.0, max_turns=8, max_tokens=48, max_observation_tokens=160,
                    max_trajectory_tokens=1700, sft_steps=300, sft_stages=2, skill_fraction=0.5)
"""Path 04's long-horizon mini world (TEMPO, AgentOPSD): 2-3 rooms, 4 objects, quests of 2-4 commands, 8
turns an episode, reward the win alone (as the reference lab's ALFWorld chapters of path 04); 2,000
training, 50 development and 100 held-out games; one cold start for every arm of both chapters, half of
its walkthroughs shown with their skill text. Sized on dev: the cold start wins 12 of the 50 development
games (24%) and 6 of 32 training episodes (docs/chapters/agent-opsd.md); the first try (300 training
games, 2-4 rooms, 6 objects, quests of 3-5, 12 turns) won 1 of 50 and 81% of its training episodes."""
SUMMARY_KEYS = ("won", "steps", "invalid_actions", "score", "turns", "no_tool_rate", "valid_tool_call_rate")


@dataclass
class GamesConfig(Group):
    """Generated games: their number per split, their size, the reward's charges and the cold start."""

    n_train: int = 400
    """Training games (seeds from 0; a split keeps the games whose walkthrough wins)."""
    n_test: int = 50
    """Held-out games (seeds from 1,000,000)."""
    n_dev: int = 50
    """Development games (seeds from 2,000,000), evaluated instead of the held-out ones when eval_split=dev
    (generated only then)."""
    eval_split: str = "test"
    """The games the held-out evaluation plays: test (the reported results) or dev (choosing presets and cold starts)."""
    min_rooms: int = 1
    """Rooms of a generated game: drawn from min_rooms..max_rooms per game."""
    max_rooms: int = 1
    """Rooms of a generated game: drawn from min_rooms..max_rooms per game."""
    n_objects: int = 3
    """Objects of a generated game."""
    min_quest_length: int = 1
    """Commands of a generated game's quest: drawn from min_quest_length..max_quest_length per game."""
    max_quest_length: int = 2
    """Commands of a generated game's quest: drawn from min_quest_length..max_quest_length per game."""
    invalid_penalty: float = 0.1
    """Reward subtracted per invalid action (a command outside the admissible list, an unreadable call); a
    turn that quits (no call, or an unreadable one) is charged for itself and every turn left. 0: the
    reward is the win alone."""
    skill_fraction: float = 0.0
    """Share of the cold start's walkthroughs shown with their game's skill text (`arl.data.textworld_skills`)
    before the system prompt, so that the same weights learn to read skills (AgentOPSD's privileged teacher)."""
    sft_stages: int = 2
    """Cold-start stages of sft_steps each: stage k starts from stage k-1's weights (a fresh optimizer, the
    examples in another order) and is cached on its own, so a longer cold start extends a shorter one."""

    def validate(self) -> None:
        super().validate()
        if not 1 <= self.min_rooms <= self.max_rooms or self.n_objects < 1 or \
                not 1 <= self.min_quest_length <= self.max_quest_length:
            raise ValueError(f"rooms {self.min_rooms}..{self.max_rooms}, n_objects={self.n_objects}, quest length "
                             f"{self.min_quest_length}..{self.max_quest_length}: each must be at least 1 and no "
                             "minimum above its maximum")
        check_eval_split(self)
        if self.sft_stages < 1:
            raise ValueError(f"sft_stages={self.sft_stages}: must be at least 1 (sft_steps=0 turns the cold start off)")
        if not 0.0 <= self.skill_fraction <= 1.0:
            raise ValueError(f"skill_fraction={self.skill_fraction}: must be in [0, 1] (a share of the walkthroughs)")
        if self.invalid_penalty < 0:
            raise ValueError(f"invalid_penalty={self.invalid_penalty}: must be >= 0")

    def splits(self) -> tuple[list[Game], list[Game]]:
        """(training games, the evaluated split's games), generated once and cached."""
        size = dict(min_rooms=self.min_rooms, max_rooms=self.max_rooms, n_objects=self.n_objects,
                    min_quest_length=self.min_quest_length, max_quest_length=self.max_quest_length)
        held_out = self.n_test if self.eval_split == "test" else self.n_dev
        return make_split("train", self.n_train, **size), make_split(self.eval_split, held_out, **size)

    def data_splits(self) -> dict[str, list[Game]]:
        """Every split's games: train, dev and test (disjoint by seed range)."""
        size = dict(min_rooms=self.min_rooms, max_rooms=self.max_rooms, n_objects=self.n_objects,
                    min_quest_length=self.min_quest_length, max_quest_length=self.max_quest_length)
        return {split: make_split(split, n, **size)
                for split, n in (("train", self.n_train), ("dev", self.n_dev), ("test", self.n_test))}


def game_item(game: Game) -> dict:
    return {"game": game.seed, "rooms": game.rooms, "quest_length": game.quest_length, "objective": game.objective,
            "walkthrough": list(game.walkthrough)}


def games_task(cfg, train: list[Game], test: list[Game], env_type=TextWorldEnv, tags: int = 3) -> EnvTask:
    """The games as episodes of `env_type` (a quitting turn is charged for the `max_turns` budget). `cfg` is
    an `AgentConfig` and a `GamesConfig`. The cold start: SFT on every training game's walkthrough as the
    game answers it (the `act` calls and the real observations), in `sft_stages` cached stages; no
    development or held-out game is shown (the same walkthroughs are the continued-SFT control's data). A `skill_fraction` of the walkthroughs (drawn per game,
    seeded) open with the game's skill text (`skills_for`) before the system prompt (`privileged_opening`),
    so that the same weights learn to read it (AgentOPSD's teacher). The report's table breaks success down
    by quest lengths 1..`tags`."""
    def env(game: Game) -> TextWorldEnv:
        return env_type(game, cfg.invalid_penalty, cfg.max_turns)

    shown = privileged_mask(train, cfg.skill_fraction)

    @cache
    def conversations() -> list[tuple]:
        return [(privileged_opening(opening(g), skills_for(g.walkthrough)) if s else opening(g), e.tools,
                 walkthrough_messages(e))
                for g, s in zip(train, shown) for e in [env(g)]]

    def cold_start() -> str | None:
        if cfg.sft_steps == 0:
            return None
        digest = content_digest([o + m for o, _, m in conversations()[::20]])
        key = f"-skills{sum(shown)}" if any(shown) else ""
        return cfg.demonstration_cold_start(f"textworld-{digest}-{len(train)}-obs{cfg.max_observation_tokens}"
                                            f"-schemas{int(cfg.tool_schemas)}{key}", conversations(), cfg.sft_stages)

    table = ("won", "steps", "invalid_actions", *(f"quest{n}/won" for n in range(1, tags + 1)))
    return EnvTask(train, test, env, cfg.budgets(), cfg.tool_schemas, describe=game_item, tag=lambda g: f"quest{g.quest_length}",
                   summary_keys=SUMMARY_KEYS, table_keys=table, cold_start=cold_start, counters=COUNTERS,
                   stop_reasons=STOP_REASONS, prompt_key="objective", conversations=conversations)
