"""Settings: CLI flags over FAIRGATE_* environment over the file over defaults."""

from __future__ import annotations

from fairgate.gateway.settings import load_settings


def test_defaults_are_the_embedded_setup(monkeypatch):
    for var in ("FAIRGATE_REDIS_URL", "FAIRGATE_DATABASE_URL", "FAIRGATE_MODEL", "FAIRGATE_ADMIN_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    s = load_settings()
    assert s.redis_url is None and s.database_url.startswith("sqlite") and s.admin_token is None


def test_file_env_and_flags_precedence(tmp_path, monkeypatch):
    f = tmp_path / "fairgate.yaml"
    f.write_text("port: 9001\nredis_url: redis://file/0\nmax_body_bytes: 100\nmodel: /m/from-file\n")
    monkeypatch.setenv("FAIRGATE_REDIS_URL", "redis://env/0")
    monkeypatch.delenv("FAIRGATE_PORT", raising=False)
    monkeypatch.delenv("FAIRGATE_MODEL", raising=False)
    s = load_settings(str(f), model="/m/from-flag", port=None)
    assert (s.port, s.redis_url, s.max_body_bytes, s.model) == (9001, "redis://env/0", 100, "/m/from-flag")
    j = tmp_path / "fairgate.json"
    j.write_text('{"admin_token": "from-json"}')
    assert load_settings(str(j)).admin_token == "from-json"
