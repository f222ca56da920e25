"""TextWorld agent: a policy that wins small text games by sending them commands, trained with
multi-turn GRPO (the reference lab's ALFWorld chapter, on games generated here).

Each training game is one prompt of the `textworld` environment (`arl.envs.textworld`): the model
reads the goal, the room and the commands the game accepts, and calls `act(command)` once per turn;
the game's answer and its next commands come back as the observation. Reward: 1 for winning, minus
`invalid_penalty` per invalid action (a command not in the admissible list, or an unreadable call);
ending a game early (no call, an unreadable call, a turn out of tokens) is charged for every turn left.
A group of `group_size` episodes plays the same game; the first turn samples the whole group, then
each branch goes on alone (`arl.rollout.rollout_groups`). Advantage r - mean(group), one value for
every token the policy sampled in the episode; observation and template tokens are context with
advantage 0 (`arl.rollout.trajectory_datum`). Loss reduction: token mean over the trained tokens.

The mini task: real TextWorld games (`textworld` package) of one room, 3 objects and quests of 1-2
commands, generated with seeds (`arl.data.textworld_games`); held-out games have seeds no training
game has. An SFT cold start on the training games' walkthroughs, laid out as rollouts are (two
cached stages), leaves the tiny model partly competent (24% of the held-out games won). `games=alfworld` plays ALFWorld's games instead (`arl.envs.alfworld`:
the alfworld package and its downloaded game files; no cold start).

    arl run textworld --preset mini [seed=1]
    arl show runs/textworld/<name>            # the trajectories, token by token
    docs/chapters/textworld.md                # the method, the results, the three questions of path 03
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .. import policy
from ..client import ServiceClient
from ..coldstart import ColdStart, content_digest, demonstration_examples, run_cold_start
from ..data.textworld_games import Game, make_games
from ..envs.textworld import COUNTERS, STOP_REASONS, TextWorldEnv, opening, walkthrough_messages
from ..eval.agent import evaluate_agent
from ..policy import PolicyConfig
from ..rollout import Budgets, ChatTokens, rollout_groups
from ..settings import configure
from ..track import RunDir, Tracker, progress

SUMMARY_KEYS = ("won", "steps", "invalid_actions", "score", "turns", "no_tool_rate", "valid_tool_call_rate")


@dataclass
class Config(PolicyConfig):
    """The TextWorld agent's fields: the games, the rollout budgets, the cold start, and the
    policy-update ones it shares with GRPO (`arl.policy.PolicyConfig`)."""

    games: str = "textworld"
    """textworld (games generated with seeds), or alfworld (ALFWorld's game files: the alfworld package and
    ALFWORLD_DATA, see `arl.envs.alfworld`; needs sft_steps=0)."""
    n_train: int = 400
    """Training games (seeds 0..N-1)."""
    n_test: int = 50
    """Held-out games (seeds from 1,000,000)."""
    max_rooms: int = 1
    """Rooms of a generated game: drawn from 1..max_rooms per game."""
    n_objects: int = 3
    """Objects of a generated game."""
    max_quest_length: int = 2
    """Commands of a generated game's quest: drawn from 1..max_quest_length per game."""
    invalid_penalty: float = 0.1
    """Reward subtracted per invalid action (a command outside the admissible list, an unreadable call); a
    turn that quits (no call, or an unreadable one) is charged for itself and every turn left."""
    max_tokens: int = 48
    """Sampled tokens per assistant turn."""
    max_turns: int = 4
    """Assistant turns (game steps) per episode."""
    max_trajectory_tokens: int = 1024
    """Prompt, turns and observations of one episode."""
    max_observation_tokens: int = 64
    """Tokens of one observation; longer ones are cut and marked."""
    tool_schemas: bool = False
    """Put act's JSON schema in the prompt through the chat template's tools= (240 more tokens a sequence);
    off, the system prompt names the tool and the cold start teaches the call format."""
    sft_steps: int = 300
    """Cold-start SFT steps on the training games' walkthroughs (cached across runs with the same settings)."""
    sft_stages: int = 2
    """Cold-start stages of sft_steps each: stage k starts from stage k-1's weights (a fresh optimizer, the
    examples in another order) and is cached on its own, so a longer cold start extends a shorter one."""
    sft_batch_size: int = 16
    """Walkthroughs per cold-start step."""
    sft_learning_rate: float = 3e-3
    """Cold-start learning rate."""
    batch_prompts: int = 4
    """Games per step."""
    group_size: int = 8
    """Episodes per game; the group mean is each episode's baseline."""
    steps: int = 30
    """Policy-update steps."""
    learning_rate: float = 2e-4
    """AdamW learning rate of the RL phase."""
    eval_every: int = 15
    """Evaluate on the held-out games every N steps (and before and after)."""

    def validate(self) -> None:
        super().validate()
        self.budgets().validate()
        if self.games not in ("textworld", "alfworld"):
            raise ValueError(f"games={self.games!r}: use textworld or alfworld")
        if self.max_rooms < 1 or self.n_objects < 1 or self.max_quest_length < 1:
            raise ValueError("max_rooms, n_objects and max_quest_length must be at least 1")
        if self.sft_stages < 1:
            raise ValueError(f"sft_stages={self.sft_stages}: must be at least 1 (sft_steps=0 turns the cold start off)")
        if self.invalid_penalty < 0:
            raise ValueError(f"invalid_penalty={self.invalid_penalty}: must be >= 0")
        if self.games == "alfworld":
            from ..envs.alfworld import AlfWorldUnavailable, require_alfworld
            try:
                require_alfworld(split="train")
                require_alfworld(split="valid_unseen")
            except AlfWorldUnavailable as e:
                raise ValueError(f"games=alfworld: {e}") from None
            if self.sft_steps > 0:
                raise ValueError(f"sft_steps={self.sft_steps}: ALFWorld's files hold no walkthroughs to demonstrate; "
                                 "set sft_steps=0 (start from an instruction-tuned model)")

    def budgets(self) -> Budgets:
        # one command per turn: the tool-call budget is the turn budget
        return Budgets(self.max_turns, self.max_turns, self.max_tokens, self.max_trajectory_tokens,
                       self.max_observation_tokens)

    def task(self) -> "GameTask":
        if self.games == "alfworld":
            from ..envs.alfworld import AlfWorldEnv, load_alfworld_games
            return GameTask(load_alfworld_games("train", limit=self.n_train),
                            load_alfworld_games("valid_unseen", limit=self.n_test), AlfWorldEnv, self.invalid_penalty, self.max_turns)
        train, test = make_games(self.n_train, self.n_test, self.max_rooms, self.n_objects, self.max_quest_length)
        return GameTask(train, test, TextWorldEnv, self.invalid_penalty, self.max_turns)

    def start_weights(self, task: "GameTask") -> str | None:
        """The cold start: SFT on every training game's walkthrough as the game answers it (the `act`
        calls and the real observations), laid out as the rollout lays out tokens, trained on the
        assistant tokens only (cached by content). No held-out game is demonstrated."""
        if self.sft_steps == 0:
            return None
        conversations = [(opening(g), env.tools, walkthrough_messages(env)) for g in task.train
                         for env in [task.env(g)]]
        digest = content_digest([o + m for o, _, m in conversations[::20]])
        path = None
        for stage in range(self.sft_stages):
            spec = ColdStart(self.model, self.sft_steps, self.sft_batch_size, learning_rate=self.sft_learning_rate,
                             data_seed=stage, init=path,
                             task=f"textworld-{digest}-{len(conversations)}-obs{self.max_observation_tokens}"
                                  f"-schemas{int(self.tool_schemas)}")
            path = run_cold_start(spec, task.train, lambda tokenizer: demonstration_examples(
                tokenizer, self.tool_schemas, conversations, self.max_observation_tokens))
        return path


@dataclass
class GameTask:
    train: list[Game]
    test: list[Game]
    env_type: type
    invalid_penalty: float
    max_steps: int
    """The turn budget: what a turn that quits the game is charged for (`TextWorldEnv.quit_reward`)."""

    def env(self, game: Game) -> TextWorldEnv:
        return self.env_type(game, self.invalid_penalty, self.max_steps)

    def envs(self, games: list[Game], copies: int = 1) -> list[list[TextWorldEnv]]:
        return [[self.env(g) for _ in range(copies)] for g in games]


def game_item(game: Game) -> dict:
    return {"game": game.seed, "rooms": game.rooms, "quest_length": game.quest_length, "objective": game.objective,
            "walkthrough": list(game.walkthrough)}


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, max_turns=2,
                  sft_steps=60, sft_stages=1, n_train=4, n_test=2, max_rooms=1, n_objects=3, max_quest_length=2, eval_every=1,
                  save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, n_train=2000, n_test=200,
                 max_rooms=5, n_objects=10, max_quest_length=5, max_tokens=256, max_turns=30,
                 max_trajectory_tokens=12_000, max_observation_tokens=512, tool_schemas=True, sft_steps=0,
                 batch_prompts=8, steps=80, eval_every=20),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if cfg.threads:
        configure(num_threads=cfg.threads)
    task, budgets = cfg.task(), cfg.budgets()
    service = ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))
    start, client, ref, start_path = policy.start_client(cfg, run, service, task, resume)
    chat = ChatTokens(client.get_tokenizer(), cfg.tool_schemas)

    def held_out(step: int, sampler, name: str | None = None) -> dict[str, float]:
        return evaluate_agent(run, step, sampler, [task.env(g) for g in task.test], [f"quest{g.quest_length}" for g in task.test],
                              chat, budgets, [game_item(g) for g in task.test], main="won", name=name,
                              counters=COUNTERS, stop_reasons=STOP_REASONS)

    if start == 0:
        run.log_metrics(0, held_out(0, client.save_weights_and_get_sampling_client()))
    session = policy.Session(task.train, task.test, start, client, ref, start_path, chat.tokenizer,
                             [chat.tokenizer.eos_token], held_out, Tracker.create(cfg.tracker, run))
    with progress(cfg.steps, "textworld", initial=start) as bar:
        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            # 1. play a group of episodes of each game from the current weights
            sampler = client.save_weights_and_get_sampling_client()
            games = policy.step_problems(task.train, step, cfg.batch_prompts)
            groups = rollout_groups(sampler, task.envs(games, cfg.group_size), chat, budgets, cfg.temperature,
                                    policy.episode_seed(cfg, step))
            t_sample = time.perf_counter() - t0

            # 2. group-relative advantage over the branches of the same game (degenerate groups: all zero)
            frac_degenerate = policy.episode_advantages(groups, cfg.adv_scale)

            # 3. one policy-gradient step on the policy's tokens (observations masked) of episodes with signal
            kept = policy.trained_episodes(groups)
            lr = cfg.learning_rate_at(step)
            metrics = policy.policy_step(client, cfg, kept, cfg.batch_prompts * cfg.group_size, lr, ref) if kept else {}
            t_total = time.perf_counter() - t0

            # 4. log: episode statistics (won, steps, invalid actions, score), what was trained, timings
            metrics.update(policy.episode_metrics(groups, kept, frac_degenerate, t_sample, t_total, COUNTERS, STOP_REASONS))
            rows = [{"group": i, **game_item(gm), **t.to_json()} for i, (gm, g) in enumerate(zip(games, groups)) for t in g]
            policy.end_step(cfg, run, session, step + 1, metrics, rows)
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "won": metrics["rollout/won"]})
    policy.finish_episodes(cfg, run, session, f"TextWorld agent on {cfg.games} games, {cfg.model}", SUMMARY_KEYS,
                           ("won", "steps", "invalid_actions", "quest1/won", "quest2/won", "quest3/won"), "objective")
    return run
