"""`arl ARGS...` with a record of the arl functions it executed (in every thread):

    python tests/traced_run.py TRACE.json run grpo --preset smoke ...

TRACE.json is a list of [file, first line, function name], the code path of the run; tests read it to
check that every config field a chapter lists in its `--help` is read on that path.
"""

import json
import sys
import threading
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src" / "arl")
seen: set[tuple[str, int, str]] = set()


def record(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.startswith(SRC):
        seen.add((frame.f_code.co_filename, frame.f_code.co_firstlineno, frame.f_code.co_name))


if __name__ == "__main__":
    sys.setprofile(record)
    threading.setprofile(record)
    try:
        from arl.cli import main

        code = main(sys.argv[2:])
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        Path(sys.argv[1]).parent.mkdir(parents=True, exist_ok=True)
        Path(sys.argv[1]).write_text(json.dumps(sorted(seen)))
    sys.exit(code)
