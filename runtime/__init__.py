"""The runtime floor under the kernels and the Tensor class.

Everything here is independent of ``Tensor``: the execution mode (``mode``: GPU, or Triton's
interpreter on CPU), devices and dtypes, host and device storages (``memory``), CUDA devices,
streams and events (``cuda``, public as ``tritensor.cuda``), the interpreter fix-ups
(``interpreter``) and the one kernel launch point (``launch``), which takes any object offering
the ``__kernel_buffer__`` protocol. ``triton_kernels`` imports only this package; ``core``
imports both.
"""
