"""The paged KV cache's bookkeeping: the block pool (reference counts, prefix hashes, LRU) and per-request block tables."""
