"""Loading a local model keeps the process's output (llama-cpp-python's own would silence it).

With `verbose=False`, llama-cpp-python points file descriptors 1 and 2, and `sys.stdout` and
`sys.stderr`, at /dev/null while a model loads: what every other thread writes meanwhile is
lost (abetlen/llama-cpp-python#1874). A process of its own loads the embedded model in a
thread while its main thread writes numbered lines to both, through Python and straight to
the descriptors; every line must arrive, and nothing of llama.cpp's besides.
"""

from __future__ import annotations

import subprocess
import sys

from tests._requires import require_module

require_module("llama_cpp", "local")

WRITER = """
import asyncio, os, sys, threading, time

from parley.models.spec import model_from_spec

model = model_from_spec("local")
started, loaded = threading.Event(), threading.Event()


def load():
    started.set()
    asyncio.run(model.load())
    loaded.set()


thread = threading.Thread(target=load)
thread.start()
started.wait()
count = during = 0
while not loaded.is_set() or during == 0 or count < 20:
    print(f"py-out {count}", flush=True)
    print(f"py-err {count}", file=sys.stderr, flush=True)
    os.write(1, f"fd-out {count}\\n".encode())
    os.write(2, f"fd-err {count}\\n".encode())
    during += not loaded.is_set()
    count += 1
    time.sleep(0.0005)
thread.join()
print(f"wrote {count} during {during}", flush=True)
"""


def test_lines_written_while_a_model_loads_all_arrive() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WRITER],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    *_, summary = done.stdout.splitlines()
    _, count, _, during = summary.split()
    assert int(during) >= 5, summary  # the lines overlapped the load
    lines = set(done.stdout.splitlines()) | set(done.stderr.splitlines())
    for kind in ("py-out", "py-err", "fd-out", "fd-err"):
        missing = [i for i in range(int(count)) if f"{kind} {i}" not in lines]
        assert missing == [], f"{kind}: {len(missing)} of {count} lines lost"
    # llama.cpp's own lines stay quiet: errors only (its log callback), none here.
    written = ("py-", "fd-", "wrote ")
    assert [line for line in lines if not line.startswith(written)] == []
