"""The run page's Artifacts tab in headless Chromium: names listed as text, each a download."""

from __future__ import annotations

from pathlib import Path

import tallyboard as tb
from e2e.browser import running_dashboard

TIMEOUT = 20_000


def test_the_artifacts_tab_lists_the_files_and_downloads_one(page, tmp_path: Path) -> None:
    (tmp_path / "model.ckpt").write_bytes(b"\x00weights\xff" * 100)
    (tmp_path / "evil.html").write_text("<img src=x onerror=alert(1)>")
    table = tb.ResultTable(tmp_path / "results.db", nocommit_action=tb.NoCommitAction.NOP)
    with table.new_run("browser") as run:
        run.log_artifact(tmp_path / "model.ckpt", kind="model", step=7)
        run.log_artifact(tmp_path / "evil.html", name="<b>evil</b>.html")
    table.close()
    with running_dashboard(str(tmp_path / "results.db"), read_only=True) as base_url:
        page.goto(f"{base_url}/runs/{run.run_id}")
        page.click('.tabs button[data-tab="artifacts"]', timeout=TIMEOUT)
        page.wait_for_selector("#artifacts a.artifact", timeout=TIMEOUT)
        names = page.eval_on_selector_all("#artifacts a.artifact", "links => links.map(a => a.textContent)")
        assert names == ["<b>evil</b>.html", "model.ckpt"]  # text, never markup
        assert page.eval_on_selector_all("#artifacts b", "nodes => nodes.length") == 0
        with page.expect_download(timeout=TIMEOUT) as download:
            page.click("#artifacts a.artifact >> text=model.ckpt")
        saved = tmp_path / "downloaded.ckpt"
        download.value.save_as(saved)
        assert saved.read_bytes() == (tmp_path / "model.ckpt").read_bytes()
        assert download.value.suggested_filename == "model.ckpt"
        assert page.errors == []
