"""The request path: auth, admission (quota reserve), classification, routing, the call with its fallbacks, streaming, settlement."""
