"""First run: `fairgate serve` on a fresh SQLite file with no admin token, started twice as a
real process. The first start prints the URL, an admin token and a key once (both work, the
database holds neither in plain text) and a curl and a python line that work as printed; the
second prints the URL only, and both still work."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai

from fairgate.gateway.first_run import FIRST_ANSWER_TOKENS, FirstRun, banner, base_url
from tests.gateway.harness import ROOT, free_port


def serve(tmp_path: Path, model: Path | None, port: int, name: str) -> tuple[subprocess.Popen, Path]:
    """`fairgate serve` on a fresh SQLite file; `model` None: no FAIRGATE_MODEL, as `make run`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRGATE_")}
    env |= {"FAIRGATE_DATABASE_URL": f"sqlite:///{tmp_path}/fresh.db", "FAIRGATE_PORT": str(port),
            "FAIRGATE_HOST": "127.0.0.1", "PYTHONPATH": str(ROOT)}
    if model is not None:
        env["FAIRGATE_MODEL"] = str(model)
    out = tmp_path / f"{name}.out"
    with out.open("wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "serve"], cwd=tmp_path, env=env,
                                stdout=f, stderr=subprocess.STDOUT)
    return proc, out


def wait_for_banner(proc: subprocess.Popen, out: Path) -> str:
    deadline = time.time() + 120
    while time.time() < deadline:
        text = out.read_text(errors="replace")
        if "fairgate gateway listening on" in text and ("Admin API:" in text or "(dashboard:" in text):
            return text
        if proc.poll() is not None:
            raise AssertionError(f"serve exited: {text[-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"no banner: {out.read_text()[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def chat(url: str, key: str, model: str) -> str:
    with openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=120) as client:
        r = client.chat.completions.create(model=model, max_tokens=3, messages=[{"role": "user", "content": "Hi"}])
    return r.choices[0].message.content or ""


def run_printed_lines(banner_text: str) -> None:
    """Issue 37: the banner's curl and python lines, run in a shell exactly as printed, get an
    answer of at most FIRST_ANSWER_TOKENS tokens (the python line names this venv's interpreter)."""
    curl = next(line.strip() for line in banner_text.splitlines() if line.strip().startswith("curl ")
                and "/v1/chat/completions" in line)
    python = next(line.strip() for line in banner_text.splitlines() if " -c " in line)
    assert python.startswith(shlex.quote(sys.executable) + " -c ")  # the venv's, not a bare `python`
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FAIRGATE_"))}
    got = subprocess.run(curl, shell=True, capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 0, got.stderr
    answer = json.loads(got.stdout)
    assert answer["object"] == "chat.completion", answer
    assert 1 <= answer["usage"]["completion_tokens"] <= FIRST_ANSWER_TOKENS
    got = subprocess.run(python, shell=True, capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 0 and got.stdout.endswith("\n"), got.stderr[-2000:]


def test_first_start_prints_working_secrets_once(tmp_path, tiny_model_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc, out = serve(tmp_path, tiny_model_dir, port, "first")
    try:
        text = wait_for_banner(proc, out)
        run_printed_lines(text)
    finally:
        stop(proc)
    token = re.search(r"admin token:\s+(\S+)", text).group(1)
    key = re.search(r"API key:\s+(fg-\w+)", text).group(1)
    assert f"curl {url}/v1/chat/completions -H 'Authorization: Bearer {key}'" in text
    assert f"OpenAI(base_url='{url}/v1', api_key='{key}')" in text
    assert f"{url}/admin/dashboard" in text
    assert text.count(token) == 2 and text.count(key) == 3  # the listing, the curl lines, the python line
    stored = (tmp_path / "fresh.db").read_bytes()
    for journal in tmp_path.glob("fresh.db*"):
        stored += journal.read_bytes()
    assert token.encode() not in stored and key.encode() not in stored

    proc, out = serve(tmp_path, tiny_model_dir, port, "second")
    try:
        again = wait_for_banner(proc, out)
        assert f"fairgate gateway listening on {url} (dashboard: {url}/admin/dashboard)" in again
        assert token not in again and key not in again and "admin token" not in again
        assert "fg-" not in again
        assert chat(url, key, tiny_model_dir.name)  # the printed key works
        tenants = httpx.get(url + "/admin/tenants", headers={"authorization": f"Bearer {token}"})
        assert tenants.status_code == 200 and [t["name"] for t in tenants.json()["data"]] == ["default"]
        wrong = httpx.get(url + "/admin/tenants", headers={"authorization": "Bearer not-it"})
        assert wrong.status_code == 401
        dash = httpx.get(url + "/admin/dashboard", headers={"authorization": f"Bearer {token}"})
        assert dash.status_code == 200 and "<svg" in dash.text
    finally:
        stop(proc)
    assert key not in out.read_text()


def test_with_nothing_set_it_serves_the_demo_model(tmp_path):
    """`make run` sets nothing: the embedded engine serves the checkout's models/fairgate-demo,
    and the printed lines name it and get an answer from it."""
    port = free_port()
    proc, out = serve(tmp_path, None, port, "demo")
    try:
        text = wait_for_banner(proc, out)
        assert "\"model\": \"fairgate-demo\"" in text and "model='fairgate-demo'" in text
        run_printed_lines(text)
    finally:
        stop(proc)


def test_banner_of_a_later_start_names_the_url_only():
    import io

    later = io.StringIO()
    banner(base_url("0.0.0.0", 8000), None, "m", later)
    assert later.getvalue() == "fairgate gateway listening on http://127.0.0.1:8000 (dashboard: " \
                               "http://127.0.0.1:8000/admin/dashboard)\n"
    first = io.StringIO()
    banner("http://h:1", FirstRun("tok-123", "fg-abc", "t1"), "demo", first)
    assert "tok-123" in first.getvalue() and "model='demo'" in first.getvalue()


def test_replicas_starting_together_make_one_token_and_one_tenant():
    """Two bootstraps racing on one empty PostgreSQL: one makes the secrets, the other none."""
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import func, select

    from fairgate.gateway.first_run import bootstrap
    from fairgate.gateway.store.db import make_engine, make_sessionmaker, upgrade
    from fairgate.gateway.store.tables import AdminCredential, ApiKey, Tenant
    from tests.gateway.harness import pg_database

    with pg_database() as url:
        upgrade(url)
        engines = [make_engine(url) for _ in range(2)]
        try:
            with ThreadPoolExecutor(2) as pool:
                made = list(pool.map(lambda e: bootstrap(make_sessionmaker(e)), engines))
            assert sum(m is not None for m in made) == 1
            with make_sessionmaker(engines[0])() as s:
                counts = [s.scalar(select(func.count()).select_from(t)) for t in (AdminCredential, Tenant, ApiKey)]
            assert counts == [1, 1, 1]
            assert bootstrap(make_sessionmaker(engines[0])) is None  # a later start: nothing new
        finally:
            for e in engines:
                e.dispose()
