"""Tasks with fixed train/test splits: generated mini tasks, and loaders for real datasets on disk."""

from arl.data.arithmetic import make_split
from arl.data.gsm8k import load_gsm8k
from arl.data.problem import INSTRUCTION, Problem, format_prompt

__all__ = ["INSTRUCTION", "Problem", "format_prompt", "load_gsm8k", "make_split"]
