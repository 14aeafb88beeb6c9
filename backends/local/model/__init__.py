"""The model: config and weights from a Hugging Face folder, the Llama-style decoder, RoPE, quantization, the tokenizer, and the runner that executes a step."""
