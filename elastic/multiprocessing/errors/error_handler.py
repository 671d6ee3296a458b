"""``ErrorHandler``: writes a worker's exception as the JSON error file its launcher reads back.

It exists because a crashed worker's traceback otherwise dies with its stderr: the launcher
names a file in ``TORCHELASTIC_ERROR_FILE`` and the worker (through ``@record``) writes
``{"message": {"message": ..., "extraInfo": {"py_callstack": ..., "timestamp": ...}}}`` there,
exactly the shape TorchElastic uses, so tools written for it read ours.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import time
import traceback
import warnings
from typing import Optional

__all__ = ["ErrorHandler", "ERROR_FILE_ENV"]

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"

log = logging.getLogger(__name__)


class ErrorHandler:
    """Writes the error file named by ``TORCHELASTIC_ERROR_FILE`` (nothing when it is unset)."""

    def _get_error_file_path(self) -> Optional[str]:
        return os.environ.get(ERROR_FILE_ENV, None)

    def initialize(self) -> None:
        """Turn on :mod:`faulthandler` so a hard crash (segfault) still leaves a Python stack."""
        try:
            faulthandler.enable(all_threads=True)
        except Exception as e:  # pragma: no cover - e.g. stderr closed
            warnings.warn(f"Unable to enable fault handler. {type(e).__name__}: {e}")

    def _write_error_file(self, file_path: str, error_msg: str) -> None:
        try:
            with open(file_path, "w") as fp:
                fp.write(error_msg)
        except Exception as e:
            warnings.warn(f"Unable to write error to file. {type(e).__name__}: {e}")

    def record_exception(self, e: BaseException) -> None:
        """Write ``e``, the traceback being handled and the time (seconds, as a string) as JSON."""
        file = self._get_error_file_path()
        if file:
            data = {
                "message": {
                    "message": f"{type(e).__name__}: {e}",
                    "extraInfo": {
                        "py_callstack": "".join(traceback.format_exception(type(e), e, e.__traceback__)),
                        "timestamp": str(int(time.time())),
                    },
                }
            }
            self._write_error_file(file, json.dumps(data))

    def override_error_code_in_rootcause_data(self, rootcause_error_file: str, rootcause_error: dict,
                                              error_code: int = 0) -> None:
        """Put ``error_code`` into a root-cause record (a string message has nowhere to hold it)."""
        if "message" not in rootcause_error:
            log.warning("child error file (%s) does not have field `message`. cannot override error code: %s",
                        rootcause_error_file, error_code)
        elif isinstance(rootcause_error["message"], str):
            log.warning("child error file (%s) has a new message format. skipping error code override",
                        rootcause_error_file)
        else:
            rootcause_error["message"]["errorCode"] = error_code

    def dump_error_file(self, rootcause_error_file: str, error_code: int = 0) -> None:
        """Copy a child's error file (the root cause) into this process's own error file."""
        with open(rootcause_error_file) as fp:
            rootcause_error = json.load(fp)
        if error_code:
            self.override_error_code_in_rootcause_data(rootcause_error_file, rootcause_error, error_code)
        my_error_file = self._get_error_file_path()
        if my_error_file:
            if os.path.isfile(my_error_file):
                log.warning("dumping child error file %s over the existing %s", rootcause_error_file, my_error_file)
            self._write_error_file(my_error_file, json.dumps(rootcause_error))
        else:
            log.error("no error file defined for parent, to copy child error file (%s)", rootcause_error_file)
