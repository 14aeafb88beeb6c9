"""fairgate: a multi-tenant LLM gateway with its own paged inference engine.

The repository's root is this package. Installed, its top-level folders are sub-packages of the
one import name `fairgate` (`gateway/` is `fairgate.gateway`, `kernels/` is `fairgate.kernels`, …)
and nothing else goes into site-packages, so fairgate installs beside any ML stack (Hugging
Face's `kernels` distribution included). Importing this package imports nothing else.
"""

__version__ = "0.1.0"
