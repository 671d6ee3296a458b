"""tritensor.elastic: TorchElastic for tritensor (``torch.distributed.elastic.X`` is ``tritensor.elastic.X``).

It exists so that a job can launch worker processes, capture their logs and error files, and
report their failures the way PyTorch users know from ``torchrun``, and so that a job survives
worker crashes and hangs and nodes joining or leaving between restarts. What is here:

- :mod:`.multiprocessing` -- ``start_processes``, ``Std``, ``PContext`` and its function
  (``MultiprocessContext``) and binary (``SubprocessContext``) kinds, ``RunProcsResult``;
- :mod:`.multiprocessing.errors` -- ``record``, ``ProcessFailure``, ``ChildFailedError``,
  ``ErrorHandler``;
- :mod:`.metrics` and :mod:`.events` -- telemetry sinks;
- :mod:`.rendezvous` -- ``RendezvousHandler``, ``RendezvousParameters``, the ``static`` and
  ``c10d`` (dynamic, on tritensor's authenticated ``TCPStore``) backends by name;
- :mod:`.agent.server` -- ``LocalElasticAgent``, ``WorkerSpec``, ``WorkerState``, ``RunResult``;
- :mod:`.timer` -- expiration timers that reap stuck workers;
- :mod:`.launcher` -- ``LaunchConfig``/``elastic_launch``, what ``tritensor-run``
  (``python -m tritensor.run``) runs.

Only the standard library and ``tritensor.comm`` are used here; nothing here imports tritensor's
kernels or runtime itself (importing the ``tritensor`` package still runs its ``__init__``, which
picks the execution mode), and no worker is launched on a GPU's behalf.
"""
