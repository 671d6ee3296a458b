"""tritensor.elastic.timer: expiration timers that reap stuck workers (``torch.distributed.elastic.timer``).

In a worker::

    from tritensor.elastic import timer
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    with timer.expires(after=60):      # killed if this block takes longer
        step()

Server/client pairs: ``LocalTimerServer``/``LocalTimerClient`` (a ``multiprocessing`` queue)
and ``FileTimerServer``/``FileTimerClient`` (a named pipe; the agent starts the server when
``TORCHELASTIC_ENABLE_FILE_TIMER=1``). Custom pairs subclass ``TimerServer``/``TimerClient``.
"""

from .api import RequestQueue, TimerClient, TimerRequest, TimerServer, configure, expires
from .file_based_local_timer import FileTimerClient, FileTimerRequest, FileTimerServer
from .local_timer import LocalTimerClient, LocalTimerServer, MultiprocessingRequestQueue

__all__ = ["RequestQueue", "TimerClient", "TimerRequest", "TimerServer", "configure", "expires",
           "FileTimerClient", "FileTimerRequest", "FileTimerServer", "LocalTimerClient", "LocalTimerServer",
           "MultiprocessingRequestQueue"]
