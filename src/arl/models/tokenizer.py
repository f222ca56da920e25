"""The tiny models' tokenizer: a byte-level BPE trained on `corpus.build_corpus()` with Qwen-style
special tokens and a Qwen3-style chat template, so recipes written for Qwen3 format prompts the same
way on a tiny model.

Decisions:
- Byte-level, no normaliser: every string encodes and decodes back exactly, unicode included.
- Digits are split one per token, so numbers tokenise the same way wherever they appear (arithmetic
  tasks need this; a merged " 23" would hide the digits from the model).
- The 12 special tokens take the last ids (2036-2047), as Qwen puts its added tokens after the BPE
  vocabulary; each is one id and is never produced by BPE merges.
- `eos_token` is `<|im_end|>`: the tiny models are chat models, so generation ends with the turn
  (Qwen3's instruct tokenizers do the same). `<|endoftext|>` is the pad token and a second stop id
  in the generation config, as it is for Qwen3 base models.
"""

from __future__ import annotations

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from arl.models.corpus import build_corpus

VOCAB_SIZE = 2048
ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [
    ENDOFTEXT, IM_START, IM_END, "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
]

# Qwen3's template, rewritten: the same system/tools preamble, tool-call and tool-response layout
# and `enable_thinking=False` generation prompt. One deliberate difference: `reasoning_content` of
# earlier assistant turns is kept rather than dropped, so rendering a longer conversation always
# extends the rendering of a shorter one (the multi-turn token stream only grows). Content may be a
# string or a list of `{"type": "text"|"image", ...}` parts; an image becomes
# `<|vision_start|><|image_pad|><|vision_end|>` as in Qwen-VL.
CHAT_TEMPLATE = """\
{%- macro render_content(content) -%}
    {%- if content is string -%}
        {{- content -}}
    {%- elif content is not none -%}
        {%- for part in content -%}
            {%- if part.type in ('image', 'image_url') -%}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
            {%- elif part.type == 'text' -%}
                {{- part.text -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- render_content(messages[0].content) + '\\n\\n' }}
    {%- endif %}
    {{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' }}
    {{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
    {%- for tool in tools %}
        {{- '\\n' + (tool | tojson) }}
    {%- endfor %}
    {{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and ' }}
    {{- 'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n' }}
    {{- '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + render_content(messages[0].content) + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' }}
        {{- render_content(message.content) + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {%- set content = render_content(message.content) %}
        {{- '<|im_start|>assistant\\n' }}
        {%- if message.reasoning_content is string and message.reasoning_content %}
            {{- '<think>\\n' + message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}
        {%- endif %}
        {{- content }}
        {%- for tool_call in message.tool_calls or [] %}
            {%- if content or not loop.first %}
                {{- '\\n' }}
            {%- endif %}
            {%- set call = tool_call.function if tool_call.function is defined else tool_call %}
            {{- '<tool_call>\\n{"name": "' + call.name + '", "arguments": ' }}
            {%- if call.arguments is string %}
                {{- call.arguments }}
            {%- else %}
                {{- call.arguments | tojson }}
            {%- endif %}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + render_content(message.content) + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""


def special_token_id(token: str) -> int:
    """Id of a special token, known without loading the tokenizer (model configs need it)."""
    return VOCAB_SIZE - len(SPECIAL_TOKENS) + SPECIAL_TOKENS.index(token)


def train_tokenizer() -> PreTrainedTokenizerFast:
    """Train the BPE on the generated corpus (0.2 s) and wrap it for `transformers`.

    Called only when a tiny model is built; loading reads the saved `tokenizer.json` instead.
    """
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS),
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(build_corpus(), trainer=trainer)
    learned = bpe.get_vocab_size()
    if learned != VOCAB_SIZE - len(SPECIAL_TOKENS):
        raise RuntimeError(f"BPE learned only {learned} tokens; enlarge the corpus in corpus.py")
    bpe.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    assert all(bpe.token_to_id(t) == special_token_id(t) for t in SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        extra_special_tokens=[t for t in SPECIAL_TOKENS if t not in (IM_END, ENDOFTEXT)],
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
