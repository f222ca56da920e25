"""Teacher scoring is aligned with the student's tokens: scoring a sampled completion under the model
that sampled it gives back the sampler's own logprobs, token for token (a shift by one would not)."""

import pytest

import arl
from arl.rollout import score_completions


def test_scores_line_up_with_the_sampled_tokens():
    service = arl.ServiceClient(run_name="scoring-test")
    client = service.create_full_training_client("arl/tiny-qwen3-0.5m", seed=0)
    sampler = client.save_weights_and_get_sampling_client()
    tok = client.get_tokenizer()
    prompt = tok.encode("What is 2 + 3?")
    seqs = sampler.sample(arl.ModelInput.from_ints(prompt), 3, arl.SamplingParams(max_tokens=10, seed=1)).result().sequences
    scored = score_completions(sampler, [(prompt, s.tokens) for s in seqs])
    for s, lp in zip(seqs, scored):
        assert len(lp) == len(s.tokens)
        assert lp == pytest.approx(s.logprobs, abs=1e-4)
        # the off-by-one alignment (scores of the tokens one step earlier) does not match
        shifted = score_completions(sampler, [(prompt[:-1], [prompt[-1]] + s.tokens[:-1])])[0]
        assert shifted != pytest.approx(s.logprobs, abs=1e-4)


def test_a_wrong_length_is_refused():
    class Fake:  # a sampler that scores one token too few
        def compute_logprobs(self, model_input):
            return _Done([None, -1.0])

    with pytest.raises(ValueError, match="logprobs for 2 completion tokens"):
        score_completions(Fake(), [([1], [2, 3])])


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value
