"""Core: the Tensor (storage, shape, strides, views) and each op's core entry (argument checks,
output allocation, the kernel call). Devices, dtypes, memory, streams and launching live beneath
it in ``runtime``; derivatives live above it in ``autograd``."""
