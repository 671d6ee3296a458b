"""tritensor-run (python -m tritensor.run): torchrun's flags, standalone jobs, restarts, signals, several nodes."""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from elastic_helpers import (ALLREDUCE_SCRIPT, ENV_SCRIPT, GROW_SCRIPT, HANG_SCRIPT, LOGS_SCRIPT, ONE_FAILS_SCRIPT,
                             STUBBORN_SCRIPT)

from tritensor import run as tr
from tritensor.elastic.multiprocessing import Std

PY = sys.executable
FAST_CONF = "last_call_timeout=0.5,keep_alive_interval=0.5,join_timeout=60"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(args, out, extra_env=None, **kw):
    env = dict(os.environ, OUT=str(out), **(extra_env or {}))
    if "TRITENSOR_COMM_SECRET" not in (extra_env or {}):
        env.pop("TRITENSOR_COMM_SECRET", None)  # the launcher must generate (or demand) one itself
    return subprocess.Popen([PY, "-m", "tritensor.run", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _script(tmp_path, text, name="train.py"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ----------------------------------------------------------------------------- flags

FLAGS = [  # (dash spelling, underscore spelling or None, value, attribute, parsed)
    ("--nnodes", None, "2:4", "nnodes", "2:4"),
    ("--nproc-per-node", "--nproc_per_node", "3", "nproc_per_node", "3"),
    ("--rdzv-backend", "--rdzv_backend", "c10d", "rdzv_backend", "c10d"),
    ("--rdzv-endpoint", "--rdzv_endpoint", "node0:29401", "rdzv_endpoint", "node0:29401"),
    ("--rdzv-id", "--rdzv_id", "job7", "rdzv_id", "job7"),
    ("--rdzv-conf", "--rdzv_conf", "join_timeout=5,x=y", "rdzv_conf", "join_timeout=5,x=y"),
    ("--max-restarts", "--max_restarts", "4", "max_restarts", 4),
    ("--monitor-interval", "--monitor_interval", "0.5", "monitor_interval", 0.5),
    ("--start-method", "--start_method", "fork", "start_method", "fork"),
    ("--role", None, "trainer", "role", "trainer"),
    ("--log-dir", "--log_dir", "/tmp/logs", "log_dir", "/tmp/logs"),
    ("--redirects", "-r", "0:3,1:1", "redirects", "0:3,1:1"),
    ("--tee", "-t", "2", "tee", "2"),
    ("--node-rank", "--node_rank", "1", "node_rank", 1),
    ("--master-addr", "--master_addr", "10.0.0.1", "master_addr", "10.0.0.1"),
    ("--master-port", "--master_port", "1234", "master_port", 1234),
    ("--local-addr", "--local_addr", "10.0.0.2", "local_addr", "10.0.0.2"),
    ("--event-log-handler", "--event_log_handler", "console", "event_log_handler", "console"),
    ("--local-ranks-filter", "--local_ranks_filter", "0,2", "local_ranks_filter", "0,2"),
    ("--duplicate-stdout-filters", "--duplicate_stdout_filters", "a,,b,c", "duplicate_stdout_filters", ["a,b", "c"]),
    ("--duplicate-stderr-filters", "--duplicate_stderr_filters", "x", "duplicate_stderr_filters", ["x"]),
    ("--logs-specs", "--logs_specs", "mine", "logs_specs", "mine"),
    ("--numa-binding", "--numa_binding", "socket", "numa_binding", "socket"),
    ("--signals-to-handle", "--signals_to_handle", "SIGTERM,SIGUSR1", "signals_to_handle", "SIGTERM,SIGUSR1"),
    ("--shutdown-timeout", "--shutdown_timeout", "5", "shutdown_timeout", 5),
]
# Every option of torch 2.13's torchrun (sorted(o for a in get_args_parser()._actions for o in a.option_strings)).
TORCHRUN_OPTIONS = [
    "--duplicate-stderr-filters", "--duplicate-stdout-filters", "--duplicate_stderr_filters",
    "--duplicate_stdout_filters", "--event-log-handler", "--event_log_handler", "--help", "--local-addr",
    "--local-ranks-filter", "--local_addr", "--local_ranks_filter", "--log-dir", "--log_dir", "--logs-specs",
    "--logs_specs", "--master-addr", "--master-port", "--master_addr", "--master_port", "--max-restarts",
    "--max_restarts", "--module", "--monitor-interval", "--monitor_interval", "--nnodes", "--no-python",
    "--no_python", "--node-rank", "--node_rank", "--nproc-per-node", "--nproc_per_node", "--numa-binding",
    "--numa_binding", "--rdzv-backend", "--rdzv-conf", "--rdzv-endpoint", "--rdzv-id", "--rdzv_backend",
    "--rdzv_conf", "--rdzv_endpoint", "--rdzv_id", "--redirects", "--role", "--run-path", "--run_path",
    "--shutdown-timeout", "--shutdown_timeout", "--signals-to-handle", "--signals_to_handle", "--standalone",
    "--start-method", "--start_method", "--tee", "--virtual-local-rank", "--virtual_local_rank", "-h", "-m", "-r",
    "-t"]


def test_every_torchrun_option_is_there():
    """Ten of torchrun's flags were once missing (--local-ranks-filter, --logs-specs ...)."""
    ours = {o for a in tr.get_args_parser()._actions for o in a.option_strings}
    assert sorted(set(TORCHRUN_OPTIONS) - ours) == []


@pytest.mark.parametrize("flag,alt,value,attr,parsed", FLAGS, ids=[f[0] for f in FLAGS])
def test_every_valued_flag_both_spellings(flag, alt, value, attr, parsed):
    for spelling in filter(None, (flag, alt)):
        ns = tr.parse_args([spelling, value, "train.py", "--lr", "0.1"])
        assert getattr(ns, attr) == parsed
        assert ns.training_script == "train.py" and ns.training_script_args == ["--lr", "0.1"]
        ns = tr.parse_args([f"{spelling}={value}", "train.py"]) if spelling.startswith("--") else ns
        assert getattr(ns, attr) == parsed


def test_defaults_and_switches(monkeypatch):
    ns = tr.parse_args(["train.py"])
    assert (ns.nnodes, ns.nproc_per_node, ns.rdzv_backend, ns.rdzv_endpoint, ns.rdzv_id, ns.rdzv_conf) == \
        ("1:1", "1", "static", "", "none", "")
    assert (ns.max_restarts, ns.monitor_interval, ns.start_method, ns.role, ns.log_dir) == \
        (0, 0.1, "spawn", "default", None)
    assert (ns.redirects, ns.tee, ns.node_rank, ns.master_addr, ns.master_port) == ("0", "0", 0, "127.0.0.1", 29500)
    assert not (ns.standalone or ns.module or ns.no_python or ns.run_path)
    for flags, attr in ((["--standalone"], "standalone"), (["-m"], "module"), (["--module"], "module"),
                        (["--no-python"], "no_python"), (["--no_python"], "no_python"),
                        (["--run-path"], "run_path"), (["--run_path"], "run_path")):
        assert getattr(tr.parse_args(flags + ["x"]), attr) is True
    # the script's own flags are not the launcher's
    ns = tr.parse_args(["--nnodes", "2", "train.py", "--nnodes", "9", "--standalone"])
    assert ns.nnodes == "2" and ns.training_script_args == ["--nnodes", "9", "--standalone"] and not ns.standalone
    monkeypatch.setenv("PET_NPROC_PER_NODE", "5")
    monkeypatch.setenv("PET_STANDALONE", "1")
    ns = tr.parse_args(["x"])
    assert ns.nproc_per_node == "5" and ns.standalone is True


def test_config_from_args(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cfg, cmd, args = tr.config_from_args(tr.parse_args(
        ["--nnodes", "2:3", "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:5",
         "--rdzv-conf", "join_timeout=7,last_call_timeout=1", "--max-restarts", "3", "-r", "0:3", "-t", "1",
         "--role", "w", "train.py", "a"]))
    assert (cfg.min_nodes, cfg.max_nodes, cfg.nproc_per_node, cfg.rdzv_endpoint, cfg.max_restarts) == \
        (2, 3, 2, "h:5", 3)
    assert cfg.rdzv_configs["join_timeout"] == "7" and cfg.rdzv_configs["last_call_timeout"] == "1"
    assert cfg.redirects == {0: Std.ALL} and cfg.tee == Std.OUT and cfg.role == "w"
    assert cmd == PY and args == ["-u", "train.py", "a"] and os.environ["OMP_NUM_THREADS"] == "1"
    cfg, cmd, args = tr.config_from_args(tr.parse_args(["--node-rank", "1", "--nnodes", "2", "-m", "pkg.mod"]))
    assert cfg.rdzv_backend == "static" and cfg.rdzv_endpoint == "127.0.0.1:29500" and cfg.rdzv_configs["rank"] == 1
    assert args == ["-u", "-m", "pkg.mod"]
    _, cmd, args = tr.config_from_args(tr.parse_args(["--no-python", "echo", "hi"]))
    assert (cmd, args) == ("echo", ["hi"])
    _, cmd, args = tr.config_from_args(tr.parse_args(["--run-path", "t.py", "x"]))
    assert cmd is tr.run_script_path and args == ["t.py", "x"]
    assert tr.determine_local_world_size("cpu") == os.cpu_count()
    assert tr.determine_local_world_size("auto") >= 1 and tr.determine_local_world_size("4") == 4
    assert tr.parse_min_max_nnodes("3") == (3, 3) and tr.parse_min_max_nnodes("1:4") == (1, 4)


def test_log_signal_and_device_flags_reach_the_config(monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<${rank}>")
    monkeypatch.delenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", raising=False)
    cfg, _, _ = tr.config_from_args(tr.parse_args(
        ["--local-ranks-filter", "0,2", "--event-log-handler", "console", "--duplicate-stdout-filters", "a,b",
         "--signals-to-handle", "SIGTERM,SIGUSR1", "--virtual-local-rank", "--nproc-per-node", "3", "x.py"]))
    assert cfg.local_ranks_filter == {0, 2} and cfg.event_log_handler == "console"
    assert cfg.duplicate_stdout_filters == ["a", "b"] and cfg.duplicate_stderr_filters is None
    assert cfg.signals_to_handle == "SIGTERM,SIGUSR1" and cfg.virtual_local_rank is True
    assert cfg.log_line_prefix_template == "<${rank}>" and cfg.shutdown_timeout == 30
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7")
    assert tr.config_from_args(tr.parse_args(["x.py"]))[0].shutdown_timeout == 7
    assert tr.config_from_args(tr.parse_args(["--shutdown-timeout", "2", "x.py"]))[0].shutdown_timeout == 2


@pytest.mark.parametrize("argv,match", [
    (["--logs-specs", "mine"], "--logs-specs mine: tritensor has no LogsSpecs"),
    (["--numa-binding", "node"], "--numa-binding node: tritensor-run does not bind"),
    (["--local-ranks-filter", "0,x"], "--local-ranks-filter must be a comma-separated list"),
    (["--local-ranks-filter", "-1"], "--local-ranks-filter must be"),
    (["--event-log-handler", "nope"], "--event-log-handler: unknown events destination 'nope'"),
    (["--signals-to-handle", "SIGTERM,SIGNOPE"], "--signals-to-handle: 'SIGNOPE' is not a signal"),
    (["--signals-to-handle", "SIGKILL"], "--signals-to-handle: 'SIGKILL' is not a signal that can be handled"),
    (["--shutdown-timeout", "-1"], "--shutdown-timeout: expected seconds >= 0"),
], ids=["logs-specs", "numa", "filter", "filter-negative", "handler", "signal", "sigkill", "timeout"])
def test_refused_and_bad_log_signal_flags_are_named(argv, match):
    with pytest.raises(ValueError, match=match):
        tr.config_from_args(tr.parse_args(argv + ["x.py"]))
    with pytest.raises(SystemExit) as e:  # the console script: exit 2, before any process starts
        tr.main(argv + ["x.py"])
    assert e.value.code == 2


def test_virtual_local_rank_needs_a_gpu_per_worker(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(ValueError, match="--virtual-local-rank: 2 workers per node"):
        tr.config_from_args(tr.parse_args(["--virtual-local-rank", "--nproc-per-node", "2", "x.py"]))


def test_bad_flags():
    with pytest.raises(RuntimeError, match="MIN:MAX"):
        tr.parse_min_max_nnodes("a:b")
    with pytest.raises(ValueError, match="Unsupported nproc_per_node value: many"):
        tr.determine_local_world_size("many")
    with pytest.raises(ValueError, match="--no-python.*--module"):
        tr.config_from_args(tr.parse_args(["--no-python", "-m", "x"]))
    with pytest.raises(ValueError, match="--rdzv-conf"):
        tr.config_from_args(tr.parse_args(["--rdzv-conf", "novalue", "x"]))
    with pytest.raises(SystemExit):
        tr.parse_args(["--start-method", "teleport", "x"])
    with pytest.raises(SystemExit) as e:
        tr.main(["--standalone", "--nnodes", "2", "x.py"])
    assert e.value.code == 2


# ----------------------------------------------------------------------------- jobs

def test_standalone_two_workers_generated_secret(tmp_path):
    script = _script(tmp_path, ENV_SCRIPT)
    p = _launch(["--standalone", "--nproc-per-node", "2", "--log-dir", str(tmp_path / "logs"), script, "--lr", "1"],
                tmp_path)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    envs = {r: json.load(open(tmp_path / f"{r}.0.json")) for r in ("0", "1")}
    secret = envs["0"]["TRITENSOR_COMM_SECRET"]
    assert secret and envs["1"]["TRITENSOR_COMM_SECRET"] == secret  # generated, shared, via the environment
    assert secret not in " ".join(envs["0"]["argv"]) and envs["0"]["argv"] == ["--lr", "1"]
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"2"} and envs["1"]["LOCAL_RANK"] == "1"
    assert os.path.isdir(tmp_path / "logs" / "attempt_0" / "1")


def test_restart_then_give_up(tmp_path):
    script = _script(tmp_path, ENV_SCRIPT)
    p = _launch(["--standalone", "--nproc_per_node=1", "--max-restarts=1", script], tmp_path, {"FAIL_FIRST": "1"})
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert sorted(os.listdir(tmp_path)) == ["0.0.json", "0.1.json", "train.py"]
    p = _launch(["--standalone", "--max-restarts", "1", "--log-dir", str(tmp_path / "L"), script], tmp_path,
                {"FAIL_ALWAYS": "1"})
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1
    assert "FAILED" in err and "Root Cause" in err and "bad batch in rank 0" in err
    assert f"\n{script} FAILED\n" in err and f"{PY} FAILED" not in err  # torchrun names the script
    assert str(tmp_path / "L" / "attempt_1" / "0" / "error.json") in err


def test_console_filter_prefix_duplicates_and_virtual_local_rank(tmp_path):
    """--local-ranks-filter 1: only rank 1 on the console, every rank in its log file;
    TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: the prefix; --duplicate-stdout-filters apple: rank 1's
    apple line in filtered_stdout.log; --virtual-local-rank: LOCAL_RANK 0, the worker's own GPU."""
    script = _script(tmp_path, LOGS_SCRIPT)
    logs = tmp_path / "logs"
    env = {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "<${role_name}:${rank}>"}
    p = _launch(["--standalone", "--nproc-per-node", "2", "--tee", "3", "--log-dir", str(logs),
                 "--local-ranks-filter", "1", "--duplicate-stdout-filters", "apple", "--virtual-local-rank",
                 "--role", "t", script], tmp_path, env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert sorted(lines) == ["<t:1>apple from 1", "<t:1>banana from 1", "<t:1>env 1 0 1"], out
    assert (logs / "attempt_0" / "0" / "stdout.log").read_text().splitlines()[0] == "apple from 0"
    assert (logs / "attempt_0" / "filtered_stdout.log").read_text() == "<t:1>apple from 1\n"
    assert (logs / "attempt_0" / "0" / "stdout.log").read_text().splitlines()[2] == "env 0 0 0"


def test_shutdown_timeout_and_signals_to_handle(tmp_path):
    """--signals-to-handle SIGUSR1: the launcher stops its workers on SIGUSR1 (it sends them the
    same signal) and exits 128+10; --shutdown-timeout 1: a worker ignoring it is killed after
    1 s, not 30."""
    script = _script(tmp_path, STUBBORN_SCRIPT)
    p = _launch(["--standalone", "--nproc-per-node", "1", "--signals-to-handle", "SIGTERM,SIGUSR1",
                 "--shutdown-timeout", "1", script], tmp_path)
    deadline = time.monotonic() + 60
    while not os.path.exists(tmp_path / "pids.0") and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = int(open(tmp_path / "pids.0").read())
    start = time.monotonic()
    p.send_signal(signal.SIGUSR1)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGUSR1, err
    assert 1.0 <= time.monotonic() - start < 15, err  # killed after the 1 s grace (the default: 30)
    assert _state(pid) == "gone"


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_launcher_leaves_no_process(tmp_path, sig):
    script = _script(tmp_path, HANG_SCRIPT)
    p = _launch(["--standalone", "--nproc-per-node", "2", script], tmp_path)
    deadline = time.monotonic() + 60
    while len(glob.glob(str(tmp_path / "pids.?"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(x) for f in sorted(glob.glob(str(tmp_path / "pids.?"))) for x in open(f).read().split()]
    assert len(pids) == 4 and all(_state(x) not in ("gone", "Z") for x in pids)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_state(x) != "gone" for x in pids):
        time.sleep(0.05)
    assert {x: _state(x) for x in pids} == {x: "gone" for x in pids}


def test_two_nodes_one_rendezvous_over_loopback(tmp_path):
    script = _script(tmp_path, ENV_SCRIPT)
    port = _free_port()
    common = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
              f"127.0.0.1:{port}", "--rdzv-id", "two", "--rdzv-conf", FAST_CONF, script]
    secret = {"TRITENSOR_COMM_SECRET": "shared-by-both-nodes"}
    ps = [_launch(common, tmp_path, secret) for _ in range(2)]
    errs = [p.communicate(timeout=120)[1] for p in ps]
    assert [p.returncode for p in ps] == [0, 0], errs
    assert not any("could not reach the store" in e for e in errs), errs  # the host waited for the other
    envs = [json.load(open(tmp_path / f"{r}.0.json")) for r in ("0", "1")]
    assert {e["GROUP_RANK"] for e in envs} == {"0", "1"} and {e["WORLD_SIZE"] for e in envs} == {"2"}
    assert len({e["MASTER_PORT"] for e in envs}) == 1 and envs[0]["TORCHELASTIC_RUN_ID"] == "two"


def test_static_two_nodes_workers_all_reduce(tmp_path):
    """The static backend (--node-rank, --master-port): 2 nodes x 2 workers join one process group
    from the launcher's environment (MASTER_ADDR/PORT, RANK, WORLD_SIZE, the secret)."""
    script = _script(tmp_path, ALLREDUCE_SCRIPT)
    port = _free_port()
    ps = [_launch(["--nnodes", "2", "--node_rank", str(r), "--master_port", str(port), "--nproc-per-node", "2",
                   script], tmp_path, {"TRITENSOR_COMM_SECRET": "static"}) for r in (0, 1)]
    errs = [p.communicate(timeout=180)[1] for p in ps]
    assert [p.returncode for p in ps] == [0, 0], errs
    assert {open(f).read() for f in tmp_path.glob("sum.*")} == {"10.0"} and len(list(tmp_path.glob("sum.*"))) == 4


def test_failure_on_one_node_restarts_both(tmp_path):
    """Node A's worker fails; A rejoins a new round, B sees it waiting and restarts its hung worker too."""
    script = _script(tmp_path, ONE_FAILS_SCRIPT)
    common = ["--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "1", "--rdzv-backend", "c10d",
              "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", "--rdzv-id", "ft", "--rdzv-conf", FAST_CONF, script]
    ps = [_launch(common, tmp_path, {"TRITENSOR_COMM_SECRET": "ft"}) for _ in range(2)]
    errs = [p.communicate(timeout=120)[1] for p in ps]
    assert [p.returncode for p in ps] == [0, 0], errs
    assert sorted(f.name for f in tmp_path.glob("done.*")) == ["done.0.2", "done.1.2"]


def test_several_nodes_need_a_secret(tmp_path):
    p = _launch(["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}",
                 _script(tmp_path, ENV_SCRIPT)], tmp_path)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "TRITENSOR_COMM_SECRET" in err


def test_unreachable_endpoint_is_a_clear_error(tmp_path, capsys):
    port = _free_port()
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as e:
        tr.main(["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-conf",
                 "read_timeout=1,is_host=0", _script(tmp_path, ENV_SCRIPT)])
    assert e.value.code == 1 and time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert "rendezvous failed: RendezvousConnectionError" in err and f"127.0.0.1:{port}" in err


def test_third_node_joins_between_restarts(tmp_path):
    """--nnodes 2:3: two nodes start with world 2; a third arrives; all restart into world 3."""
    script = _script(tmp_path, GROW_SCRIPT)
    port = _free_port()
    common = ["--nnodes", "2:3", "--nproc-per-node", "1", "--max-restarts", "3", "--rdzv-backend", "c10d",
              "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "grow", "--rdzv-conf", FAST_CONF, script]
    env = {"TRITENSOR_COMM_SECRET": "s3", "WANT": "3"}
    ps = [_launch(common, tmp_path, env) for _ in range(2)]
    deadline = time.monotonic() + 90
    while len(glob.glob(str(tmp_path / "seen.2.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(glob.glob(str(tmp_path / "seen.2.*"))) == 2
    ps.append(_launch(common, tmp_path, env))
    errs = [p.communicate(timeout=120)[1] for p in ps]
    assert [p.returncode for p in ps] == [0, 0, 0], errs
    assert sorted(os.path.basename(f) for f in glob.glob(str(tmp_path / "seen.3.*"))) == \
        ["seen.3.0", "seen.3.1", "seen.3.2"]


# ----------------------------------------------------------------------------- the digits example

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "train_digits.py")


def _example():
    import importlib.util
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_checkpoint_round_trip(tmp_path):
    """What a restarted worker resumes from: the weights and BatchNorm statistics, Adam's moments and
    step, the LR scheduler's position, the GradScaler's scale, the epoch."""
    import numpy as np
    import tritensor as tt
    ex = _example()
    # On the default device, as the example's workers run (cuda in the GPU-mode run of the suite).
    dev = tt.get_default_device()
    tt.manual_seed(0)
    model = ex.make_model()
    opt = tt.optim.Adam(model.parameters(), lr=1e-2)
    sched = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    scaler = tt.amp.GradScaler(dev.type, init_scale=1024.0)
    x = tt.from_numpy(np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype(np.float32)).to(dev)
    y = tt.from_numpy(np.array([0, 1, 2, 3], dtype=np.int64)).to(dev)
    scaler.scale(tt.nn.CrossEntropyLoss()(model(x), y)).backward()
    scaler.step(opt)
    scaler.update(512.0)
    sched.step()
    path = str(tmp_path / "ck.safetensors")
    ex.save_checkpoint(path, model, opt, 3, sched, scaler)
    tt.manual_seed(1)
    model2 = ex.make_model()
    opt2 = tt.optim.Adam(model2.parameters(), lr=1e-2)
    sched2 = tt.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=4)
    scaler2 = tt.amp.GradScaler(dev.type)
    assert ex.load_checkpoint(path, model2, opt2, str(dev), sched2, scaler2) == 3
    state, state2 = model.state_dict(), model2.state_dict()
    assert state.keys() == state2.keys() and "1.running_var" in state
    for k in state:
        np.testing.assert_array_equal(state[k].numpy(), state2[k].numpy(), err_msg=k)
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert s1.keys() == s2.keys() and all(float(s2[i]["step"]) == 1 for i in s2)
    for i in s1:
        np.testing.assert_array_equal(s1[i]["exp_avg"].numpy(), s2[i]["exp_avg"].numpy())
    assert sched2.last_epoch == 1 and sched2.get_last_lr() == sched.get_last_lr() == [opt2.param_groups[0]["lr"]]
    assert sched.get_last_lr()[0] < 1e-2
    assert scaler2.get_scale() == 512.0
    # the plain form (no scheduler, no scaler) still round-trips
    ex.save_checkpoint(path, model, opt, epoch=2)
    assert ex.load_checkpoint(path, model2, opt2, "cpu") == 2


def test_digits_checkpoint_defaults_outside_the_source_tree(tmp_path, monkeypatch):
    """The default was once digits_checkpoint.safetensors in the current folder, an untracked
    file in the checkout; now --checkpoint defaults to the user's cache and its folder is made."""
    import tritensor as tt
    ex = _example()
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    path = ex.parse_args([]).checkpoint
    repo = os.path.dirname(os.path.dirname(os.path.abspath(EXAMPLE)))
    assert os.path.isabs(path) and not path.startswith(repo + os.sep)
    assert path == os.path.join(os.path.expanduser("~"), ".cache", "tritensor", "digits_checkpoint.safetensors")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert ex.parse_args([]).checkpoint == str(tmp_path / "cache" / "tritensor" / "digits_checkpoint.safetensors")
    assert ex.parse_args(["--checkpoint", "x.safetensors"]).checkpoint == "x.safetensors"
    model = ex.make_model()
    ex.save_checkpoint(ex.parse_args([]).checkpoint, model, tt.optim.Adam(model.parameters()), 1)
    assert (tmp_path / "cache" / "tritensor" / "digits_checkpoint.safetensors").is_file()


@pytest.mark.slow
def test_digits_ddp_resumes_after_a_killed_worker(tmp_path):
    """tritensor-run --standalone --nproc-per-node 2 train_digits.py --ddp: a worker killed in epoch 2
    restarts the group, which resumes after epoch 1 from the checkpoint (about a minute in CPU mode)."""
    pytest.importorskip("sklearn")
    p = _launch(["--standalone", "--nproc-per-node", "2", "--max-restarts", "1", EXAMPLE, "--ddp", "--epochs", "2",
                 "--quiet", "--batch-size", "64", "--kill-in-epoch", "2", "--target-acc", "0.5",
                 "--checkpoint", str(tmp_path / "ck.safetensors")], tmp_path)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    assert "[rank 0] attempt 1: resumed from" in out and "after epoch 1" in out
    assert "test accuracy" in out and "restart 1" in out


def test_bench_elastic_rows():
    """python -m tritensor.bench elastic measures what it says: a launch and a crash-restart, in ms."""
    from tritensor.bench import elastic as be
    launch = be._one(be._launcher("tritensor-run", None), 2, crash=False)
    restart = be._one(be._launcher("tritensor-run", None), 2, crash=True)
    assert 0 < launch < 60_000 and 0 < restart < 60_000
    with pytest.raises(SystemExit):
        be.main(["--repeat", "0"])
