"""TEMPO's pieces (the TEMPO blog; the reference lab's 09-tempo): macro-states a game can be resumed from,
the FIFO store of them, the critic (the policy's own weights, asked for a value in a prompt of its own)
and its held-out check against Monte-Carlo returns.

A macro-state is a TextWorld game part-played: its command history (replayed into a fresh game to
resume it: `restore`) and the token stream the policy has seen so far, ending with the next generation
header (`rollout_groups(..., prompts=)` continues it). A TD step rolls one macro-step of H turns from
each start state; an endpoint the turn budget cut off (not the episode's end) is a new state, pushed to
the store. The critic reads the goal, the game's winning commands (privileged: the policy never sees
them) and the condensed history, and ends its answer with `<value>0.42</value>`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from .. import checkpoints
from ..coldstart import ColdStart, content_digest, demonstration_examples, run_cold_start
from ..data.textworld_games import Game
from ..envs.textworld import feedback_line, objective, opening, walkthrough_messages
from ..rollout import ChatTokens, rollout_groups
from ..rollout.multiturn import demonstration_stream
from ..rollout.seeds import STEP_BITS, branch_request, request_seed
from ..types import ModelInput, SamplingParams

CRITIC_SYSTEM = ("You estimate how likely the player is to win this text game from here. Judge the progress "
                 "against the expert walkthrough. End with the value, e.g. <value>0.42</value>.")
CRITIC_TURN = 100
"""Critic requests take turn digits from here on (`seeds.branch_request`): no episode plays this many
turns, so no critic request shares a seed with a policy turn of the same step."""
_VALUE = re.compile(r"<value>\s*([-+]?(?:\d+\.?\d*|\.\d+))\s*</value>")


@dataclass
class MacroState:
    """A game part-played: where a macro-step starts (or ended)."""

    game: int
    """The game's seed."""
    history: list[str]
    """Every command sent so far (`TextWorldEnv.history`): replaying it resumes the game."""
    feedback: list[str]
    """The first line of the game's answer to each command (the critic's condensed history)."""
    prefix: list[int]
    """Prompt and every token so far, ending with the next generation header."""
    round: int
    """Assistant turns played."""
    macro: int
    """Macro-steps played."""
    observation: str
    """The game's whole answer to the last command (the opening's user message at round 0): `restore`'s check."""


def opening_state(game: Game, prompt: list[int]) -> MacroState:
    """A game's start, `prompt` being its rendered opening."""
    return MacroState(game.seed, [], [], list(prompt), 0, 0, opening(game)[-1]["content"])


class StateStore:
    """The TD phase's start states: a FIFO of at most `capacity` (the oldest leave first), taken
    uniformly without replacement (a taken state leaves: each endpoint is continued once)."""

    def __init__(self, capacity: int, states: Sequence[MacroState] = ()):
        if capacity < 1:
            raise ValueError(f"store capacity={capacity}: must be at least 1")
        self.capacity, self.states = capacity, deque(states, maxlen=capacity)

    def __len__(self) -> int:
        return len(self.states)

    def push(self, states: Sequence[MacroState]) -> None:
        self.states.extend(states)

    def take(self, k: int, seed: str) -> list[MacroState]:
        """min(k, size) distinct states, drawn with `random.Random(seed)` (one seed per step: a resumed run
        draws the same) and removed; the rest keep their FIFO order. A state left in the store would be drawn
        again and again: with H = T/2 every stored state's segment ends the game and pushes nothing, so a
        store that only sampled froze (the same few states every step once it held `batch_prompts`)."""
        picked = random.Random(seed).sample(range(len(self.states)), min(k, len(self.states)))
        taken = [self.states[i] for i in picked]
        gone = set(picked)
        self.states = deque((s for i, s in enumerate(self.states) if i not in gone), maxlen=self.capacity)
        return taken

    def to_json(self) -> dict:
        return {"capacity": self.capacity, "states": [asdict(s) for s in self.states]}

    @classmethod
    def from_json(cls, data: dict) -> StateStore:
        return cls(data["capacity"], [MacroState(**s) for s in data["states"]])


@dataclass
class TDProgress:
    """What a TEMPO run carries from step to step besides the weights: saved next to each checkpoint."""

    store: StateStore
    fresh: int = 0
    """Fresh games drawn so far (the next one is `batch.draw(train, fresh)`)."""
    env_steps: int = 0
    """Turns played by the training rollouts so far (`env/steps`)."""

    def save(self, folder, step: int) -> None:
        checkpoints.write_json(folder / f"tempo-{step:04d}.json",
                               {"store": self.store.to_json(), "fresh": self.fresh, "env_steps": self.env_steps})

    @classmethod
    def load(cls, folder, step: int, capacity: int) -> TDProgress:
        """The progress saved at `step` (a resumed run), or a fresh one at step 0."""
        if step == 0:
            return cls(StateStore(capacity))
        data = json.loads((folder / f"tempo-{step:04d}.json").read_text())
        return cls(StateStore.from_json(data["store"]), data["fresh"], data["env_steps"])


class Recorded:
    """An environment that keeps its last answer: the observation of a segment's last turn, which the
    rollout does not append (the turn budget ended the segment first), is the next state's."""

    def __init__(self, env):
        self.env, self.tools, self.last = env, env.tools, None

    @property
    def truncation_reward(self) -> float:
        return self.env.truncation_reward

    def initial_messages(self) -> list[dict]:
        return self.env.initial_messages()

    def step(self, message: dict):
        self.last = self.env.step(message)
        return self.last


def restore(state: MacroState, env_factory: Callable[[int], object]):
    """A fresh `TextWorldEnv` of the state's game (`env_factory(seed)`) with its history replayed and its
    turns counted; a ValueError if the game answers the last command otherwise than it did."""
    env = env_factory(state.game)
    for command in state.history:
        env.act(command)
    env.turns = state.round
    last = env.answers[-1] if env.answers else env.initial_messages()[-1]["content"]
    if last != state.observation:
        raise ValueError(f"game {state.game}: replaying {len(state.history)} commands ends in {last!r}, but the state "
                         f"saved {state.observation!r}; the game is not deterministic or the state is not of this game")
    return env


def endpoint(start: MacroState, traj, env: Recorded, chat: ChatTokens, budgets) -> MacroState | None:
    """The state a branch ended in when the segment's turn budget stopped it (a macro boundary), else
    None: it won, lost, quit, or ran out of the episode's turns or tokens (terminal, V = 0)."""
    inner, rounds = env.env, start.round + len(traj.turns)
    if traj.stop_reason != "max_turns" or rounds >= inner.max_steps:
        return None
    after, _, _, _ = chat.after_turn(traj.turns[-1].tokens, env.last.messages, budgets.max_observation_tokens)
    prefix = traj.prompt + traj.tokens + after
    if len(prefix) >= budgets.max_trajectory_tokens:
        return None
    return MacroState(start.game, list(inner.history), [feedback_line(a) for a in inner.answers], prefix, rounds,
                      start.macro + 1, inner.answers[-1] if inner.answers else start.observation)


def boundary_states(start: MacroState, traj, env, every: int) -> list[MacroState]:
    """The states of a trajectory played from `start` to its end, every `every` rounds (start's own
    included, the end excluded): the Monte-Carlo warm-up's critic examples. A turn's commands are its
    tool calls that reached the game (calls minus tool errors)."""
    states, tokens, commands = [], [], len(start.history)
    for r, turn in enumerate(traj.turns):
        if r % every == 0:
            states.append(MacroState(start.game, env.history[:commands], [feedback_line(a) for a in env.answers[:commands]],
                                     traj.prompt + tokens, start.round + r, start.macro + r // every,
                                     env.answers[commands - 1] if commands else start.observation))
        tokens = tokens + turn.tokens
        commands += int(turn.metrics.get("tool_calls", 0) - turn.metrics.get("tool_errors", 0))
    return states


def critic_messages(game: Game, state: MacroState) -> list[dict]:
    """The critic's prompt: goal, the numbered walkthrough (privileged), the condensed history."""
    walkthrough = "\n".join(f"{i}. {c}" for i, c in enumerate(game.walkthrough, 1))
    history = "\n".join(f"Actor: {c}\nEnvironment: {f}" for c, f in zip(state.history, state.feedback)) or "(no moves yet)"
    return [{"role": "system", "content": CRITIC_SYSTEM},
            {"role": "user", "content": f"Goal: {objective(game)}\nWalkthrough:\n{walkthrough}\nStart: you are in the "
                                        f"{game.room.lower()}.\nHistory:\n{history}"}]


def parse_value(text: str) -> float | None:
    """The last `<value>x</value>` of a critic's answer, clamped to [0, 1]; None if there is none."""
    found = _VALUE.findall(text)
    return min(max(float(found[-1]), 0.0), 1.0) if found else None


def sample_critic(sampler, prompts: Sequence[list[int]], k: int, cfg, seed: int, stop: list[str],
                  phase: int = 0) -> tuple[list[list], list[list[float | None]]]:
    """(k critic answers per prompt, at most `cfg.critic_max_tokens` each at `cfg.temperature`, and their parsed
    values), every request in flight at once; prompt i is request `branch_request(CRITIC_TURN + phase, i, 0)` of
    the step's `seed`. No prompts: nothing is sampled."""
    futures = [sampler.sample(ModelInput.from_ints(p), k, SamplingParams(
        max_tokens=cfg.critic_max_tokens, temperature=cfg.temperature, stop=stop,
        seed=seed + branch_request(CRITIC_TURN + phase, i, 0)))
        for i, p in enumerate(prompts)]
    seqs_BK = [f.result().sequences for f in futures]
    return seqs_BK, [[parse_value(s.text) for s in seqs] for seqs in seqs_BK]


def state_value(values_K: Sequence[float | None]) -> float:
    """A state's value: the mean of the readable values, 0 if none is (the reference lab's rule)."""
    readable = [v for v in values_K if v is not None]
    return sum(readable) / len(readable) if readable else 0.0


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson's r; 0 when either side does not vary (a batch of equal targets has no ranking to get right)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else 0.0


def critic_cold_start(cfg, init: str | None, games: Sequence[Game], env_factory: Callable[[Game], object],
                      steps: int) -> str | None:
    """One more cached cold-start stage after `init`: SFT on critic prompts, one per training game at a
    state drawn along its walkthrough, each answered `<value>x</value>` with x a uniform draw (a fixed
    seed), mixed one to one with the games' walkthrough demonstrations (so the policy keeps what it
    learned: with a critic prompt per walkthrough step they were a quarter of the stage, and the policy
    lost its training games). It teaches the critic's answer format only, no values (no Monte-Carlo
    return is shown): both arms of a comparison start from it. `cfg` is an `AgentConfig`; `steps` = 0: `init` as it is."""
    if steps == 0:
        return init

    def examples(tokenizer) -> list[tuple]:
        chat, rng, conversations, critic = ChatTokens(tokenizer, False), random.Random("tempo-critic-format"), [], []
        for game in games:
            env = env_factory(game)
            conversations.append((opening(game), env.tools, walkthrough_messages(env)))
            j = rng.randrange(len(game.walkthrough))
            state = MacroState(game.seed, env.history[:j], [feedback_line(a) for a in env.answers[:j]], [], j, 0, "")
            value = tokenizer.encode(f"<value>{rng.random():.2f}</value>", add_special_tokens=False)
            critic.append((chat.prompt(critic_messages(game, state), ()), value + [tokenizer.eos_token_id]))
        return critic + demonstration_examples(tokenizer, cfg.tool_schemas, conversations, cfg.max_observation_tokens)

    digest = content_digest([CRITIC_SYSTEM, [(g.seed, g.walkthrough) for g in games[::20]]])
    spec = ColdStart(cfg.model, steps, cfg.sft_batch_size, learning_rate=cfg.sft_learning_rate, init=init,
                     seed=cfg.start_seed, data_seed=1000 * cfg.start_seed,
                     task=f"tempo-critic1-{digest}-{len(games)}-obs{cfg.max_observation_tokens}-schemas{int(cfg.tool_schemas)}")
    return run_cold_start(spec, games, examples)


def held_out_states(games: Sequence[Game], env_factory: Callable[[Game], object], chat: ChatTokens,
                    max_observation_tokens: int) -> list[MacroState]:
    """The critic's held-out states: each game's opening and the state half-way along its walkthrough,
    laid out as a rollout lays them out (`demonstration_stream`)."""
    states = []
    for game in games:
        env = env_factory(game)
        messages = walkthrough_messages(env)
        for j in sorted({0, len(game.walkthrough) // 2}):
            prompt, tokens, _ = demonstration_stream(chat, opening(game), env.tools, messages[:2 * j], max_observation_tokens)
            states.append(MacroState(game.seed, env.history[:j], [feedback_line(a) for a in env.answers[:j]], prompt + tokens,
                                     j, 0, env.answers[j - 1] if j else opening(game)[-1]["content"]))
    return states


def critic_eval(sampler, states: Sequence[MacroState], games: dict[int, Game], env_factory: Callable[[int], object],
                chat: ChatTokens, budgets, cfg, stop: list[str]) -> dict[str, float]:
    """The critic against Monte-Carlo returns on held-out states: each state's return is the win rate of
    `cfg.critic_eval_rollouts` policy continuations to the episode's end (sampled at `cfg.temperature`), its
    value the mean of `cfg.critic_samples` critic answers; a fixed seed, so evaluations differ only by the
    weights. `eval/critic/abs_error` = mean |V - MC|, `eval/critic/value_corr` = Pearson's r of V and MC.
    The seed is the last step's (a step no run of fewer than 2^STEP_BITS steps reaches); the rollouts
    number their groups on from one another's (`first`), so no two requests share a seed."""
    seed, returns, first = request_seed(cfg.seed, 2 ** STEP_BITS - 1), [0.0] * len(states), 0
    for played in sorted({s.round for s in states}):  # one rollout per turn budget left
        picked = [i for i, s in enumerate(states) if s.round == played]
        left = dataclasses.replace(budgets, max_turns=budgets.max_turns - played)
        groups = [[restore(states[i], env_factory) for _ in range(cfg.critic_eval_rollouts)] for i in picked]
        for i, trajectories in zip(picked, rollout_groups(
                sampler, groups, chat, left, cfg.temperature, seed + branch_request(0, first, 0),
                prompts=[states[i].prefix for i in picked])):
            returns[i] = sum(t.metrics.get("won", 0.0) for t in trajectories) / len(trajectories)
        first += len(picked)
    prompts = [chat.prompt(critic_messages(games[s.game], s), ()) for s in states]
    _, values_BK = sample_critic(sampler, prompts, cfg.critic_samples, cfg, seed, stop)
    values = [state_value(v) for v in values_BK]
    return {"eval/critic/abs_error": sum(abs(v - r) for v, r in zip(values, returns)) / len(states),
            "eval/critic/value_corr": correlation(values, returns), "eval/critic/mc_return_mean": sum(returns) / len(states)}


def step_metrics(starts: Sequence[MacroState], won_BN, ends_BN, adv_BN, end_values_EK, critic_values_SK,
                 critic_targets_S: Sequence[float], fresh: int, store: StateStore) -> dict[str, float]:
    """A TEMPO step's own metrics: the critic's error and correlation against the step's targets (at the
    start states, or the warm-up's states against their Monte-Carlo return), its unreadable answers, the
    endpoints' values, what the branches did and what the store holds."""
    flat = [e for es in ends_BN for e in es]
    terminal = [w for ws, es in zip(won_BN, ends_BN) for w, e in zip(ws, es) if e is None]
    answers = [v for vs in (*end_values_EK, *critic_values_SK) for v in vs]
    values_S = [state_value(v) for v in critic_values_SK]
    out = {"actor/segment_reward_mean": sum(map(sum, won_BN)) / len(flat),
           "actor/terminal_won_rate": sum(terminal) / len(terminal) if terminal else 0.0,
           "actor/macro_boundary_rate": sum(e is not None for e in flat) / len(flat),
           "actor/degenerate_group_rate": sum(not any(a) for a in adv_BN) / len(adv_BN),
           "critic/parse_failure_rate": sum(v is None for v in answers) / len(answers) if answers else 0.0,
           "critic/endpoint_value_mean": (sum(state_value(v) for v in end_values_EK) / len(end_values_EK)
                                          if end_values_EK else 0.0),
           "td/store_size": float(len(store)), "td/new_endpoints": float(sum(e is not None for e in flat)),
           "td/fresh_states": float(fresh), "td/macro_index_mean": sum(s.macro for s in starts) / len(starts)}
    if values_S:
        out["critic/abs_error_mean"] = sum(abs(v - g) for v, g in zip(values_S, critic_targets_S)) / len(values_S)
        out["critic/value_corr"] = correlation(values_S, critic_targets_S)
    return out
