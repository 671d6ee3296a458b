"""Core: dtypes, devices, storages, the Tensor, the CUDA runtime and the kernel launch glue."""
