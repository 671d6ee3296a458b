"""``python -m tritensor.bench``: time tritensor's kernel families against a peer measured in the same run.

One module per family (``elementwise``, ``reduction``, ``softmax``, ``cast``, ``matmul``, ``conv2d``),
each a ``cases(ctx)`` function returning :class:`~tritensor.bench.common.Case` objects; timing,
peaks, tables, JSON and the plot live in ``common.py``; ``__main__.py`` is the command line.
The pytest-benchmark suites in ``benchmarks/`` time the same cases.
"""
