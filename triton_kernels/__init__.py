"""Hand-written Triton kernels, one family per file. They see tensors only as pointers, shapes, strides and dtypes."""
