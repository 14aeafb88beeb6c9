"""Whole-model programs: many per-operation kernels sequenced in one native call, each with the
per-operation path (backends/local/model/llama.py, draft_forward.py) as its reference: every decoder
layer of a step (`layer_stack.py`), a draft model's decode round (`draft_round.py`)."""
