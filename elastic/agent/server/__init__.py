"""tritensor.elastic.agent.server: ``torch.distributed.elastic.agent.server`` for tritensor.

``LocalElasticAgent(spec).run()`` starts ``spec.local_world_size`` workers on this node, joins
the job's rendezvous, watches the workers and restarts the group on failures or membership
changes; see :mod:`.api` for the model (``WorkerSpec``, ``WorkerState``, ``RunResult`` ...).
"""

from .api import (DEFAULT_ROLE, DEFAULT_SIGNALS_TO_HANDLE, SIGNALS_TO_HANDLE_ENV, ElasticAgent, RunResult,
                  SignalException, SimpleElasticAgent, Worker, WorkerGroup, WorkerSpec, WorkerState, parse_signals,
                  signals_to_handle)
from .local_elastic_agent import TORCHELASTIC_ENABLE_FILE_TIMER, TORCHELASTIC_TIMER_FILE, LocalElasticAgent

__all__ = ["DEFAULT_ROLE", "DEFAULT_SIGNALS_TO_HANDLE", "SIGNALS_TO_HANDLE_ENV", "parse_signals",
           "signals_to_handle", "ElasticAgent", "RunResult", "SignalException", "SimpleElasticAgent", "Worker",
           "WorkerGroup", "WorkerSpec", "WorkerState", "LocalElasticAgent", "TORCHELASTIC_ENABLE_FILE_TIMER",
           "TORCHELASTIC_TIMER_FILE"]
