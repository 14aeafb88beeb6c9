"""`fairgate bench`: a load generator and report for any OpenAI-compatible servers (our gateway,
`fairgate engine`, vLLM, llama.cpp, an external API).

    workloads  named request mixes (chat, rag, long, extraction, mixed)
    client     one streamed request, timed: TTFT, inter-token gaps, end-to-end, route, cost
    fit        the workload shrunk to the served model's context (max_model_len in /v1/models)
    runner     the load: concurrency sweeps or Poisson rates, per target, alternating
    accuracy   a golden set through the same endpoints
    stats      every figure (percentiles, CDFs, throughput, goodput under an SLO, groups)
    plots      the report's SVG plots (matplotlib)
    report     bench.json, requests.jsonl, report.html
    session    one run from arguments to files
    cli        the `fairgate bench` arguments
"""
