"""The training process of spindle.run: ``python -m spindle._worker``.

It loads the call that spindle.run shipped with the job (in
$SPINDLE_FILES_DIR), makes it, and hands the result back: into
$SPINDLE_RUN_RESULTS when the job set it (a local master: a directory of
the submitting host), else as marked lines on stdout, which the submitting
Job takes out of the output. An exception propagates: the process exits 1
and its traceback is the stderr tail that JobFailed carries.
"""

import base64
import importlib
import os
import sys

from . import _env
from ._run import MARK, PAYLOAD, RESULTS_ENV, dumps_result, loads

# Base64 characters per marked line. A remote executor passes on lines of
# up to 16 KiB whole and cuts longer ones (executor/process.go), so a
# chunk and its mark must stay well under that.
_CHUNK = 12 * 1024


def _call(spec):
    if "fn" in spec:
        fn = spec["fn"]
    else:
        module, _, name = spec["target"].partition(":")
        fn = importlib.import_module(module)
        for part in name.split("."):
            fn = getattr(fn, part)
    return fn(*spec["args"], **spec["kwargs"])


def main():
    files = _env.files_dir()
    if not files:
        sys.exit("spindle._worker: SPINDLE_FILES_DIR is not set: spindle.run starts this module, not a user")
    with open(os.path.join(files, PAYLOAD), "rb") as f:
        spec = loads(f.read())
    write_result(dumps_result(_call(spec)), _env.rank(), os.environ.get(RESULTS_ENV))


def write_result(result, rank, out):
    """Hand a rank's pickled result back: into directory out when there is one, else as marked lines on stdout."""
    if out and os.path.isdir(out):
        tmp = os.path.join(out, f".rank-{rank}.tmp")
        with open(tmp, "wb") as f:
            f.write(result)
        os.replace(tmp, os.path.join(out, f"rank-{rank}.pkl"))
        return
    text = base64.b64encode(result).decode()
    chunks = [text[i:i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
    sys.stdout.flush()
    for i, c in enumerate(chunks):
        print(f"{MARK} {i}/{len(chunks)} {c}", flush=True)


if __name__ == "__main__":
    main()
