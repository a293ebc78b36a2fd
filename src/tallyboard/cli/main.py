"""The `tallyboard` command: serve, tokens, demo, runs, compare, export, import, copy, artifacts, sync,
migrate, watch.

Each command that works on a table is `ResultTable(path_or_url)` (`read_only=True` when it only
reads) plus one public method of it (table.py), as sqlite-utils' CLI mirrors its library:
anything the CLI does is one call from Python too. Heavy modules (the dashboard, numpy,
scikit-learn, tensorboard) are imported only by the subcommand that needs them: `tallyboard --help`
answers at once. Errors are one line on stderr and a non-zero exit code; `TALLYBOARD_TRACEBACK=1`
shows the full traceback when debugging tallyboard itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tallyboard.store.location import Location
    from tallyboard.table import ResultTable

DEFAULT_TABLE = "results.db"
EXIT_ERROR = 1
EXIT_USAGE = 2  # argparse's code for a usage error
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

TARGET_HELP = f"a SQLite file or a postgresql:// URL (default: $TALLYBOARD_URL, else {DEFAULT_TABLE})"

ARTIFACTS_HELP = (
    "the artefact store (default: $TALLYBOARD_ARTIFACTS, else results.artifacts/ next to results.db)"
)


def default_target() -> str:
    return os.environ.get("TALLYBOARD_URL") or DEFAULT_TABLE


def _parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    examples: str,
    handler: Callable[[argparse.Namespace], None],
    progress: bool = True,
) -> argparse.ArgumentParser:
    """A subcommand with its examples in `--help`, and `--quiet` when it draws a progress bar."""
    parser = subparsers.add_parser(
        name,
        help=summary,
        description=summary,
        epilog="examples:\n" + examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    if progress:
        parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def cmd_serve(args: argparse.Namespace) -> None:
    from tallyboard.exchange.target import require_existing
    from tallyboard.store.location import Location

    given = args.target or default_target()
    # before the dashboard's imports; a server accepting writes creates its table
    target = Location.of(given) if args.accept_writes else require_existing(given)
    from tallyboard.dashboard import serve

    options: dict[str, Any] = {"host": args.host, "token": args.token, "read_only": args.read_only}
    options["artifacts"] = args.artifacts
    options |= {"accept_writes": args.accept_writes, "write_tokens": args.write_token or ()}
    options |= {"certfile": args.certfile, "keyfile": args.keyfile, "tokens_file": args.tokens}
    if args.port is not None:
        options["port"] = args.port
    serve(target, **options)


def cmd_tokens(args: argparse.Namespace) -> None:
    import time

    from tallyboard.dashboard import tokens

    path = args.file or tokens.default_file()
    if args.action == "list":
        for entry in tokens.read(path):
            made = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
            print(f"{entry.name}\t{entry.kind}\tmade {made}")
        return
    if not args.name:
        raise ValueError(f"`tallyboard tokens {args.action}` needs the token's name")
    if args.action == "remove":
        tokens.remove(path, args.name)
        print(f"removed {args.name} from {path} (a running server accepts it until it restarts)")
        return
    token = tokens.add(path, args.name, "write" if args.write else "read")
    print(f"{'write' if args.write else 'read'} token {args.name} (shown once; {path} keeps its hash):")
    print(token)


def cmd_demo(args: argparse.Namespace) -> None:
    import time

    from tallyboard.cli.demo import run_demo
    from tallyboard.store.location import Location

    started = time.perf_counter()
    run_ids = run_demo(args.db, epochs=args.epochs, progress=not args.quiet)
    took = time.perf_counter() - started
    table = Location.of(args.db)
    print(f"logged {len(run_ids)} runs into {table} in {took:.1f} s: {', '.join(map(str, run_ids))}")
    if args.no_serve:
        print(f"browse them with: tallyboard serve {table}")
        return
    from tallyboard.dashboard import serve

    options: dict[str, Any] = {} if args.port is None else {"port": args.port}
    serve(table, **options)


@contextmanager
def _table(target: str | Location, read_only: bool = False, **options: Any) -> Iterator[ResultTable]:
    """`ResultTable(target)` for one command, closed after it. Never through a node's spool: a
    command works on the table itself, whatever $TALLYBOARD_SPOOL says."""
    from tallyboard.table import ResultTable

    table = ResultTable(target, spool=False, read_only=read_only, **options)
    try:
        yield table
    finally:
        table.close()


def cmd_runs(args: argparse.Namespace) -> None:
    from tallyboard.analysis.runs_listing import format_runs
    from tallyboard.json_numbers import dumps

    with _table(args.target or default_target(), read_only=True) as table:
        view = table.runs_table(args.filter, args.all)
    print(dumps(view.rows, indent=2) if args.json else format_runs(view))


def cmd_compare(args: argparse.Namespace) -> None:
    from tallyboard.cli.comparison_text import format_comparison, json_text

    with _table(args.target or default_target(), read_only=True) as table:
        found = table.compare_groups(
            args.metric, args.by or [], args.runs, args.summary, args.k, args.goal, args.unit
        )
    print(json_text(found) if args.json else format_comparison(found))


def cmd_export(args: argparse.Namespace) -> None:
    with _table(args.source, read_only=True) as table:
        counts = table.export(args.out, args.format, args.runs, args.artifacts, progress=not args.quiet)
    print(f"exported {_describe(counts)} to {args.out}")


def cmd_import(args: argparse.Namespace) -> None:
    from tallyboard.store.location import Location

    into = Location.of(args.into or default_target())
    if args.artifacts is not None and args.source_kind != "tallyboard":
        raise ValueError("--artifacts applies to `import tallyboard` only (only exports carry artefacts)")
    tensorboard = args.source_kind == "tensorboard"
    if not tensorboard and (args.json or args.watch or args.finished_after is not None):
        raise ValueError("--json, --watch and --finished-after apply to `import tensorboard` only")

    def show(report: Any) -> None:  # a TensorBoard import's passes, as they end
        print(json.dumps(report.as_dict()) if args.json else f"{report.text()}\ninto {into}", flush=True)

    with _import_target(into) as table:
        if tensorboard:
            table.import_tensorboard(args.source, args.finished_after, args.watch, show, not args.quiet)
            return
        if args.source_kind == "deepboard":
            summary = table.import_deepboard(args.source, progress=not args.quiet)
        else:
            summary = table.import_export(args.source, args.artifacts, progress=not args.quiet)
    print(f"{summary} into {into}")


@contextmanager
def _import_target(into: Location) -> Iterator[ResultTable]:
    """The table an import writes into. A SQLite file created for an import that then fails before
    any run went in (a damaged export, a missing log directory) is removed again: a bad source
    leaves nothing behind, as if the file had been created only once the source was found sound."""
    path = into.sqlite_path
    new_file = path if path is not None and not os.path.lexists(path) else None
    with _table(into) as table:
        try:
            yield table
        except BaseException:
            if new_file is None or table.runs:
                raise
            table.close()
            for name in (new_file, f"{new_file}-wal", f"{new_file}-shm"):
                with suppress(FileNotFoundError):
                    os.remove(name)
            raise


def cmd_copy(args: argparse.Namespace) -> None:
    from tallyboard.store.location import Location

    destination = Location.of(args.destination)
    with _table(args.source, read_only=True) as table:
        counts = table.copy_to(destination, args.artifacts, args.artifacts_to, progress=not args.quiet)
    print(f"copied {_describe(counts)} to {destination}")


def cmd_sync(args: argparse.Namespace) -> None:
    from tallyboard.exchange.target import require_existing
    from tallyboard.store.spool_shipper import ship_all

    given = require_existing(args.spool)
    spool = given.sqlite_path
    if spool is None:
        raise ValueError(f"{str(given)!r} is no spool file: give the FILE of ResultTable(url, spool=FILE)")
    print(f"shipped {ship_all(spool)} spool entries from {spool}")


def cmd_migrate(args: argparse.Namespace) -> None:
    with _table(args.target, create=False) as table:
        before, after = table.migrate()
    if before == after:
        print(f"{table.location}: already at version {after}")
    else:
        print(f"{table.location}: migrated from schema version {before} to {after}")


def cmd_watch(args: argparse.Namespace) -> None:
    import time

    from tallyboard.alerts import parse_rule, register_alert_handler, wait_for_delivery, webhook
    from tallyboard.alerts.webhook import message
    from tallyboard.cli.watch import Watcher

    rules = [parse_rule(text) for text in args.rule]  # a bad rule is refused before the table opens
    for url in args.webhook or []:
        register_alert_handler(webhook(url))
    with _table(args.target or default_target(), read_only=args.no_record) as table:
        watcher = Watcher(table, rules, every_run=args.all_runs, record=not args.no_record)
        while True:
            for alert in watcher.poll():
                print(message(alert), flush=True)
            wait_for_delivery(30.0)
            if args.once:
                return
            time.sleep(args.interval)


def cmd_artifacts(args: argparse.Namespace) -> None:
    from tallyboard.store.artifacts import describe

    if args.action == "get" and args.name is None:
        raise ValueError(
            "`tallyboard artifacts get RUN NAME`: say which artefact (list them with `list RUN`)"
        )
    with _table(args.table or default_target(), read_only=True, artifacts=args.artifacts) as table:
        if args.action == "list":
            rows = table.list_artifacts(args.run)
            print(json.dumps([row._asdict() for row in rows], indent=2) if args.json else describe(rows))
            return
        out = Path(args.output or _file_name(args.name))
        row = table.save_artifact(args.run, args.name, out)
    print(f"saved {row.name!r} of run {args.run} ({row.size} bytes, sha256 {row.sha256[:12]}) to {out}")


def _file_name(artifact: str) -> str:
    """Where `artifacts get` saves an artefact without `-o`: the last part of its name, in the
    current folder (a logged name is a label that may say "../", never a path to write to)."""
    name = Path(artifact).name
    if name in ("", ".", ".."):
        raise ValueError(f"artefact name {artifact!r} ends in no file name: say where to save it with -o")
    return name


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {name}" for name, count in counts.items())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tallyboard",
        description="Log deep-learning runs to one reproducible result table and browse them offline.",
        epilog="examples:\n  tallyboard demo\n  tallyboard serve results.db\n"
        "  tallyboard runs --filter 'lr < 0.05'\n"
        "run `tallyboard COMMAND --help` for the options and examples of each command",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from tallyboard import __version__

    parser.add_argument("--version", action="version", version=f"tallyboard {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = _parser(
        commands,
        "serve",
        "Serve the dashboard of a result table (on 127.0.0.1 unless told otherwise).",
        "  tallyboard serve results.db\n  tallyboard serve results.db --port 8080 --read-only\n"
        "  tallyboard serve postgresql://me@db-host/experiments --host 0.0.0.0 --token s3cret\n"
        "  tallyboard serve results.db --host 0.0.0.0 --accept-writes --write-token w-s3cret\n",
        cmd_serve,
        progress=False,
    )
    serve.add_argument("target", nargs="?", metavar="PATH_OR_URL", help=TARGET_HELP)
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on")
    serve.add_argument("--token", help="access token (required, and generated if missing, off loopback)")
    serve.add_argument("--read-only", action="store_true", help="refuse every change from the browser")
    serve.add_argument("--artifacts", metavar="FOLDER_OR_URL", help=ARTIFACTS_HELP)
    serve.add_argument(
        "--accept-writes", action="store_true",
        help="accept runs from remote clients, ResultTable('http://HOST:PORT') (docs/server.md)",
    )  # fmt: skip
    serve.add_argument(
        "--write-token", action="append", metavar="TOKEN",
        help="a token that may write (repeatable; one is generated and printed when none is given)",
    )  # fmt: skip
    serve.add_argument("--certfile", help="serve HTTPS with this certificate (PEM), with --keyfile")
    serve.add_argument("--keyfile", help="the private key (PEM) of --certfile")
    serve.add_argument("--tokens", metavar="FILE", help="read and write tokens of `tallyboard tokens`")

    tokens = _parser(
        commands,
        "tokens",
        "Make, list and remove the read and write tokens a server accepts (serve --tokens FILE).",
        "  tallyboard tokens add cluster-a --write\n  tallyboard tokens add alice\n"
        "  tallyboard tokens list\n  tallyboard tokens remove cluster-a\n",
        cmd_tokens,
        progress=False,
    )
    tokens.add_argument("action", choices=("add", "list", "remove"))
    tokens.add_argument("name", nargs="?", help="the token's name (add, remove)")
    tokens.add_argument("--write", action="store_true", help="a write token (add; default: a read token)")
    tokens.add_argument("--file", help="the tokens file (default: ~/.config/tallyboard/tokens.json)")

    demo = _parser(
        commands,
        "demo",
        "Train a real sweep of small digit classifiers, log everything, and serve the dashboard.",
        "  tallyboard demo\n  tallyboard demo --db /tmp/demo.db --no-serve\n",
        cmd_demo,
    )
    demo.add_argument("--db", type=Path, default=Path("tallyboard-demo.db"), help="SQLite file to log into")
    demo.add_argument("--no-serve", action="store_true", help="stop after training instead of serving")
    demo.add_argument("--port", type=int, help="port of the dashboard")
    demo.add_argument("--epochs", type=int, default=6, help="epochs per repetition (default: 6)")

    runs = _parser(
        commands,
        "runs",
        "Print the runs table: built-in columns, hparams and results.",
        "  tallyboard runs results.db\n"
        "  tallyboard runs results.db --filter 'lr < 0.05 and status == \"finished\"'\n"
        "  tallyboard runs results.db --json | jq '.[0]'\n",
        cmd_runs,
        progress=False,
    )
    runs.add_argument("target", nargs="?", metavar="PATH_OR_URL", help=TARGET_HELP)
    runs.add_argument("--filter", metavar="EXPR", help="keep the runs for which EXPR holds")
    runs.add_argument("--json", action="store_true", help="print JSON (one object per run)")
    runs.add_argument("--all", action="store_true", help="include hidden runs")

    compare = _parser(
        commands,
        "compare",
        "Compare groups of runs on a metric (n, mean, std, confidence interval); Welch's t-test per pair.",
        "  tallyboard compare results.db --metric val/accuracy --by lr\n"
        "  tallyboard compare results.db --metric val/loss --summary best --goal min --by lr batch_size\n"
        "  tallyboard compare results.db --metric accuracy --runs 3 4 7 8 --unit run --json\n",
        cmd_compare,
        progress=False,
    )
    compare.add_argument("target", nargs="?", metavar="PATH_OR_URL", help=TARGET_HELP)
    compare.add_argument("--metric", required=True, help="a scalar tag (val/accuracy) or a result column")
    compare.add_argument("--by", nargs="+", metavar="HPARAM", help="group by these hparams")
    compare.add_argument("--runs", type=int, nargs="+", metavar="RUN_ID", help="only these runs")
    compare.add_argument(
        "--summary",
        choices=("final", "best", "last_k"),
        default="final",
        help="one number per repetition: final value, best value, mean of the last k",
    )
    compare.add_argument("--k", type=int, default=5, help="points averaged by --summary last_k (default: 5)")
    compare.add_argument("--goal", choices=("max", "min"), default="max", help="what 'best' means")
    compare.add_argument(
        "--unit",
        choices=("rep", "run"),
        default="rep",
        help="one sample per repetition, or per run (its repetitions' mean)",
    )
    compare.add_argument("--json", action="store_true", help="print JSON")

    export = _parser(
        commands,
        "export",
        "Export runs, every scalar at full resolution, hparams, results, texts and media (as PNG files).",
        "  tallyboard export results.db --out backup/\n"
        "  tallyboard export results.db --format parquet --out backup/ --runs 3 4 7\n"
        "  tallyboard import tallyboard backup/ --into restored.db\n",
        cmd_export,
    )
    export.add_argument("source", metavar="PATH_OR_URL", help="the result table to export")
    export.add_argument("--format", choices=("csv", "parquet", "jsonl"), default="csv", help="default: csv")
    export.add_argument("--out", type=Path, required=True, help="directory to write (created; must be empty)")
    export.add_argument("--runs", type=int, nargs="+", metavar="RUN_ID", help="only these runs")
    export.add_argument("--artifacts", metavar="FOLDER_OR_URL", help=ARTIFACTS_HELP)

    importer = _parser(
        commands,
        "import",
        "Import runs from TensorBoard logs, a DeepBoard 0.3 table, or a tallyboard export.",
        "  tallyboard import tensorboard runs/ --into results.db\n"
        "  tallyboard import deepboard result_table.db --into results.db\n"
        "  tallyboard import tallyboard backup/ --into restored.db\n"
        "importing the same source twice adds nothing the second time\n",
        cmd_import,
    )
    importer.add_argument(
        "source_kind",
        choices=("tensorboard", "deepboard", "tallyboard"),
        metavar="KIND",
        help="tensorboard (a log directory), deepboard (a DeepBoard .db file) or "
        "tallyboard (a directory written by `tallyboard export`)",
    )
    importer.add_argument("source", type=Path, metavar="SOURCE", help="the log directory, file or export")
    importer.add_argument("--into", metavar="PATH_OR_URL", help=TARGET_HELP)
    importer.add_argument("--json", action="store_true", help="tensorboard: print the summary as JSON")
    importer.add_argument(
        "--watch",
        action="store_true",
        help="tensorboard: keep importing what is new until interrupted (Ctrl-C)",
    )
    importer.add_argument(
        "--finished-after",
        type=float,
        metavar="SECONDS",
        help="tensorboard: a run whose files have not changed for this long is finished (default: 600)",
    )
    importer.add_argument(
        "--artifacts",
        metavar="FOLDER_OR_URL",
        help="tallyboard: the target's artefact store, where the export's artefact files go (default:"
        " $TALLYBOARD_ARTIFACTS, else results.artifacts/ next to results.db; PostgreSQL needs one)",
    )

    copy = _parser(
        commands,
        "copy",
        "Copy a whole result table to another file or engine, losslessly; copying twice changes nothing.",
        "  tallyboard copy results.db postgresql://me@db-host/experiments\n"
        "  tallyboard copy postgresql://me@db-host/experiments snapshot.db\n",
        cmd_copy,
    )
    copy.add_argument("source", metavar="SRC", help="the table to copy from (file or URL)")
    copy.add_argument("destination", metavar="DST", help="the table to copy into (file or URL)")
    copy.add_argument("--artifacts", metavar="FOLDER_OR_URL", help="the source's artefact store (default: "
                      "$TALLYBOARD_ARTIFACTS, else next to a SQLite source)")  # fmt: skip
    copy.add_argument("--artifacts-to", metavar="FOLDER_OR_URL", help="the destination's artefact store "
                      "(default: next to a SQLite destination; required for PostgreSQL)")  # fmt: skip

    arts = _parser(
        commands,
        "artifacts",
        "List the files kept with a run, or save one (`run.log_artifact`).",
        "  tallyboard artifacts list 7\n  tallyboard artifacts get 7 model.ckpt -o best.ckpt\n"
        "  tallyboard artifacts get 7 model.ckpt --table postgresql://me@db-host/experiments"
        " --artifacts s3://bucket/prefix\n",
        cmd_artifacts,
        progress=False,
    )
    arts.add_argument("action", choices=("list", "get"), help="list the run's artefacts, or get one")
    arts.add_argument("run", type=int, metavar="RUN", help="the run id")
    arts.add_argument("name", nargs="?", metavar="NAME", help="the artefact to get (with `get`)")
    arts.add_argument("-o", "--output", metavar="PATH", help="where to save it (default: its name, here)")
    arts.add_argument("--table", metavar="PATH_OR_URL", help=TARGET_HELP)
    arts.add_argument("--artifacts", metavar="FOLDER_OR_URL", help=ARTIFACTS_HELP)
    arts.add_argument("--json", action="store_true", help="print the list as JSON")

    sync = _parser(
        commands,
        "sync",
        "Ship what a spool holds to its database now (a process logging with the spool does it on its own).",
        "  tallyboard sync /local/scratch/tallyboard-spool.db\n",
        cmd_sync,
        progress=False,
    )
    sync.add_argument("spool", metavar="SPOOL", help="the spool file (ResultTable(url, spool=SPOOL))")

    migrate = _parser(
        commands,
        "migrate",
        "Bring a table written by an older tallyboard to this version (logging into it does it too).",
        "  tallyboard migrate results.db\n  tallyboard migrate postgresql://me@db-host/experiments\n",
        cmd_migrate,
        progress=False,
    )
    migrate.add_argument("target", metavar="PATH_OR_URL", help="the table to migrate")

    watch = _parser(
        commands,
        "watch",
        "Evaluate alert rules on the runs other processes log into a table; print, record and post alerts.",
        "  tallyboard watch results.db --rule nonfinite:train/loss\n"
        "  tallyboard watch results.db --rule threshold:val/loss:above=5 --once --all-runs\n"
        "  tallyboard watch postgresql://me@db-host/experiments --rule 'behind:val/acc:leader=12:mode=max'"
        " --webhook https://chat.example/hook\n",
        cmd_watch,
        progress=False,
    )
    watch.add_argument("target", nargs="?", metavar="PATH_OR_URL", help=TARGET_HELP)
    rule_help = "KIND:METRIC[:NAME=VALUE]...[:stop] (docs/alerts.md); repeat for more"
    watch.add_argument("--rule", action="append", required=True, metavar="RULE", help=rule_help)
    watch.add_argument("--interval", type=float, default=10.0, help="seconds between polls (default: 10)")
    watch.add_argument("--once", action="store_true", help="evaluate what is logged now, then exit")
    watch.add_argument("--all-runs", action="store_true", help="every run, not only the running ones")
    watch.add_argument("--webhook", action="append", metavar="URL", help="post each alert to URL as JSON")
    watch.add_argument("--no-record", action="store_true", help="only print and post alerts")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tallyboard` console script and of `python -m tallyboard`."""
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    if not arguments:  # a bare `tallyboard`: the commands and what they do, not a terse usage line
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(arguments)
    handler: Callable[[argparse.Namespace], None] = args.handler
    try:
        handler(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `tallyboard runs | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as error:  # every failure is one line; the traceback is opt-in
        if os.environ.get("TALLYBOARD_TRACEBACK"):
            raise
        print(f"tallyboard {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def _one_line(error: Exception) -> str:
    if isinstance(error, ModuleNotFoundError) and not (error.name or "tallyboard").startswith("tallyboard"):
        from tallyboard.extras import install_hint

        return install_hint(error.name or "a module")
    message = " ".join(str(error).split()) or type(error).__name__
    from tallyboard.errors import TallyboardError

    if isinstance(error, (FileNotFoundError, ValueError, TallyboardError)):  # written for the user
        return message
    return f"{type(error).__name__}: {message}"
