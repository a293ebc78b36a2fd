"""How a run that was never closed ends with its process (an adapter keeps it open across phases)."""

import subprocess
import sys
import textwrap

import tallyboard as tb


def test_a_run_left_open_ends_at_exit_with_the_status_its_user_chose_else_failed(db_url, tmp_path):
    script = textwrap.dedent(
        f"""
        import tallyboard as tb
        table = tb.ResultTable({db_url!r}, nocommit_action=tb.NoCommitAction.NOP)
        chosen = table.new_run("fit-then-test", auto_log_plt=False)
        chosen.add_scalar("train/loss", 1.0)
        chosen.set_status("finished")  # what an adapter does when fit succeeds
        chosen.add_scalar("test/acc", 0.9)  # the run still takes records: test logs into it
        silent = table.new_run("never-said", auto_log_plt=False)
        silent.add_scalar("train/loss", 1.0)
        print(chosen.run_id, silent.run_id)
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, cwd=tmp_path
    )
    assert (done.returncode, done.stderr) == (0, "")
    chosen, silent = map(int, done.stdout.split())
    table = tb.ResultTable(db_url)
    assert table.get_experiment_raw(chosen)["status"] == "finished"
    assert table.get_experiment_raw(chosen)["end_time"] is not None
    assert [s.value for s in table.load_run(chosen).get_scalar("test/acc")] == [0.9]
    assert table.get_experiment_raw(silent)["status"] == "failed"
    table.close()
