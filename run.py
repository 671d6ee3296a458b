"""``tritensor-run`` (``python -m tritensor.run``): torchrun for tritensor.

It exists so that a training script written for ``torchrun`` launches the same way::

    tritensor-run --standalone --nproc-per-node 2 train.py --epochs 3
    tritensor-run --nnodes 1:4 --nproc-per-node 8 --max-restarts 3 \\
        --rdzv-backend c10d --rdzv-endpoint node0:29400 --rdzv-id job7 train.py

Every flag of torchrun is accepted with dashes or underscores (``--nproc-per-node`` and
``--nproc_per_node``), and defaults come from ``PET_<FLAG>`` environment variables as in
torchrun. ``--standalone`` starts an authenticated store on a free loopback port; its secret
(``TRITENSOR_COMM_SECRET``, generated unless set) reaches the workers through the environment
only. Multi-node jobs need the same ``TRITENSOR_COMM_SECRET`` on every node.
"""

from __future__ import annotations

import logging
import os
import runpy
import sys
import uuid
from argparse import REMAINDER, Action, ArgumentParser, RawDescriptionHelpFormatter
from typing import Callable, List, Optional, Set, Tuple, Union

from .comm import SECRET_ENV, TCPStore
from .elastic.agent.server import DEFAULT_SIGNALS_TO_HANDLE, SignalException, parse_signals
from .elastic.events import get_logging_handler
from .elastic.launcher.api import LaunchConfig, elastic_launch
from .elastic.multiprocessing import Std
from .elastic.multiprocessing.errors import ChildFailedError
from .elastic.rendezvous import RendezvousError

__all__ = ["get_args_parser", "parse_args", "parse_min_max_nnodes", "determine_local_world_size",
           "config_from_args", "run_script_path", "run", "main"]

log = logging.getLogger(__name__)


class _env(Action):
    """An option whose default comes from ``PET_<DEST>`` in the environment, else ``default``."""

    def __init__(self, dest, default=None, required=False, **kwargs):
        default = os.environ.get(f"PET_{dest.upper()}", default)
        super().__init__(dest=dest, default=default, required=required and default is None, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class _check_env(Action):
    """A flag that is also on when ``PET_<DEST>`` is ``1``."""

    def __init__(self, dest, default=False, **kwargs):
        default = bool(int(os.environ.get(f"PET_{dest.upper()}", "1" if default else "0")))
        super().__init__(dest=dest, const=True, default=default, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


NUMA_MODES = ["node", "socket", "exclusive", "core-complex"]  # torchrun's --numa-binding choices
LOG_LINE_PREFIX_TEMPLATE_ENV = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"
_EPILOG = f"""\
torchrun has no --log-line-prefix-template flag: the prefix of tee'd lines comes from
${LOG_LINE_PREFIX_TEMPLATE_ENV} (a string.Template of ${{role_name}}, ${{rank}} and ${{local_rank}}),
and tritensor-run reads it too. --logs-specs and --numa-binding are accepted and refused with
the reason (see each); every other torchrun flag has torch's meaning."""


def _comma_separated_list(value: str) -> List[str]:
    """torchrun's list syntax: ``"a,b"`` -> ``["a", "b"]``; a doubled comma is a literal comma."""
    placeholder = "\0"
    return [item.replace(placeholder, ",") for item in value.replace(",,", placeholder).split(",")]


def get_args_parser() -> ArgumentParser:
    """torchrun's command line."""
    p = ArgumentParser(prog="tritensor-run", description="tritensor's elastic launcher (torchrun's flags)",
                       epilog=_EPILOG, formatter_class=RawDescriptionHelpFormatter)
    p.add_argument("--nnodes", action=_env, type=str, default="1:1",
                   help="Number of nodes, or the range of nodes in form <minimum_nodes>:<maximum_nodes>.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", action=_env, type=str, default="1",
                   help="Number of workers per node; supported values: [auto, cpu, gpu, int].")
    p.add_argument("--rdzv-backend", "--rdzv_backend", action=_env, type=str, default="static",
                   help="Rendezvous backend: static or c10d.")
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", action=_env, type=str, default="",
                   help="Rendezvous backend endpoint; usually in form <host>:<port>.")
    p.add_argument("--rdzv-id", "--rdzv_id", action=_env, type=str, default="none",
                   help="User-defined group id.")
    p.add_argument("--rdzv-conf", "--rdzv_conf", action=_env, type=str, default="",
                   help="Additional rendezvous configuration (<key1>=<value1>,<key2>=<value2>,...).")
    p.add_argument("--standalone", action=_check_env,
                   help="Start a local standalone rendezvous backend on a free port (single node).")
    p.add_argument("--max-restarts", "--max_restarts", action=_env, type=int, default=0,
                   help="Maximum number of worker group restarts before failing.")
    p.add_argument("--monitor-interval", "--monitor_interval", action=_env, type=float, default=0.1,
                   help="Interval, in seconds, to monitor the state of workers.")
    p.add_argument("--start-method", "--start_method", action=_env, type=str, default="spawn",
                   choices=["spawn", "fork", "forkserver"], help="Multiprocessing start method for functions.")
    p.add_argument("--event-log-handler", "--event_log_handler", action=_env, type=str, default="null",
                   help="Name of a registered event logging handler (tritensor.elastic.events): null (default), "
                        "console or dynamic_rendezvous.")
    p.add_argument("--role", action=_env, type=str, default="default", help="User-defined role for the workers.")
    p.add_argument("-m", "--module", action=_check_env,
                   help="Run the training script as a module (python -m).")
    p.add_argument("--no-python", "--no_python", action=_check_env,
                   help="Run the training script directly, without 'python'.")
    p.add_argument("--run-path", "--run_path", action=_check_env,
                   help="Run the training script with runpy.run_path in the worker process.")
    p.add_argument("--log-dir", "--log_dir", action=_env, type=str, default=None,
                   help="Base directory for log files (attempt_<n>/<local_rank>/).")
    p.add_argument("-r", "--redirects", action=_env, type=str, default="0",
                   help="Redirect std streams into log files (e.g. 3, or 0:1,1:2 per local rank).")
    p.add_argument("-t", "--tee", action=_env, type=str, default="0",
                   help="Tee std streams into a log file and the console.")
    p.add_argument("--local-ranks-filter", "--local_ranks_filter", action=_env, type=str, default="",
                   help="Only show the console output of these local ranks (e.g. 0,1,2); log files saved with "
                        "--redirects or --tee keep every rank's.")
    p.add_argument("--duplicate-stdout-filters", "--duplicate_stdout_filters", action=_env,
                   type=_comma_separated_list, default=[],
                   help="Also write the tee'd stdout lines that contain any of these strings (e.g. 'apple,orange'; "
                        "a double comma is a literal comma) to <log dir>/attempt_<n>/filtered_stdout.log.")
    p.add_argument("--duplicate-stderr-filters", "--duplicate_stderr_filters", action=_env,
                   type=_comma_separated_list, default=[],
                   help="The same for stderr: filtered_stderr.log.")
    p.add_argument("--node-rank", "--node_rank", action=_env, type=int, default=0,
                   help="Rank of the node for multi-node distributed training (static rendezvous).")
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1", type=str, action=_env,
                   help="Address of the master node (static rendezvous without --rdzv-endpoint).")
    p.add_argument("--master-port", "--master_port", default=29500, type=int, action=_env,
                   help="Port on the master node (static rendezvous without --rdzv-endpoint).")
    p.add_argument("--local-addr", "--local_addr", default=None, type=str, action=_env,
                   help="Address of the local node.")
    p.add_argument("--logs-specs", "--logs_specs", default=None, type=str,
                   help="Refused: torchrun loads a LogsSpecs class from the 'torchrun.logs_specs' entry points, "
                        "and tritensor has no LogsSpecs classes to load; its logs are laid out by --log-dir, "
                        "--redirects, --tee and --local-ranks-filter.")
    p.add_argument("--numa-binding", "--numa_binding", type=str, choices=NUMA_MODES, default=None,
                   help="Refused: torchrun binds each worker to the CPUs near its GPU; tritensor-run does not bind "
                        "CPUs (run the workers under numactl with --no-python instead).")
    p.add_argument("--signals-to-handle", "--signals_to_handle", action=_env, type=str,
                   default=DEFAULT_SIGNALS_TO_HANDLE,
                   help="Comma-separated signals that stop the workers with the same signal (then 128+N): default "
                        f"{DEFAULT_SIGNALS_TO_HANDLE}; SLURM jobs often add SIGUSR1,SIGUSR2.")
    p.add_argument("--shutdown-timeout", "--shutdown_timeout", action=_env, type=int, default=None,
                   help="Seconds a stopped worker has to exit before SIGKILL (default: "
                        "$TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30).")
    p.add_argument("--virtual-local-rank", "--virtual_local_rank", action=_check_env,
                   help="Every worker gets LOCAL_RANK=0 and a CUDA_VISIBLE_DEVICES of its own GPU (the local "
                        "rank-th of this CUDA_VISIBLE_DEVICES), so it sees that GPU as device 0.")
    p.add_argument("training_script", type=str,
                   help="The script (or module with -m, or binary with --no-python) to launch, then its args.")
    p.add_argument("training_script_args", nargs=REMAINDER)
    return p


def parse_args(args: Optional[List[str]]):
    """torchrun's arguments parsed from ``args`` (None: sys.argv), with get_args_parser()'s flags."""
    return get_args_parser().parse_args(args)


def parse_min_max_nnodes(nnodes: str) -> Tuple[int, int]:
    """``"N"`` -> ``(N, N)``; ``"MIN:MAX"`` -> ``(MIN, MAX)``."""
    arr = nnodes.split(":")
    try:
        if len(arr) == 1:
            return int(arr[0]), int(arr[0])
        if len(arr) == 2:
            return int(arr[0]), int(arr[1])
    except ValueError:
        pass
    raise RuntimeError(f'nnodes={nnodes} is not in "MIN:MAX" format')


def _gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip()]
        return 0 if not ids or ids[0].strip().startswith("-") else len(ids)
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def determine_local_world_size(nproc_per_node: str) -> int:
    """An int, ``cpu`` (cores), ``gpu`` (GPUs; an error without any) or ``auto`` (GPUs, else cores)."""
    try:
        return int(nproc_per_node)
    except ValueError:
        pass
    if nproc_per_node == "cpu":
        return os.cpu_count() or 1
    if nproc_per_node == "gpu":
        n = _gpu_count()
        if n == 0:
            raise ValueError("CUDA is not available.")
        return n
    if nproc_per_node == "auto":
        return _gpu_count() or os.cpu_count() or 1
    raise ValueError(f"Unsupported nproc_per_node value: {nproc_per_node}")


def _parse_rdzv_conf(conf: str) -> dict:
    out = {}
    for item in filter(None, (c.strip() for c in conf.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--rdzv-conf: '{item}' is not in the form <key>=<value>")
        out[key.strip()] = value.strip()
    return out


def _local_ranks_filter(text: str) -> Optional[Set[int]]:
    if not text:
        return None
    try:
        ranks = {int(r) for r in text.split(",")}
    except ValueError:
        ranks = None
    if not ranks or min(ranks) < 0:
        raise ValueError("--local-ranks-filter must be a comma-separated list of local ranks (integers >= 0), "
                         f"e.g. --local-ranks-filter=0,1,2; got {text!r}")
    return ranks


def _check_log_and_signal_flags(args, nproc_per_node: int) -> None:
    """The flags torchrun added for logs, signals and devices: refused ones and bad values named."""
    if args.logs_specs is not None:
        raise ValueError(f"--logs-specs {args.logs_specs}: tritensor has no LogsSpecs classes to load (torchrun "
                         "takes one from the 'torchrun.logs_specs' entry points); lay the logs out with --log-dir, "
                         "--redirects, --tee and --local-ranks-filter")
    if args.numa_binding is not None:
        raise ValueError(f"--numa-binding {args.numa_binding}: tritensor-run does not bind workers to CPUs; run "
                         "them under numactl (with --no-python) instead")
    try:
        get_logging_handler(args.event_log_handler)
    except KeyError as e:
        raise ValueError(f"--event-log-handler: {e.args[0]}") from None
    try:
        parse_signals(args.signals_to_handle)
    except ValueError as e:
        raise ValueError(f"--signals-to-handle: {e}") from None
    if args.shutdown_timeout is not None and args.shutdown_timeout < 0:
        raise ValueError(f"--shutdown-timeout: expected seconds >= 0, got {args.shutdown_timeout}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if args.virtual_local_rank and visible is not None and len(visible.split(",")) < nproc_per_node:
        raise ValueError(f"--virtual-local-rank: {nproc_per_node} workers per node, but CUDA_VISIBLE_DEVICES={visible} "
                         "lists fewer GPUs")


def config_from_args(args) -> Tuple[LaunchConfig, Union[Callable, str], List[str]]:
    """The ``LaunchConfig``, the entrypoint and its arguments for parsed ``args``."""
    min_nodes, max_nodes = parse_min_max_nnodes(args.nnodes)
    if not 0 < min_nodes <= max_nodes:
        raise ValueError(f"--nnodes: expected 0 < MIN <= MAX, got {args.nnodes}")
    if args.max_restarts < 0:
        raise ValueError(f"--max-restarts: expected >= 0, got {args.max_restarts}")
    nproc_per_node = determine_local_world_size(args.nproc_per_node)
    if nproc_per_node < 1:
        raise ValueError(f"--nproc-per-node: expected a positive number, got {args.nproc_per_node}")
    _check_log_and_signal_flags(args, nproc_per_node)
    ranks_filter = _local_ranks_filter(args.local_ranks_filter)
    if "OMP_NUM_THREADS" not in os.environ and nproc_per_node > 1:
        os.environ["OMP_NUM_THREADS"] = "1"
        log.warning("Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
                    "your system being overloaded, please further tune the variable for optimal performance in "
                    "your application as needed.")
    rdzv_configs = _parse_rdzv_conf(args.rdzv_conf)
    if args.rdzv_backend == "static":
        rdzv_configs["rank"] = args.node_rank
    endpoint = args.rdzv_endpoint
    if args.rdzv_backend == "static" and not endpoint:
        endpoint = f"{args.master_addr}:{args.master_port}"
    config = LaunchConfig(min_nodes=min_nodes, max_nodes=max_nodes, nproc_per_node=nproc_per_node,
                          run_id=args.rdzv_id, role=args.role, rdzv_endpoint=endpoint,
                          rdzv_backend=args.rdzv_backend, rdzv_configs=rdzv_configs,
                          max_restarts=args.max_restarts, monitor_interval=args.monitor_interval,
                          start_method=args.start_method, log_dir=args.log_dir,
                          redirects=Std.from_str(args.redirects), tee=Std.from_str(args.tee),
                          local_addr=args.local_addr, log_line_prefix_template=os.getenv(LOG_LINE_PREFIX_TEMPLATE_ENV),
                          event_log_handler=args.event_log_handler, signals_to_handle=args.signals_to_handle,
                          duplicate_stdout_filters=args.duplicate_stdout_filters or None,
                          duplicate_stderr_filters=args.duplicate_stderr_filters or None,
                          virtual_local_rank=args.virtual_local_rank, shutdown_timeout=args.shutdown_timeout,
                          local_ranks_filter=ranks_filter)
    if args.run_path:
        return config, run_script_path, [args.training_script, *args.training_script_args]
    if args.no_python:
        if args.module:
            raise ValueError("Don't use both the '--no-python' flag and the '--module' flag at the same time.")
        return config, args.training_script, list(args.training_script_args)
    cmd = os.getenv("PYTHON_EXEC", sys.executable)
    cmd_args = ["-u"] + (["-m"] if args.module else []) + [args.training_script, *args.training_script_args]
    return config, cmd, cmd_args


def run_script_path(training_script: str, *training_script_args: str):
    """Run a script in this (worker) process as ``__main__`` (``--run-path``)."""
    sys.argv = [training_script, *training_script_args]
    runpy.run_path(sys.argv[0], run_name="__main__")


def run(args) -> None:
    """Launch the job of parsed ``args``; raises ``ChildFailedError`` when it failed."""
    store = None
    try:
        if args.standalone:
            if parse_min_max_nnodes(args.nnodes)[1] != 1:
                raise ValueError(f"--standalone runs a single node, but --nnodes is {args.nnodes}")
            # the master store generates the secret into os.environ unless one is set: the workers
            # inherit it from there, and it appears on no command line
            store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
            args.rdzv_backend = "c10d"
            args.rdzv_endpoint = f"127.0.0.1:{store.port}"
            args.rdzv_id = str(uuid.uuid4())
            log.info("--standalone: rendezvous store on %s, run id %s", args.rdzv_endpoint, args.rdzv_id)
        config, cmd, cmd_args = config_from_args(args)
        if store is not None:
            config.rdzv_configs["store"] = store
            config.rdzv_configs.setdefault("last_call_timeout", 0.0001)
        elif config.max_nodes > 1 and not os.environ.get(SECRET_ENV):
            raise ValueError(f"a job of several nodes needs the same {SECRET_ENV} on every node: set it")
        elastic_launch(config=config, entrypoint=cmd)(*cmd_args)
    finally:
        if store is not None:
            store.close()


def main(args: Optional[List[str]] = None) -> None:
    """The console script: exit 0 on success, 1 when workers failed (the failures printed) or the
    rendezvous failed (its error printed), 2 on bad arguments, 128+N when the launcher was
    stopped by signal N (its workers stopped first)."""
    logging.basicConfig(level=os.environ.get("LOGLEVEL", "WARNING"), format="[%(name)s] %(message)s")
    parsed = parse_args(args)
    try:
        run(parsed)
    except ChildFailedError as e:
        print(str(e), file=sys.stderr)
        sys.exit(1)
    except RendezvousError as e:
        print(f"tritensor-run: rendezvous failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    except SignalException as e:
        print(f"tritensor-run: {e}; workers stopped", file=sys.stderr)
        sys.exit(128 + int(e.sigval))
    except ValueError as e:
        print(f"tritensor-run: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
