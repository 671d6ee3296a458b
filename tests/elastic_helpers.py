"""Worker functions and tiny scripts for the tritensor.elastic tests.

Spawned children import function entrypoints by module name: conftest.py puts tests/ on
sys.path and spawn hands sys.path to the children, so they live here, not in the test files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def echo_fn(msg):
    rank = os.environ["LOCAL_RANK"]
    print(f"o-{msg}-r{rank}")
    print(f"e-{msg}-r{rank}", file=sys.stderr)
    return f"ret-{msg}-r{rank}"


def fail_fn(rank_to_fail, msg):
    if int(os.environ["LOCAL_RANK"]) == rank_to_fail:
        raise ValueError(msg)
    time.sleep(60)  # the other rank hangs: a failure must stop it


def tree_fn(pid_file):
    """Starts a grandchild that ignores SIGTERM too, writes both pids, then hangs ignoring SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "60"])  # inherits the ignored SIGTERM
    with open(pid_file + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.replace(pid_file + ".tmp", pid_file)
    time.sleep(60)


# A worker run as a binary: prints a line to each stream, tagged with its local rank.
# Each line in one write: with Std.NONE both ranks share the console, and unbuffered print()
# writes text and newline separately, so two ranks' lines could interleave ('o-r1o-r0').
ECHO_SCRIPT = ("import os, sys; r = os.environ['LOCAL_RANK']; "
               "sys.stdout.write('o-r' + r + '\\n'); sys.stderr.write('e-r' + r + '\\n')")

# A binary that ignores SIGTERM, starts a grandchild (which inherits the ignored SIGTERM),
# writes both pids to stdout and hangs.
TREE_SCRIPT = ("import os, signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
               "c = subprocess.Popen(['sleep', '60']); print(os.getpid(), c.pid, flush=True); time.sleep(60)")

# A binary whose main is decorated with @record and raises.
RECORD_SCRIPT = """
from tritensor.elastic.multiprocessing.errors import record

@record
def main():
    raise RuntimeError("bad batch 7")

if __name__ == "__main__":
    main()
"""


def rdzv_node(endpoint, run_id, min_nodes, max_nodes, ready_file, conf):
    """Joins a c10d rendezvous (run in a child process), writes a file once joined, then waits."""
    from tritensor.elastic.rendezvous import RendezvousParameters
    from tritensor.elastic.rendezvous.registry import get_rendezvous_handler
    h = get_rendezvous_handler(RendezvousParameters("c10d", endpoint, run_id, min_nodes, max_nodes, **conf))
    with open(ready_file, "w") as f:
        f.write(h.node_id)
    h.next_rendezvous()


ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
            "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "TRITENSOR_COMM_SECRET")


def env_fn():
    """Returns the worker's torchrun environment."""
    return {k: os.environ.get(k) for k in ENV_KEYS}


def flaky_fn():
    """Local rank 0 fails in the first attempt; every worker returns its environment afterwards."""
    if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["LOCAL_RANK"] == "0":
        raise ValueError("first attempt fails")
    return env_fn()


def always_fail_fn():
    raise ValueError("boom on every attempt")


def timer_hang_fn():
    """First attempt hangs inside a 0.5 s timer scope (the watchdog must kill it); then returns."""
    from tritensor.elastic import timer
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        with timer.expires(after=0.5, scope="hang"):
            time.sleep(60)
    with timer.expires(after=30, scope="quick"):
        return os.getpid()


def local_timer_hang_fn(mp_queue):
    from tritensor.elastic import timer
    timer.configure(timer.LocalTimerClient(mp_queue))
    with timer.expires(after=0.3):
        time.sleep(60)


# A training script for the launcher tests: writes its torchrun environment to OUT/<RANK>.<restart>.json,
# fails (exit 3) in attempt 0 when FAIL_FIRST is set, and fails always when FAIL_ALWAYS is set.
ENV_SCRIPT = """
import json, os, sys
from tritensor.elastic.multiprocessing.errors import record
keys = {keys!r}

@record
def main():
    env = {{k: os.environ.get(k) for k in keys}}
    env["argv"] = sys.argv[1:]
    out = os.environ["OUT"]
    with open(os.path.join(out, env["RANK"] + "." + env["TORCHELASTIC_RESTART_COUNT"] + ".json"), "w") as f:
        json.dump(env, f)
    if os.environ.get("FAIL_ALWAYS") or (os.environ.get("FAIL_FIRST") and env["TORCHELASTIC_RESTART_COUNT"] == "0"):
        raise RuntimeError("bad batch in rank " + env["RANK"])

if __name__ == "__main__":
    main()
""".format(keys=ENV_KEYS)

# Writes its pid and a grandchild's pid to OUT/pids.<LOCAL_RANK>, then hangs.
HANG_SCRIPT = """
import os, subprocess, time
c = subprocess.Popen(["sleep", "120"])
p = os.path.join(os.environ["OUT"], "pids." + os.environ["LOCAL_RANK"])
with open(p + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {c.pid}")
os.replace(p + ".tmp", p)
time.sleep(120)
"""

# Runs until the world has WANT workers (then exits 0); records each world size it saw.
GROW_SCRIPT = """
import os, time
out, want = os.environ["OUT"], os.environ["WANT"]
open(os.path.join(out, "seen." + os.environ["WORLD_SIZE"] + "." + os.environ["RANK"]), "w").close()
if os.environ["WORLD_SIZE"] != want:
    time.sleep(120)
"""

# Attempt 0: global rank 0 fails, the others hang; attempt 1: every rank writes OUT/done.<RANK> and exits 0.
ONE_FAILS_SCRIPT = """
import os, sys, time
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    if os.environ["RANK"] == "0":
        sys.exit(3)
    time.sleep(120)
open(os.path.join(os.environ["OUT"], "done." + os.environ["RANK"] + "." + os.environ["GROUP_WORLD_SIZE"]), "w").close()
"""

# Joins the job's process group from the launcher's environment and all-reduces its rank + 1.
ALLREDUCE_SCRIPT = """
import os
import numpy as np
import tritensor as tt
import tritensor.comm as dist
dist.init_process_group("tcp")
t = tt.from_numpy(np.array([dist.get_rank() + 1.0], dtype=np.float32))
dist.all_reduce(t)
with open(os.path.join(os.environ["OUT"], "sum." + os.environ["RANK"]), "w") as f:
    f.write(str(float(t.numpy()[0])))
dist.destroy_process_group()
"""


# Prints a line with "apple" and one without on stdout, and its LOCAL_RANK and CUDA_VISIBLE_DEVICES.
LOGS_SCRIPT = """
import os
r = os.environ["RANK"]
print("apple from", r, flush=True)
print("banana from", r, flush=True)
print("env", r, os.environ["LOCAL_RANK"], os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
"""

# Ignores SIGTERM and SIGUSR1 (a launcher's first signal to its workers), writes OUT/pids.<LOCAL_RANK>, hangs.
STUBBORN_SCRIPT = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
p = os.path.join(os.environ["OUT"], "pids." + os.environ["LOCAL_RANK"])
with open(p + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(p + ".tmp", p)
time.sleep(120)
"""
