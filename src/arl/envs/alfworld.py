"""ALFWorld (Shridhar et al. 2021) through the TextWorld environment: for users who have the
`alfworld` package and its game files.

ALFWorld's household tasks ("put a clean mug in the coffee machine") are TextWorld games written in
PDDL (`game.tw-pddl`, one per task, with a `traj_data.json` beside it). They are not generated: they
come from a download (`alfworld-download`, about 1 GB from GitHub releases) into the folder that
`ALFWORLD_DATA` names. `require_alfworld` checks the package and the folder and fails with a message
naming what is missing and how to get it, before any work starts; `load_alfworld_games` walks a split
as the reference lab does (six task types, solvable games only, "movable" and "Sliced" variants
skipped); `AlfWorldEnv` is `TextWorldEnv` on such a game, opened with ALFWorld's wrappers.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from ..data.textworld_games import Game, require_textworld
from .textworld import INVALID_PENALTY, SYSTEM_PROMPT, TextWorldEnv, observation

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
SPLITS = {"train": "train", "valid_seen": "valid_seen", "valid_unseen": "valid_unseen"}
GAMES_FOLDER = "json_2.1.1"


class AlfWorldUnavailable(RuntimeError):
    """The alfworld package or its game files are missing; the message says how to get them."""


def data_dir(folder: str | Path | None = None) -> Path:
    """The ALFWorld data folder: `folder`, else $ALFWORLD_DATA, else alfworld's default (~/.cache/alfworld)."""
    return Path(folder or os.environ.get("ALFWORLD_DATA") or Path.home() / ".cache" / "alfworld").expanduser()


def require_alfworld(folder: str | Path | None = None, split: str = "valid_unseen") -> Path:
    """The folder of `split`'s games, or `AlfWorldUnavailable` naming what is missing and the fix."""
    if split not in SPLITS:
        raise AlfWorldUnavailable(f"ALFWorld split {split!r}: use one of {', '.join(SPLITS)}")
    if importlib.util.find_spec("alfworld") is None:
        raise AlfWorldUnavailable("ALFWorld needs the alfworld package: pip install 'alfworld==0.4.2' (it pulls "
                                  "textworld 1.7), then download its games: alfworld-download --data-dir DIR "
                                  "and export ALFWORLD_DATA=DIR")
    root = data_dir(folder)
    games = root / GAMES_FOLDER / SPLITS[split]
    if not games.is_dir() or next(games.rglob("game.tw-pddl"), None) is None:
        raise AlfWorldUnavailable(f"no ALFWorld games in {games}: download them with "
                                  f"`alfworld-download --data-dir {root}` (about 1 GB) and set ALFWORLD_DATA={root} "
                                  "(or point ALFWORLD_DATA at the folder that holds json_2.1.1/)")
    return games


def load_alfworld_games(split: str = "valid_unseen", folder: str | Path | None = None, limit: int | None = None) -> list[Game]:
    """The solvable games of `split` with one of the six task types, sorted by path (as `Game`s with
    an empty walkthrough: ALFWorld's expert plans come from its own planner, not from the files)."""
    games_dir = require_alfworld(folder, split)
    out = []
    for i, path in enumerate(sorted(games_dir.rglob("game.tw-pddl"))):
        if "movable" in str(path) or "Sliced" in str(path):
            continue
        traj = path.parent / "traj_data.json"
        if not traj.is_file():
            continue
        meta = json.loads(traj.read_text())
        if meta.get("task_type") not in TASK_TYPES:
            continue
        if not json.loads(path.read_text()).get("solvable", False):
            continue
        out.append(Game(seed=i, path=str(path), rooms=1, quest_length=0, objective="", walkthrough=(), room="",
                        admissible=()))
        if limit and len(out) >= limit:
            break
    return out


class AlfWorldEnv(TextWorldEnv):
    """`TextWorldEnv` on an ALFWorld game: opened through TextWorld with ALFWorld's demangler and
    infos wrappers; the opening is the game's first observation (the room and the task)."""

    def __init__(self, game: Game, invalid_penalty: float = INVALID_PENALTY, max_steps: int = 1):
        super().__init__(game, invalid_penalty, max_steps, start=self._open_alfworld)
        self._first = None

    def _open_alfworld(self, infos):
        textworld = require_textworld()
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        return textworld.start(self.game.path, request_infos=infos, wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])

    def initial_messages(self) -> list[dict]:
        if self._first is None:
            textworld = require_textworld()
            infos = textworld.EnvInfos(admissible_commands=True, feedback=True)
            env = self._open_alfworld(infos)
            try:
                state = env.reset()
                self._first = (state.feedback.strip(), list(state.admissible_commands))
            finally:
                env.close()
            self._admissible = self._first[1]
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": observation(*self._first)}]
