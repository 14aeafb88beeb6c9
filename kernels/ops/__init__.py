"""Per-operation kernels, each with its torch reference (`reference.py`, the contract every other
implementation matches): paged attention and the KV write with its quantized formats
(`kv_quant.py`), the fused elementwise ops, the weight-only formats (`quant_format.py`,
`quant_a8.py`). `cpu_ops` is the CPU's kernel set with exactly the reference's signatures."""
