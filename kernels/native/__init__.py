"""The native CPU kernels: the C sources with their shared header (`fg_common.h`), their build
(`build.py`: the system C compiler, once per CPU, cached), `abi.py` (the one module that loads them
and declares every entry point and struct), the OpenMP runtime they share with torch
(`openmp.py`) and the huge-page memory they stream (`hugepages.py`)."""
