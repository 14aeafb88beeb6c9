"""Layer objects swapped into the model once it has loaded: panel and oneDNN float32 linears
(`panel_linear.py`), weight-only quantized linears (`quant_linear.py`), the greedy LM head
(`greedy_head.py`). Each computes what the layer it replaces computes (the tests say how exactly)."""
