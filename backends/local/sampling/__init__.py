"""Sampling: logits processors, greedy and sampled tokens, logprobs, structured-output masks."""
