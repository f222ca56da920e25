"""The multimodal task of the Vision GRPO chapter: 4-choice questions about rendered figures
(`arl.data.figures`), prompted with the figure as an image chunk, and what answers "did the image
matter?": the same questions with a blank image, or with the figure's facts as text and no image.

A prompt is the chat template's rendering of one user turn [image, question + options + instruction],
split at its `<|image_pad|>` into text / `ImageChunk` / text (the reference lab's layout), with
`expected_tokens` from the model's own image processor. The cold start is SFT on short worked answers
in the same view the RL phase sees, so each arm starts from what its view can teach; the reward is the
reference lab's (the last `\\boxed{A-D}` equals the gold letter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import models
from ..coldstart import ColdStart, content_digest, encode_chat, run_cold_start
from ..config import check_eval_split, comma_list, require_positive
from ..data import figures
from ..eval import evaluate
from ..models.images import image_chunk, split_at_image_pads
from ..rewards import choice_reward, extract_choice
from ..types import ImageChunk, ModelInput
from .config import Group

VIEWS = ("image", "blank", "text")
INSTRUCTION = "Answer with \\boxed{A}, \\boxed{B}, \\boxed{C} or \\boxed{D}."


@dataclass
class FigureConfig(Group):
    """The figure task: its splits, the view of the figure the policy gets, and the SFT cold start."""

    model: str = "arl/tiny-qwen2-vl-3m"
    """Base model: a vision-language model (`arl models`; a local Qwen2-VL / Qwen2.5-VL folder for `full`)."""
    view: str = "image"
    """What the prompt shows: image (the figure), blank (a white image of the same size: the control
    without visual information) or text (the figure's facts written out, no image)."""
    kinds: str = "area,count"
    """Question kinds, comma-separated (count, relation, length, area, angle); the mini default is the two
    the tiny model's cold start can partly learn (area well, count barely)."""
    image_size: int = 112
    """Figure side in pixels (112 = 16 image tokens on the tiny model)."""
    n_train: int = 2000
    """Generated training figures."""
    n_dev: int = 100
    """Development figures: where presets and cold starts are chosen (eval_split=dev)."""
    n_test: int = 200
    """Held-out test figures: the reported results."""
    eval_split: str = "test"
    """Which held-out figures the evaluations use: test (reported results) or dev (choosing settings)."""
    sft_steps: int = 600
    """Cold-start SFT steps on worked answers in this view (cached); 0 = start from the base model."""
    sft_batch_size: int = 32
    """Examples per cold-start step."""
    sft_learning_rate: float = 2e-3
    """Cold-start learning rate."""
    start_seed: int = 0
    """Seed of the cold start's batch order and draws: 0 is the one cached start every run shares (results
    are conditional on it); `arl compare --start-per-seed` sets it to each run's seed, so that every seed
    trains its own start and the intervals cover the start's variance too."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "n_train", "n_dev", "n_test", "image_size")
        if self.view not in VIEWS:
            raise ValueError(f"view={self.view!r}: use one of {', '.join(VIEWS)}")
        check_eval_split(self)
        self.kind_list()
        if self.sft_steps < 0:
            raise ValueError(f"sft_steps={self.sft_steps}: must be >= 0 (0 = no cold start)")

    def kind_list(self) -> list[str]:
        return comma_list("kinds", self.kinds, figures.KINDS)

    def data_splits(self) -> dict[str, list]:
        """Every split's figures: train, dev and test (disjoint by scene)."""
        train, dev, test = figures.make_split(self.n_train, self.n_dev, self.n_test, size=self.image_size,
                                              kinds=self.kind_list())
        return {"train": train, "dev": dev, "test": test}

    def figure_task(self, max_tokens: int) -> FigureTask:
        train, dev, test = figures.make_split(self.n_train, self.n_dev, self.n_test, size=self.image_size,
                                              kinds=self.kind_list())
        held_out = test if self.eval_split == "test" else dev
        task = FigureTask(train, held_out, self.view, self.model, max_tokens)
        if self.sft_steps:
            key = content_digest([self.view, self.kind_list(), self.image_size, self.n_train,
                                  task.example_text(train[0]), train[0].solution()])
            task.cold_start = ColdStart(self.model, self.sft_steps, self.sft_batch_size, learning_rate=self.sft_learning_rate,
                                        seed=self.start_seed, data_seed=self.start_seed, task=f"figures-{key}")
        return task


@dataclass
class FigureTask:
    """Figures with a gold letter, one prompt each in the chosen `view`, graded by the last boxed letter
    (greedy, `max_tokens`, the same items every time); the evaluation reports accuracy per kind too."""

    train: list
    test: list
    view: str
    model: str
    max_tokens: int
    cold_start: ColdStart | None = None
    summary_keys: Sequence[str] = ("accuracy", "format_rate", "accuracy_given_format")
    table_keys: Sequence[str] = ("accuracy", "format_rate", "truncated")
    _processor: object = field(default=None, repr=False)
    _prompts: dict = field(default_factory=dict, repr=False)

    def example_text(self, fig) -> str:
        """The text of a figure's user turn in this view (the facts first in the text view)."""
        question = f"{figures.question_text(fig)}\n{INSTRUCTION}"
        return f"{fig.facts}\n{question}" if self.view == "text" else question

    def prompt(self, tokenizer, fig) -> ModelInput:
        """The figure's prompt: chat-template tokens split at the image placeholder (cached per figure)."""
        if fig.id not in self._prompts:
            if self.view == "text":
                ids = encode_chat(tokenizer, [{"role": "user", "content": self.example_text(fig)}])
                self._prompts[fig.id] = ModelInput.from_ints(ids)
            else:
                if self._processor is None:
                    self._processor = models.load_image_processor(self.model)
                data = fig.png() if self.view == "image" else figures.blank_png(fig.size)
                content = [{"type": "image"}, {"type": "text", "text": self.example_text(fig)}]
                ids = encode_chat(tokenizer, [{"role": "user", "content": content}])
                pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
                self._prompts[fig.id] = split_at_image_pads(ids, [image_chunk(data, self._processor)], pad)
        return self._prompts[fig.id]

    def sft_examples(self, tokenizer) -> list[tuple[ModelInput, list[int]]]:
        """(prompt, worked answer + end of turn) per training figure: the cold start's examples."""
        return [(self.prompt(tokenizer, f), tokenizer.encode(f.solution(), add_special_tokens=False)
                 + [tokenizer.eos_token_id]) for f in self.train]

    def start_weights(self) -> str | None:
        return run_cold_start(self.cold_start, self.train, self.sft_examples) if self.cold_start else None

    def images(self, run, tokenizer, fig) -> list[str]:
        """The names (`RunDir.save_image`) of the images in a figure's prompt, in order: what `arl show` draws."""
        return [run.save_image(c.data) for c in self.prompt(tokenizer, fig).chunks if isinstance(c, ImageChunk)]

    def held_out(self, run, step: int, sampler, tokenizer, name: str | None = None) -> dict[str, float]:
        result = evaluate(sampler, [self.prompt(tokenizer, f) for f in self.test], [f.answer for f in self.test],
                          choice_reward, self.max_tokens, [tokenizer.eos_token], extract_choice)
        by_kind: dict[str, list[float]] = {}
        for f, item in zip(self.test, result.items):
            item.update(id=f.id, kind=f.kind, prompt=self.example_text(f), images=self.images(run, tokenizer, f))
            by_kind.setdefault(f.kind, []).append(item["reward"])
        per_kind = {f"{k}/accuracy": sum(v) / len(v) for k, v in sorted(by_kind.items())}
        run.write_eval(name or f"step-{step:04d}", {**result.summary(), **per_kind, "items": result.items})
        return {"eval/accuracy": result.accuracy, "eval/format_rate": result.format_rate,
                **{f"eval/{k}": v for k, v in per_kind.items()}}

    def rows(self, run, tokenizer, figs: Sequence, groups, adv_BG, rewards_BG) -> list[dict]:
        """One row per sampled completion: its figure (id, kind, question, the prompt's images as stored
        in the run folder), text, tokens, logprobs, reward and advantage."""
        return [{"figure": f.id, "kind": f.kind, "prompt": self.example_text(f), "images": images, "answer": f.answer,
                 "completion": s.text, "tokens": s.tokens, "logprobs": s.logprobs, "reward": r, "advantage": a,
                 "stop_reason": s.stop_reason}
                for f, seqs, rs, advs in zip(figs, groups, rewards_BG, adv_BG)
                for images in [self.images(run, tokenizer, f)] for s, r, a in zip(seqs, rs, advs)]

    def report_rows(self, rows: list[dict]) -> list[dict]:
        return rows
