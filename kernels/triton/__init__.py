"""The Triton kernels (CUDA; on the CPU under TRITON_INTERPRET=1, for tests): `ops` is the set with
exactly the signatures of `kernels.ops.reference`. Importing it imports triton; a kernel plan
does that only where it wants Triton."""
