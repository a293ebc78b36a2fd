"""Take the screenshots in docs/screenshots/ from a demo table, in headless Chromium.

    tallyboard demo --db /tmp/demo.db --no-serve
    python tests/e2e/screenshots.py /tmp/demo.db docs/screenshots

The table is copied first; the copy gets a few notes and colours through the dashboard's own API
(as a user would add them), so the pictures show those features too.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser import browser_page, running_dashboard

EDIT = """([run, changes]) => fetch('/api/runs/' + run, {method: 'POST', body: JSON.stringify(changes),
    headers: {'Content-Type': 'application/json',
              'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content}})"""
SHOW_COLUMNS = """async (names) => {
    const {columns} = await (await fetch('/api/columns')).json();
    const shown = columns.filter(c => c.position !== null).map(c => c.name).filter(n => !names.includes(n));
    shown.splice(1, 0, ...names);
    const prefs = columns.map(c => ({name: c.name, alias: c.alias,
        position: shown.includes(c.name) ? shown.indexOf(c.name) : null}));
    await fetch('/api/columns', {method: 'POST', body: JSON.stringify({columns: prefs}),
        headers: {'Content-Type': 'application/json',
                  'X-CSRF-Token': document.querySelector('meta[name=csrf-token]').content}});
}"""
NOTES = {
    6: {"note": "best so far", "color": "#3ecf8e"},
    4: {"note": "wider is better", "color": "#f5a524"},
    1: {"note": "lr too small", "color": "#8fa8ff"},
    7: {"note": "diverged: lr 5", "color": "#f25f5c"},
}


def take(database: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "demo.db"
        for suffix in ("", "-wal"):
            if Path(f"{database}{suffix}").exists():
                shutil.copy(f"{database}{suffix}", f"{copy}{suffix}")
        with running_dashboard(str(copy)) as base, browser_page(1600, 900) as page:
            page.goto(base + "/")
            page.wait_for_selector("#runs tbody tr[data-run]")
            for run, changes in NOTES.items():
                page.evaluate(EDIT, [run, changes])
            page.evaluate(SHOW_COLUMNS, ["status", "note"])
            shots = [
                ("table", "/?sort=val_accuracy&desc=1", "#runs tbody tr[data-run]"),
                ("run", "/runs/6", ".chart-card canvas"),
                ("run-images", "/runs/6?tab=image", "#gallery img"),
                ("run-fragment", "/runs/6?tab=fragment", "iframe.fragment"),
                ("compare", "/compare?runs=1,4,6,7", ".chart-card canvas"),
                ("compare-grouped", "/compare?runs=1,2,3,4,5,6&by=lr&band=minmax", ".chart-card canvas"),
                ("compare-stats", "/compare?runs=1,2,3,4,5,6&sm=val/accuracy&by=lr", "#stats-pairs tbody tr"),
                ("hparams", "/hparams?runs=1,2,3,4,5,6,7&metric=val/accuracy", "#scatter g.sc-point"),
                ("diff", "/diff?runs=1,4", "#diff-hparams"),
            ]
            for name, url, ready in shots:
                page.goto(base + url)
                page.wait_for_selector(ready)
                page.wait_for_timeout(800)
                page.screenshot(path=str(out / f"{name}.png"))
            page.goto(base + "/runs/6?tab=image")
            page.wait_for_selector("#gallery img")
            page.click("#gallery figure >> nth=3")
            page.wait_for_timeout(600)
            page.screenshot(path=str(out / "run-image-viewer.png"))
            if page.errors:
                raise SystemExit(f"script errors on the pages: {page.errors}")


if __name__ == "__main__":
    take(Path(sys.argv[1]), Path(sys.argv[2]))
