"""DeepBoard's documented usage with one import changed: `python deepboard_usage.py deepboard|tallyboard`.

It prints, as JSON, everything a DeepBoard user reads back, so the test can compare the real
deepboard==0.3.0 with tallyboard line by line. Run in a subprocess, in a folder of its own
(DeepBoard replaces `sys.excepthook` and calls git in the current directory).
"""

import json
import sys
import warnings

warnings.simplefilter("ignore")

if sys.argv[1] == "deepboard":
    from deepboard.resultTable import ResultTable
else:
    from tallyboard import ResultTable


def main() -> None:
    with open("config.yaml", "w") as config:
        config.write("lr: 0.1\n")
    table = ResultTable("results.db")
    run = table.new_run("resnet", "config.yaml", cli={"lr": 0.1}, comment="first")
    said = {
        "db_path": str(run.db_path),
        "table_db_path": str(table.db_path),
        "enabled": run.enabled,
        "run_rep": run.run_rep,
    }
    run.add_hparams(lr=0.1)
    run.add_hparams({"momentum": 0.9}, momentum=0.5)  # DeepBoard keeps the dict's value
    run.set_color("#ff8800")  # DeepBoard stores and returns the hex digits without '#'
    said.update(color=run.color, active_colors=table.active_colors, row_color=table.get_results().row_color)
    try:
        run.add_scalar("accuracy", "abc")
    except ValueError as error:  # DeepBoard's float("abc"); ours is a TypeError too
        said["not_a_number"] = str(error).startswith(("could not convert", "add_scalar('accuracy')"))
    with table.cursor as cursor:
        cursor.execute("SELECT 1, 'a'")
        said["cursor"] = [type(cursor).__module__, type(cursor).__name__, list(cursor.fetchone())]
    with table.dict_cursor as cursor:
        row = cursor.execute("SELECT 1 AS one, 'a' AS letter").fetchone()
        said["dict_cursor"] = [type(row).__name__, row["letter"], row[0], dict(row)]
    for step in range(3):
        run.add_scalar("train/loss", 1.0 / (step + 1), epoch=0)
    run.add_scalar("accuracy", "0.5")  # a numeric string, as DeepBoard's float() takes it
    said["global_step"] = dict(run.global_step)
    run.new_repetition()
    said.update(run_rep_after=run.run_rep, global_step_after=dict(run.global_step))
    run.add_scalar("train/loss", 0.25)
    run.write_result(accuracy=0.9)
    said["enabled_after"] = run.enabled
    said["formatted_scalars"] = sorted(map(list, run.formatted_scalars))
    said["accuracy"] = [point.value for point in run.get_scalar("accuracy")]
    said["hparams"] = run.get_hparams()
    said["hash_md5"] = table.get_file_hash("config.yaml", hash_algo="md5")
    with open("config.yaml") as config:
        said["hash_open_sha1"] = table.get_file_hash(config, hash_algo="sha1")
    raw = table.get_experiment_raw(run.run_id)
    said["raw"] = {key: [type(value).__name__, value] for key, value in raw.items()}
    print(json.dumps(said))


if __name__ == "__main__":
    main()
