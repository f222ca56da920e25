"""Spec-o3's environment: vet one spectrum for one class, looking closer with an image-returning tool.

One episode per question (`arl.data.spectra`): the opening user turn holds the full spectrum image and
the question with its guidance. The model may call `spectral_visualization_tool(wavelength_range)`,
which corrects the stored spectrum for redshift, renders the rest-frame window and returns it as an
image observation (a text message when the window holds too few points, or the range is malformed).
A turn without a call is the final answer, graded by `arl.rewards.vetting_reward`
(1[correct] - 0.2 * 1[bad format]); an unreadable call or a budget running out is a bad format.
`tool=False` is the control without the tool: the same question and image, no tool offered.
"""

from __future__ import annotations

from ..data import spectra
from ..rewards.vetting import BAD_FORMAT_PENALTY, extract_vetting, vetting_reward
from .base import ToolEnv, register


def visualization_tool(spectrum: spectra.Spectrum):
    """The tool bound to one spectrum (its name and schema are the reference lab's)."""

    def spectral_visualization_tool(wavelength_range: list[float]) -> bytes | str:
        """Plot the spectrum over a rest-frame wavelength window (the stored spectrum is corrected for
        redshift first); returns an image, or a text message when the window holds too few points.

        Args:
            wavelength_range: [lo, hi] in Angstrom, rest frame, lo < hi.
        """
        return spectra.visualize(spectrum, wavelength_range)

    return spectral_visualization_tool


SYSTEM_PROMPT = (f"You can call {spectra.TOOL_NAME}(wavelength_range=[lo, hi]) to plot a rest-frame window of the "
                 "spectrum larger.")
"""Names the tool and its argument in one line (the chat template's tool schemas cost about 240 tokens;
`tool_schemas=True` adds them)."""


class SpecEnv(ToolEnv):
    truncation_reward = BAD_FORMAT_PENALTY
    malformed_reward = BAD_FORMAT_PENALTY

    def __init__(self, question: spectra.Question, tool: bool = True):
        self.question = question
        self.tools = (visualization_tool(question.spectrum),) if tool else ()
        self.image = spectra.full_view(question.spectrum)
        self.prediction: str | None = None
        """The episode's YES/NO once answered (None: no readable answer, or not answered yet)."""

    def initial_messages(self) -> list[dict]:
        user = {"role": "user", "content": [{"type": "image", "image": self.image},
                                            {"type": "text", "text": self.question.question_text()}]}
        return [{"role": "system", "content": SYSTEM_PROMPT}, user] if self.tools else [user]

    def grade(self, answer: str) -> tuple[float, dict[str, float]]:
        self.prediction = extract_vetting(answer)
        return vetting_reward(answer, self.question.answer), {
            "correct": float(self.prediction == self.question.answer), "answered": float(self.prediction is not None)}


def _examples() -> list[SpecEnv]:
    train, _, test = spectra.make_split(2, 0, 2)
    return [SpecEnv(q) for q in train + test] + [SpecEnv(test[0], tool=False)]


register("spec-o3", _examples, "YES/NO vetting of a spectrum image, with an image-returning zoom tool")
