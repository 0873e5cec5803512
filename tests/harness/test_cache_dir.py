"""Where `attentionspan models fetch` keeps its models: harness.foundation.models.cache_root."""

from __future__ import annotations

from pathlib import Path

from harness.foundation.models import cache_root


def test_the_cache_follows_attentionspan_cache_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATTENTIONSPAN_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "attentionspan"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "attentionspan"
    for ignored in ("", "relative/cache"):  # the XDG spec: not absolute, not used
        monkeypatch.setenv("XDG_CACHE_HOME", ignored)
        assert cache_root() == tmp_path / "home" / ".cache" / "attentionspan"
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", "")  # empty: not the current directory
    assert cache_root() != Path("")
    assert cache_root() == tmp_path / "home" / ".cache" / "attentionspan"


def test_the_readme_names_the_cache_variables():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "$ATTENTIONSPAN_CACHE" in readme and "$XDG_CACHE_HOME/attentionspan" in readme
