"""Conversion between the Tinker wire forms (protobuf `tinker_public`, the SDK's pydantic JSON types) and
arl's own types. Every error names the field it found wrong, as `data[i].loss_fn_inputs['x']`, so the SDK
user reads where their request went wrong.
"""

from __future__ import annotations

import math

import numpy as np
from tinker import types as tt
from tinker.proto import tinker_public_pb2 as pb

from .. import types as at

_PROTO_DTYPES = {pb.DTYPE_FLOAT32: np.dtype("<f4"), pb.DTYPE_INT64: np.dtype("<i8"), pb.DTYPE_INT32: np.dtype("<i4")}
REDUCTIONS = ("mean", "sum", "min", "max", "slack", "hash2", "unique")
MISSING_TOPK = (0, -99999.0)
"""What a TopkLogprobs cell holds where a position has fewer than k entries (the SDK's convention)."""


# -- requests ---------------------------------------------------------------------------------
def _frombuffer(field: str, raw: bytes, dtype: np.dtype) -> np.ndarray:
    if len(raw) % dtype.itemsize:
        raise ValueError(f"{field}: {len(raw)} bytes is not a whole number of {dtype.name} values; "
                         f"send the array as little-endian {dtype.name} bytes")
    return np.frombuffer(raw, dtype=dtype)


def _tensor(field: str, msg: pb.Tensor) -> np.ndarray:
    if msg.dtype == pb.DTYPE_BFLOAT16:
        raw = _frombuffer(field, msg.dense, np.dtype("<u2"))
        values = (raw.astype(np.uint32) << 16).view(np.float32)
    elif msg.dtype in _PROTO_DTYPES:
        values = None
    else:
        raise ValueError(f"{field}: dtype {msg.dtype} is not supported; use float32 or int64")
    shape = list(msg.shape)
    if msg.WhichOneof("encoding") == "sparse_csr":
        if len(shape) != 2:
            raise ValueError(f"{field}: a sparse CSR tensor needs a 2-D shape, got {shape}")
        csr = msg.sparse_csr
        vals = _frombuffer(f"{field}.values", csr.values, _PROTO_DTYPES[msg.dtype])
        crow = _frombuffer(f"{field}.crow_indices", csr.crow_indices, np.dtype("<i8"))
        col = _frombuffer(f"{field}.col_indices", csr.col_indices, np.dtype("<i8"))
        if len(crow) != shape[0] + 1 or len(col) != len(vals) or (len(col) and col.max() >= shape[1]):
            raise ValueError(f"{field}: sparse CSR indices do not fit shape {shape}")
        dense = np.zeros(shape, dtype=vals.dtype)
        rows = np.repeat(np.arange(shape[0]), np.diff(crow))
        dense[rows, col] = vals
        return dense
    if values is None:
        values = _frombuffer(field, msg.dense, _PROTO_DTYPES[msg.dtype])
    if shape and math.prod(shape) != values.size:
        raise ValueError(f"{field}: shape {shape} holds {math.prod(shape)} values but {values.size} were sent")
    return values.reshape(shape) if shape else values


def _chunk(field: str, msg: pb.Chunk):
    kind = msg.WhichOneof("chunk")
    if kind == "encoded_text":
        return at.EncodedTextChunk(tokens=_frombuffer(f"{field}.tokens", msg.encoded_text.tokens, np.dtype("<i4")).tolist())
    if kind == "image":
        img = msg.image
        if not img.HasField("expected_tokens"):
            raise ValueError(f"{field}: an image chunk needs expected_tokens (the number of positions the image "
                             "takes); set ImageChunk.expected_tokens")
        return at.ImageChunk(data=img.data, format=img.format, expected_tokens=img.expected_tokens)
    raise ValueError(f"{field}: {kind or 'an empty'} chunk is not supported by arl serve; send encoded_text or image chunks")


def _spans(msgs) -> list | None:
    """Provenance spans (what `stable_reinforce` reads); None when the datum has none."""
    spans = []
    for msg in msgs:
        kind = msg.WhichOneof("span")
        cls = at.SampledProvenanceSpan if kind == "sampled_tokens" else at.PromptProvenanceSpan
        arm = getattr(msg, kind or "prompt_tokens")
        spans.append(cls(sequence_id=arm.sequence_id, offset=arm.offset, length=arm.length))
    return spans or None


def datum_from_proto(i: int, msg: pb.Datum) -> at.Datum:
    """An arl Datum; a wrong length or a bad array raises ValueError naming `data[i]`."""
    try:
        chunks = [_chunk(f"data[{i}].model_input.chunks[{j}]", c) for j, c in enumerate(msg.model_input)]
        inputs = {name: _tensor(f"data[{i}].loss_fn_inputs[{name!r}]", t) for name, t in msg.loss_fn_inputs.items()}
        return at.Datum(model_input=at.ModelInput(chunks=chunks), loss_fn_inputs=inputs,
                        model_input_spans=_spans(msg.model_input_spans),
                        loss_fn_input_spans=_spans(msg.loss_fn_input_spans))
    except (ValueError, TypeError) as e:
        message = str(e)
        raise ValueError(message if message.startswith(f"data[{i}]") else f"data[{i}]: {message}") from None


def loss_config_from_proto(msg: pb.ForwardBackwardRequest) -> dict:
    """`loss_fn_config_v2` when sent (it also carries strings), else the float-only legacy map."""
    if msg.loss_fn_config_v2:
        return {k: (v.text if v.WhichOneof("value") == "text" else v.number) for k, v in msg.loss_fn_config_v2.items()}
    return dict(msg.loss_fn_config)


def model_input_from_json(field: str, prompt: tt.ModelInput) -> at.ModelInput:
    chunks = []
    for j, c in enumerate(prompt.chunks):
        if isinstance(c, tt.EncodedTextChunk):
            chunks.append(at.EncodedTextChunk(tokens=list(c.tokens)))
        elif isinstance(c, tt.ImageChunk) and c.expected_tokens is not None:
            chunks.append(at.ImageChunk(data=c.data, format=c.format, expected_tokens=c.expected_tokens))
        else:
            raise ValueError(f"{field}.chunks[{j}]: a {c.type} chunk is not supported by arl serve; send "
                             "encoded_text chunks, or image chunks with expected_tokens set")
    return at.ModelInput(chunks=chunks)


def sampling_params_from_json(p: tt.SamplingParams) -> at.SamplingParams:
    try:
        return at.SamplingParams(max_tokens=p.max_tokens, seed=p.seed, stop=p.stop, temperature=p.temperature,
                                 top_k=p.top_k, top_p=p.top_p)
    except ValueError as e:
        raise ValueError(f"sampling_params: {e}") from None


def adam_from_json(p: tt.AdamParams) -> at.AdamParams:
    try:
        return at.AdamParams(learning_rate=p.learning_rate, beta1=p.beta1, beta2=p.beta2, eps=p.eps,
                             weight_decay=p.weight_decay, grad_clip_norm=p.grad_clip_norm)
    except ValueError as e:
        raise ValueError(f"adam_params: {e}") from None


# -- responses --------------------------------------------------------------------------------
def metric_key(key: str) -> str:
    """A `name:reduction` key, as the SDK's chunk merger needs (it splits on the one colon): arl's own
    keys carry no reduction, so counts and sums get `sum` and everything else (means, ratios) `mean`."""
    if key.count(":") == 1 and key.split(":")[1] in REDUCTIONS:
        return key
    name = key.replace(":", "/")
    return f"{name}:sum" if name.startswith("tokens/") or name.endswith("/sum") else f"{name}:mean"


def forward_backward_to_proto(out: at.ForwardBackwardOutput) -> bytes:
    msg = pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
    for key, value in out.metrics.items():
        msg.metrics[metric_key(key)] = float(value)
    record = msg.loss_fn_outputs.add(type_tag="ArrayRecord", num_datums=len(out.loss_fn_outputs))
    names = out.loss_fn_outputs[0].keys() if out.loss_fn_outputs else ()
    for name in names:
        arrays = [d[name].to_numpy() for d in out.loss_fn_outputs]
        integer = arrays[0].dtype.kind in "iu"
        dtype = np.dtype("<i8") if integer else np.dtype("<f4")
        flat = [np.ascontiguousarray(a, dtype=dtype).reshape(-1) for a in arrays]
        offsets = np.concatenate([[0], np.cumsum([a.nbytes for a in flat])]).astype("<i8")
        record.fields[name].CopyFrom(pb.BatchedTensor(
            data=b"".join(a.tobytes() for a in flat), offsets=offsets.tobytes(),
            dtype=pb.DTYPE_INT64 if integer else pb.DTYPE_FLOAT32, trailing_shape=list(arrays[0].shape[1:])))
    return msg.SerializeToString()


def _topk(rows: list) -> pb.TopkLogprobs:
    k = max((len(r) for r in rows if r), default=0)
    ids = np.full((len(rows), k), MISSING_TOPK[0], dtype="<i4")
    logps = np.full((len(rows), k), MISSING_TOPK[1], dtype="<f4")
    for n, row in enumerate(rows):
        for j, (token, logp) in enumerate(row or ()):
            ids[n, j], logps[n, j] = token, logp
    return pb.TopkLogprobs(token_ids=ids.tobytes(), logprobs=logps.tobytes(), k=k, length=len(rows))


def sample_to_proto(res: at.SampleResponse, last_n: int | None) -> bytes:
    """`prompt_logprobs` as float32 with NaN where a position has none (the first, an image's, and those
    before the last `last_n` when the request asked for only those)."""
    msg = pb.SampleResponse()
    for s in res.sequences:
        msg.sequences.add(stop_reason=pb.STOP_REASON_STOP if s.stop_reason == "stop" else pb.STOP_REASON_LENGTH,
                          tokens=np.asarray(s.tokens, dtype="<i4").tobytes(),
                          logprobs=np.asarray(s.logprobs, dtype="<f4").tobytes())
    if res.prompt_logprobs is not None:
        values = np.array([math.nan if v is None else v for v in res.prompt_logprobs], dtype="<f4")
        if last_n is not None:
            values[: max(len(values) - last_n, 0)] = math.nan
        msg.prompt_logprobs = values.tobytes()
    if res.topk_prompt_logprobs is not None:
        msg.topk_prompt_logprobs.CopyFrom(_topk(res.topk_prompt_logprobs))
    return msg.SerializeToString()
