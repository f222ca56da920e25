"""Images in and out of a `ModelInput`: the client side (an image's `ImageChunk`, a rendered chat
prompt split at its `<|image_pad|>` placeholders) and the engine side (a model input's token ids with
each image expanded to its positions, and the pixel patches the vision tower reads).

The count of positions an image takes is the model's image processor's, computed as the reference
lab computes it: `get_number_of_image_patches(h, w) // merge_size**2` (Qwen2-VL merges 2x2 patches
into one position). A client that gets it wrong would misalign every datum, so the engine recomputes
it and refuses a mismatch before any work starts.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from collections.abc import Sequence

import torch

from ..types import EncodedTextChunk, ImageChunk, ModelInput

IMAGE_PAD = "<|image_pad|>"
ENCODED_CACHE = 256
"""Encoded images kept per model: a group's datums and samples all share their prompt's image."""


def open_image(data: bytes, field: str = "ImageChunk.data"):
    """The decoded image as RGB (transparency composited on white, as the reference lab does), or a
    ValueError naming `field` when the bytes are not a readable image."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(bytes(data)))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise ValueError(f"{field}: the image cannot be decoded ({e}); pass complete PNG or JPEG file bytes") from e
    if image.mode in ("RGBA", "LA", "P"):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    return image.convert("RGB")


def merge_size(processor) -> int:
    return int(getattr(processor, "merge_size", 1) or 1)


def expected_tokens(processor, width: int, height: int) -> int:
    """Positions a `width` x `height` image takes in the model's context."""
    return processor.get_number_of_image_patches(height, width) // merge_size(processor) ** 2


def image_chunk(data: bytes, processor) -> ImageChunk:
    """An `ImageChunk` of encoded PNG or JPEG bytes, with `expected_tokens` from the model's processor."""
    fmt = "png" if bytes(data[:8]) == b"\x89PNG\r\n\x1a\n" else "jpeg" if bytes(data[:3]) == b"\xff\xd8\xff" else None
    if fmt is None:
        raise ValueError(f"image_chunk: the bytes are neither PNG nor JPEG (header {bytes(data[:8])!r})")
    width, height = open_image(data, "image_chunk(data)").size
    return ImageChunk(data=bytes(data), format=fmt, expected_tokens=expected_tokens(processor, width, height))


def split_at_image_pads(tokens: Sequence[int], images: Sequence[ImageChunk], image_pad_id: int) -> ModelInput:
    """A rendered chat prompt (one `<|image_pad|>` token per image, as the chat template writes it) as
    text / image / text chunks, the i-th placeholder replaced by `images[i]`."""
    pads = [i for i, t in enumerate(tokens) if t == image_pad_id]
    if len(pads) != len(images):
        raise ValueError(f"split_at_image_pads: the prompt has {len(pads)} {IMAGE_PAD} placeholders for "
                         f"{len(images)} images; render one image part per image")
    chunks, start = [], 0
    for pad, image in zip(pads, images):
        if pad > start:
            chunks.append(EncodedTextChunk(tokens=list(tokens[start:pad])))
        chunks.append(image)
        start = pad + 1
    if start < len(tokens):
        chunks.append(EncodedTextChunk(tokens=list(tokens[start:])))
    return ModelInput(chunks=chunks)


def as_model_input(prompt: ModelInput | Sequence[int]) -> ModelInput:
    """A prompt given as token ids or as a `ModelInput` (with images), as a `ModelInput`."""
    return prompt if isinstance(prompt, ModelInput) else ModelInput.from_ints(list(prompt))


def with_images(ids: Sequence[int], images: Sequence[ImageChunk], image_pad_id: int) -> ModelInput:
    """Token ids in which each image already takes its `expected_tokens` `<|image_pad|>` positions (a
    multi-turn stream, as `ImageEncoder.expand` lays one out) as text / image chunks: the i-th run of
    placeholders becomes `images[i]`. The inverse of `expand` on the ids."""
    chunks: list = []
    text: list[int] = []
    queue, i = list(images), 0
    while i < len(ids):
        if ids[i] != image_pad_id:
            text.append(ids[i])
            i += 1
            continue
        if not queue:
            raise ValueError(f"with_images: an {IMAGE_PAD} at position {i} has no image left to stand for")
        image = queue.pop(0)
        run = ids[i:i + image.expected_tokens]
        if len(run) < image.expected_tokens or any(t != image_pad_id for t in run):
            raise ValueError(f"with_images: the image at position {i} needs {image.expected_tokens} {IMAGE_PAD} "
                             "positions in a row (expand each placeholder to the image's expected_tokens)")
        if text:
            chunks.append(EncodedTextChunk(tokens=text))
            text = []
        chunks.append(image)
        i += image.expected_tokens
    if queue:
        raise ValueError(f"with_images: {len(queue)} images are left without {IMAGE_PAD} positions")
    if text:
        chunks.append(EncodedTextChunk(tokens=text))
    return ModelInput(chunks=chunks)


def extend(prompt: ModelInput | Sequence[int], tokens: Sequence[int], images: Sequence[ImageChunk] = (),
           image_pad_id: int | None = None) -> ModelInput:
    """`prompt` followed by `tokens` (merged into a trailing text chunk). `images`: those inside `tokens`
    (a tool's image observations), each on its `expected_tokens` positions of `image_pad_id`."""
    head = as_model_input(prompt)
    if not tokens:
        return head
    if images and image_pad_id is None:
        raise ValueError("extend: images inside the tokens need the model's image_pad_id")
    tail = list(with_images(tokens, images, image_pad_id).chunks) if images else [EncodedTextChunk(tokens=list(tokens))]
    chunks = list(head.chunks)
    if chunks and isinstance(chunks[-1], EncodedTextChunk) and isinstance(tail[0], EncodedTextChunk):
        chunks[-1] = EncodedTextChunk(tokens=[*chunks[-1].tokens, *tail.pop(0).tokens])
    return ModelInput(chunks=chunks + tail)


class ImageEncoder:
    """A vision model's side of image chunks: ids with each image expanded to `expected_tokens`
    `<|image_pad|>` positions, the token types Qwen2-VL's multimodal RoPE reads (0 text, 1 image), and
    the processor's pixel patches with each image's (t, h, w) patch grid."""

    def __init__(self, processor, image_pad_id: int):
        self.processor = processor
        self.image_pad_id = image_pad_id
        self._encoded: OrderedDict[bytes, tuple[torch.Tensor, torch.Tensor, tuple[int, int]]] = OrderedDict()

    def encode(self, chunk: ImageChunk, field: str = "ImageChunk") -> tuple[torch.Tensor, torch.Tensor]:
        """(pixel patches [N, D], grid [3]) of one image, checking its `expected_tokens`."""
        hit = self._encoded.get(chunk.data)
        if hit is None:
            image = open_image(chunk.data, f"{field}.data")
            out = self.processor(images=[image], return_tensors="pt")
            hit = self._encoded[chunk.data] = (out["pixel_values"], out["image_grid_thw"][0], image.size)
            if len(self._encoded) > ENCODED_CACHE:
                self._encoded.popitem(last=False)
        self._encoded.move_to_end(chunk.data)
        pixel_values, grid, (width, height) = hit
        n = int(grid.prod()) // merge_size(self.processor) ** 2
        if n != chunk.expected_tokens:
            raise ValueError(f"{field}.expected_tokens is {chunk.expected_tokens}, but the model's image processor "
                             f"makes {n} positions of this {width}x{height} image; build the chunk with "
                             "arl.models.images.image_chunk(data, processor), which computes it")
        return pixel_values, grid

    def expand(self, model_input: ModelInput, field: str = "model_input"):
        """(ids, token types, images) of a model input: ids with every image as its pad positions."""
        ids: list[int] = []
        types: list[int] = []
        images: list[ImageChunk] = []
        for i, c in enumerate(model_input.chunks):
            if isinstance(c, ImageChunk):
                self.encode(c, f"{field}.chunks[{i}]")
                ids += [self.image_pad_id] * c.expected_tokens
                types += [1] * c.expected_tokens
                images.append(c)
            else:
                ids += c.tokens
                types += [0] * len(c.tokens)
        return ids, types, images

    def pixels(self, images: Sequence[ImageChunk]) -> tuple[torch.Tensor, torch.Tensor]:
        """The images' patches, concatenated [sum N, D], and grids [n_images, 3], in order."""
        encoded = [self.encode(c) for c in images]
        return torch.cat([p for p, _ in encoded]), torch.stack([g for _, g in encoded])
