"""The dashboard's statistics group a rerun (`on_duplicate="new"`) with the run it runs again, as
`ResultTable.compare` does: a configuration run again is one more sample of its group."""

from __future__ import annotations

from starlette.testclient import TestClient

import tallyboard as tb
from tallyboard.dashboard import create_app


def test_compare_groups_a_rerun_with_its_original_by_the_originals_hparams(tmp_path):
    path = str(tmp_path / "results.db")
    with tb.ResultTable(path, nocommit_action=tb.NoCommitAction.NOP) as table:
        for lr, acc in ((0.1, 0.5), (0.2, 0.9)):
            run = table.new_run("sweep", cli={"lr": lr}, auto_log_plt=False)
            run.add_hparams(lr=lr)
            run.write_result(acc=acc)
        again = table.new_run("sweep", cli={"lr": 0.1}, auto_log_plt=False)  # logs no hparams itself
        again.write_result(acc=0.55)
    with TestClient(create_app(path), base_url="http://127.0.0.1") as client:
        answer = client.get(
            "/api/compare", params={"runs": "1,2,3", "metric": "acc", "by": "lr", "unit": "run"}
        )
        groups = {group["label"]: group["run_ids"] for group in answer.json()["groups"]}
    assert groups == {"lr=0.1": [1, 3], "lr=0.2": [2]}
