"""The TextWorld agent's environment: win a small text game by sending it commands.

One episode per game (`arl.data.textworld_games`). The model has one tool, `act(command)`, which
sends a command to the game; the observation is the game's answer (its first line: "You take the
latchkey from the basket.", "-= Kitchen =-") and the commands it accepts next. A command that is not
admissible is not sent to the game (its state does not change) and is answered "Invalid command.".

Reward (the reference lab's ALFWorld reward): 1 for winning, minus `invalid_penalty` per invalid
action (a command outside the admissible list, a call to an unknown tool or with bad arguments, or
an unreadable call). The rollout sums the turns' rewards; an episode a budget cuts short gets
`truncation_reward`, the penalties so far (see below for the turns it did not play). A turn without a tool call ends the episode ("no_action"), as does an unreadable
call ("malformed_call"); both, and a budget cutting the episode short (a turn that runs out of
tokens), are charged as if every turn left (of `max_steps`) had been an invalid action, so that
ending a game early never pays better than trying (a policy that is charged per invalid action
otherwise learns to end hard games early: the first runs here learned to write unreadable calls). Winning ends the episode ("won"), as does losing
("lost"), which these small games do not have.

An episode is its game and its command history: a copy replays the history into a fresh game
(`copy.deepcopy`, which the conformance check uses), and the same history always gives the same
observations and rewards.
"""

from __future__ import annotations

import copy
import threading

from ..data.textworld_games import Game, make_game, require_textworld, shown_commands
from .base import StepResult, register
from ..tools.calls import MalformedCall, call_tool, format_tool_call, parse_tool_calls

SYSTEM_PROMPT = "You play a text game. Each turn, call act with one command from the list, copied exactly. Reach the goal."
INVALID_PENALTY = 0.1
INVALID = "Invalid command."
COUNTERS = ("won", "steps", "invalid_actions", "score")
"""Per-episode metrics (sums of the turns'), reported even when no episode had them."""
STOP_REASONS = ("won", "lost", "no_action")
_GAME_LOCK = threading.RLock()
"""The rollout steps environments in threads; TextWorld's parsers are not thread-safe (the reference
lab guards its in-process env the same way). A step takes a few milliseconds. Re-entrant: a game
closed while its thread holds the lock must not wait for itself."""


def normalise(command: str) -> str:
    return " ".join(command.lower().split())


def feedback_line(text: str) -> str:
    """The first line of the game's answer, without its prompt and padding."""
    for line in text.replace(">", "\n").splitlines():
        if line.strip():
            return line.strip()
    return ""


def objective(game: Game) -> str:
    """The game's objective without its framing sentences (the ones that name TextWorld)."""
    sentences = [s.strip() for s in game.objective.replace("!", "!|").replace(".", ".|").replace("?", "?|").split("|")]
    kept = [s for s in sentences if s and "textworld" not in s.lower()]
    return " ".join(kept) or game.objective


def opening(game: Game) -> list[dict]:
    """The system prompt and the game's start: the messages every episode (and demonstration) of it opens with."""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Goal: {objective(game)}\nYou are in the {game.room.lower()}.\n"
                                        f"Commands: {', '.join(shown_commands(game.admissible))}"}]


def observation(feedback: str, admissible) -> str:
    return f"{feedback}\nCommands: {', '.join(shown_commands(admissible))}"


class TextWorldEnv:
    """One episode of a TextWorld game (see the module doc). `start` opens the game (a TextWorld
    environment with admissible commands and won/lost requested): the generated games' own by default,
    ALFWorld's with its wrappers (`arl.envs.alfworld`)."""

    def __init__(self, game: Game, invalid_penalty: float = INVALID_PENALTY, max_steps: int = 1, start=None):
        self.game, self.invalid_penalty, self.max_steps, self._start = game, invalid_penalty, max_steps, start
        self.turns = 0
        self.history: list[str] = []
        """Every command sent through `act`, valid or not: with the game, all there is to an episode."""
        self.answers: list[str] = []
        """What `act` answered each command of `history` (TEMPO's critic reads the game's side of an episode)."""
        self.invalid = 0
        self.won = self.lost = False
        self.score = 0
        self._game = None
        self._admissible = list(game.admissible)
        self.tools = (self.act,)

    @property
    def truncation_reward(self) -> float:
        """The penalties so far, and every turn not played (of `max_steps`) charged as an invalid action:
        a turn that runs out of tokens ends the game as early as quitting does, and must not pay better."""
        return -self.invalid_penalty * (self.invalid + max(self.max_steps - self.turns, 0))

    def initial_messages(self) -> list[dict]:
        return opening(self.game)

    def act(self, command: str) -> str:
        """Send one command to the game; returns what happened and the commands you can send next.

        Args:
            command: one of the listed commands, copied exactly.
        """
        self.history.append(command)
        self.answers.append(self._send(command))
        return self.answers[-1]

    def _send(self, command: str) -> str:
        if normalise(command) not in {normalise(c) for c in self._admissible}:
            self.invalid += 1
            return observation(INVALID, self._admissible)
        with _GAME_LOCK:
            self.prepare()
            state, score, _ = self._game.step(normalise(command))
        self._admissible = list(state.admissible_commands or [])
        self.score, self.won, self.lost = score, bool(state.won), bool(state.lost)
        return observation(feedback_line(state.feedback), self._admissible)

    def prepare(self) -> None:
        """Load the game (done by the first command otherwise; the rollout calls it while the first turn decodes)."""
        with _GAME_LOCK:
            if self._game is None:
                self._open()

    def _open(self) -> None:
        textworld = require_textworld()
        infos = textworld.EnvInfos(admissible_commands=True, won=True, lost=True, score=True, feedback=True)
        self._game = self._start(infos) if self._start else textworld.start(self.game.path, request_infos=infos)
        self._game.reset()

    def quit_reward(self) -> float:
        """The reward of a turn that ends the episode without a command: this turn and every one left
        of `max_steps` charged as an invalid action."""
        return -self.invalid_penalty * max(self.max_steps - self.turns + 1, 1)

    def step(self, message: dict) -> StepResult:
        self.turns += 1
        parsed = parse_tool_calls(message["content"])
        if isinstance(parsed, MalformedCall):  # an invalid action that also ends the episode
            self.invalid += 1
            self.close()
            return StepResult([], self.quit_reward(), True, "malformed_call",
                              {"malformed_calls": 1.0, "invalid_actions": 1.0})
        if not parsed:
            self.close()
            return StepResult([], self.quit_reward(), True, "no_action", {})
        invalid_before, score_before, messages, errors = self.invalid, self.score, [], 0
        for call in parsed:
            text, ok = call_tool(self.tools, call)
            if not ok:  # an unknown tool or bad arguments: no command reached the game
                self.invalid += 1
                errors += 1
            messages.append({"role": "tool", "content": text})
            if self.won or self.lost:
                break
        invalid = self.invalid - invalid_before
        metrics = {"tool_calls": float(len(messages)), "tool_errors": float(errors), "steps": float(len(messages)),
                   "invalid_actions": float(invalid), "score": float(self.score - score_before)}
        reward = -self.invalid_penalty * invalid
        if self.won or self.lost:
            self.close()
            metrics["won"] = float(self.won)
            return StepResult([], reward + float(self.won), True, "won" if self.won else "lost", metrics)
        return StepResult(messages, reward, metrics=metrics)

    def close(self) -> None:
        """Free the live game (an episode the rollout cut short is freed by the garbage collector: no
        `__del__` here, since one that takes the lock can run inside a locked step and wait for itself)."""
        if self._game is not None:
            with _GAME_LOCK:
                self._game.close()
            self._game = None

    def __deepcopy__(self, memo):
        """A fresh episode of the same game with the same history replayed (a live game cannot be copied)."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update({k: copy.copy(v) for k, v in self.__dict__.items() if k != "tools"})
        twin.tools, twin._game, twin._admissible = (twin.act,), None, list(self.game.admissible)
        twin.history, twin.answers = [], []
        for command in self.history:
            twin.act(command)
        twin.invalid = self.invalid  # also counts calls that sent no command (unknown tool, unreadable)
        return twin


def walkthrough_messages(env: TextWorldEnv) -> list[dict]:
    """The gold continuation of a game's opening, for the SFT cold start: per walkthrough command an
    assistant turn holding only the `act` call and the tool turn with what the game actually answers;
    the winning command's turn ends the episode, so nothing follows it. Plays `env` (a fresh one)."""
    messages = []
    for command in env.game.walkthrough:
        messages.append({"role": "assistant", "content": format_tool_call("act", {"command": command})})
        result = env.step(messages[-1])
        if result.done:
            if result.stop_reason != "won":
                raise ValueError(f"game {env.game.seed}: its walkthrough ended as {result.stop_reason!r}, not won")
            return messages
        messages += result.messages
    raise ValueError(f"game {env.game.seed}: its walkthrough {env.game.walkthrough} does not win")


def _examples() -> list[TextWorldEnv]:
    return [TextWorldEnv(make_game(seed, max_rooms=1, n_objects=3, max_quest_length=2)) for seed in (0, 1)]


register("textworld", _examples, "small generated TextWorld games, played with an act(command) tool")
