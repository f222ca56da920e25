"""Bad input fails before any work, with an error that names the field and the fix."""

import numpy as np
import pytest

import arl
from conftest import TINY

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.fixture(scope="module")
def tc(service):
    return service.create_lora_training_client(TINY, rank=4, seed=0)


def test_datum_array_of_wrong_length():
    with pytest.raises(ValueError, match=r"loss_fn_inputs\['weights'\] has length 2 but model_input has length 3"):
        arl.Datum(model_input=arl.ModelInput.from_ints([1, 2, 3]),
                  loss_fn_inputs={"target_tokens": [1, 2, 3], "weights": [1.0, 1.0]})


def test_datum_accepts_numpy_torch_and_lists():
    import torch

    d = arl.Datum(model_input=arl.ModelInput.from_ints([1, 2, 3]),
                  loss_fn_inputs={"target_tokens": np.array([2, 3, 4], dtype=np.int32),
                                  "weights": torch.tensor([0.0, 1.0, 1.0]), "advantages": [0.0, 0.5, 0.5]})
    assert d.loss_fn_inputs["target_tokens"].dtype == "int64"
    assert d.loss_fn_inputs["weights"].dtype == "float32"
    assert d.loss_fn_inputs["advantages"].to_numpy().tolist() == [0.0, 0.5, 0.5]


def test_unknown_loss_and_config_key(tc):
    d = arl.Datum(model_input=arl.ModelInput.from_ints([1, 2]), loss_fn_inputs={"target_tokens": [2, 3]})
    with pytest.raises(ValueError, match="loss_fn='reinforce' is not a built-in loss"):
        tc.forward_backward([d], "reinforce")
    with pytest.raises(ValueError, match="unknown key"):
        tc.forward_backward([d], "cross_entropy", {"beta": 0.1})


def test_missing_and_misspelt_inputs(tc):
    d = arl.Datum(model_input=arl.ModelInput.from_ints([1, 2]),
                  loss_fn_inputs={"target_tokens": [2, 3], "logprobs": [0.0, 0.0], "advantage": [0.0, 1.0]})
    with pytest.raises(ValueError, match=r"lacks \['advantages'\]"):
        tc.forward_backward([d], "ppo")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['advantage'\]"):
        tc.forward_backward([arl.Datum(d.model_input, {**d.loss_fn_inputs, "advantages": [0.0, 1.0]})], "ppo")


def test_prompt_longer_than_context(tc):
    sampler = tc.save_weights_and_get_sampling_client()
    too_long = arl.ModelInput.from_ints([5] * sampler.context_length)
    with pytest.raises(ValueError, match="context of"):
        sampler.sample(too_long, 1, arl.SamplingParams(max_tokens=4))
    d = arl.Datum(model_input=too_long.append_int(5), loss_fn_inputs={"target_tokens": [5] * (sampler.context_length + 1)})
    with pytest.raises(ValueError, match="more than the context"):
        tc.forward_backward([d], "cross_entropy")


def test_image_chunk_on_text_only_model(tc):
    mi = arl.ModelInput(chunks=[arl.EncodedTextChunk(tokens=[1, 2]), arl.ImageChunk(data=PNG, format="png", expected_tokens=4)])
    assert mi.length == 6
    with pytest.raises(ValueError, match="text-only model"):
        tc.forward_backward([arl.Datum(mi, {"target_tokens": [0] * 6})], "cross_entropy")
    with pytest.raises(ValueError, match="text-only model"):
        tc.save_weights_and_get_sampling_client().sample(mi, 1, arl.SamplingParams(max_tokens=2))


def test_image_chunk_validation():
    with pytest.raises(ValueError, match="not a jpeg file"):
        arl.ImageChunk(data=PNG, format="jpeg", expected_tokens=4)
    with pytest.raises(ValueError, match="expected_tokens must be a positive int"):
        arl.ImageChunk(data=PNG, format="png", expected_tokens=0)


def test_missing_model_and_checkpoint(service):
    with pytest.raises(ValueError, match="no-such-model"):
        service.create_lora_training_client("no-such-model", rank=4)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        service.create_training_client_from_state("arl://nowhere/training_state/missing")
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        service.create_sampling_client(model_path="arl://nowhere/sampler_weights/missing")


def test_weights_only_checkpoint_cannot_restore_optimizer(service, tc):
    path = tc.save_weights_for_sampler("weights-only").result().path
    with pytest.raises(FileNotFoundError, match="weights only"):
        service.create_training_client_from_state_with_optimizer(path)


def test_parameter_validation():
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        arl.SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        arl.SamplingParams(max_tokens=4, top_p=0.0)
    with pytest.raises(ValueError, match="beta2"):
        arl.AdamParams(beta2=1.0)
    with pytest.raises(ValueError, match="rank"):
        arl.ServiceClient().create_lora_training_client(TINY, rank=0)
    with pytest.raises(TypeError, match="unknown key 'timeot'"):
        arl.configure(timeot=3)


def test_tensor_data_round_trip():
    import torch

    td = arl.TensorData.from_numpy(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert td.dtype == "float32" and td.shape == [2, 3]
    assert td.to_numpy().shape == (2, 3) and td.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert torch.equal(arl.TensorData.from_torch(torch.tensor([1, 2])).to_torch(), torch.tensor([1, 2]))
    mi = arl.ModelInput.from_ints([1, 2]).append_int(3)
    assert mi.to_ints() == [1, 2, 3] and arl.ModelInput.empty().length == 0


def test_auto_shift_is_refused_with_the_alignment_to_use(tc):
    d = arl.Datum(model_input=arl.ModelInput.from_ints([1, 2]), loss_fn_inputs={"target_tokens": [2, 3]})
    with pytest.raises(ValueError, match=r"auto_shift=True is not supported.*C\[:-1\]"):
        tc.forward_backward([d], "cross_entropy", auto_shift=True)


def _weights(client):
    return [p.detach().clone() for p in client._trainer.params]


def test_a_non_finite_loss_or_gradient_never_reaches_the_weights(service):
    """NaN advantages make the loss NaN: forward_backward refuses before the backward pass; an infinite
    gradient is refused by optim_step before the optimizer; the weights are unchanged each time and the
    client trains on afterwards."""
    from arl.rollout import rl_datum, sft_datum
    from arl.types import NonFiniteError

    tc = service.create_full_training_client(TINY, seed=0)
    prompt, completion = [1, 2, 3], [4, 5, 6]
    before = _weights(tc)
    bad = rl_datum(prompt, completion, [-1.0] * 3, float("nan"))
    with pytest.raises(NonFiniteError, match="importance_sampling loss is nan.*weights are unchanged"):
        tc.forward_backward([bad], "importance_sampling").result()
    tc.forward_backward([sft_datum(prompt, completion)], "cross_entropy").result()
    tc._trainer.params[0].grad.view(-1)[0] = float("inf")  # as an overflow in a backward pass leaves it
    with pytest.raises(NonFiniteError, match="gradient norm is inf"):
        tc.optim_step(arl.AdamParams(learning_rate=1e-3)).result()
    assert all(torch_equal(a, b) for a, b in zip(before, _weights(tc)))
    tc.forward_backward([sft_datum(prompt, completion)], "cross_entropy").result()
    tc.optim_step(arl.AdamParams(learning_rate=1e-3)).result()
    assert not all(torch_equal(a, b) for a, b in zip(before, _weights(tc)))


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_a_non_finite_learning_rate_is_refused_before_the_step():
    for lr in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="learning_rate must be a finite number >= 0"):
            arl.AdamParams(learning_rate=lr)


def test_a_collapse_to_the_uniform_distribution_is_warned_about(service):
    """SFT moves the model off its near-uniform start; a learning rate of 1e3 then flattens it to the
    uniform distribution, and the engine warns once (a random start, already uniform, is not warned about)."""
    from arl.rollout import sft_datum

    tc = service.create_full_training_client(TINY, seed=0)
    datum = sft_datum([1, 2, 3], [4, 5, 6, 7])
    for _ in range(30):
        tc.forward_backward([datum], "cross_entropy").result()
        tc.optim_step(arl.AdamParams(learning_rate=3e-3)).result()
    with pytest.warns(RuntimeWarning, match="the policy looks collapsed"):
        for _ in range(6):
            tc.forward_backward([datum], "cross_entropy").result()
            tc.optim_step(arl.AdamParams(learning_rate=1e3)).result()
