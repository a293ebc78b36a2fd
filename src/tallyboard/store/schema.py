"""The result-table schema, version by version.

One schema serves SQLite and PostgreSQL; `MIGRATIONS[n]` takes a store from version n to n + 1
(SQL statements separated by ``;``, written with the same placeholders as the DDL below).

Conventions every reader relies on:
- times of runs are float seconds since the Unix epoch (`start_time`, `end_time`, `updated_at`,
  `repetitions.start_time`);
- `walltime_ms` of a logged record (scalar, media, text) is an INTEGER number of milliseconds since
  its repetition started, unless the user gave a walltime (then it is that value in seconds x 1000,
  rounded to the nearest, halves away from zero). Integers because SQLite stores small integers in
  1-4 bytes where a REAL takes 8: this is what keeps a scalar row under 32 bytes on disk;
- run id -1 is the debug run (overwritten by the next one); ids of real runs start at 1 and are
  dense: each new one is the largest id + 1, chosen with the insert (`Store.create_run`);
- tags (`split/name`, further slashes kept whole) are interned once in `tags`; the empty tag ''
  stands for "no tag" (an image logged with tag=None);
- a scalar `value` of NULL means NaN (SQLite cannot store NaN; +-inf are stored as they are);
  two scalars with the same (run_id, tag_id, rep, step) overwrite: the last one logged wins;
- `scalar_blocks` (v2) summarises every scalar series per block of `BLOCK_STEPS` (256) steps:
  `block` is `step >> BLOCK_BITS` (floor division, negative steps included), and `lowest` /
  `highest` are MIN(value) / MAX(value) of the block's rows, NULL when all of them are NaN. A block
  row exists exactly when the block holds scalars; the writer recomputes each block a batch
  touched from the `scalars` rows in the same transaction (so an overwritten step never leaves a
  stale extreme behind). It is what lets the dashboard bucket a million points from ~4,000 rows;
- `epoch` is NULL when the user did not give one;
- `rep` is the repetition, 0 for the first (`LogWriter.new_repetition()` starts the next one);
- hparam and result values are JSON text (`json.dumps` of a Python scalar: number, string, bool,
  null); NaN/inf results are written as the JSON tokens NaN/Infinity, which `json.loads` reads back;
- `runs.cli` is the JSON object the user passed; `runs.unique_key` is the JSON array of the values
  of the table's unique columns (NULL included as null), set for runs that take part in the
  uniqueness check (NULL for the debug run);
- `runs.status` is 'running', 'finished' or 'failed'; `runs.hidden` is 0 or 1;
- `runs.updated_at` changes with every edit of a run's row, hparams or results, so live views
  can ask for "what changed since T";
- `media.kind` is 'image' or 'figure'; `texts.kind` is 'text', 'fragment' (HTML) or 'table' (a
  logged table as JSON, store/table_content.py) or 'alert' (an alert as JSON, store/alert_content.py);
- `columns` lists every column the result table can show: `kind` is 'run' (a column of `runs`),
  'hparam' or 'result'; `position` NULL means hidden from the default view;
- `meta` holds 'schema_version' (integer as text) and 'unique_columns' (JSON array of names);
- `quarantine` (v3) keeps the records the database rejected after they passed the checks at the
  call (a trigger, a constraint added by hand, a limit of another engine): `kind` is 'scalar',
  'image', 'figure', 'text', 'fragment', 'table', 'histogram' (v5), 'hparam', 'result', 'repetition'
  or 'run_update'; `tag` the
  record's tag or name (NULL when it has none); `error` the database's message; `record` the
  whole record as JSON (`store/quarantine.py`: lossless, PNG bytes as base64); `quarantined_at`
  float seconds since the Unix epoch. A run's quarantined records go with the run;
- `runs_by_unique_key` (v3) indexes the first `UNIQUE_KEY_PREFIX` characters of `unique_key`, not
  the whole: a long CLI dict would make the key longer than PostgreSQL's index rows can be
  (2704 bytes); the lookup compares the prefix through the index, then the whole key;
- `runs.note` and `runs.tag` are NULL when empty (v4; v1 to v3 stored ''), so the filter
  `note == null` finds runs without a note;
- (v5, imports of foreign logs) `scalar_events` holds, for a series whose steps did not strictly
  increase in the source (a step logged again, or a step counter that went back), EVERY point of
  the series in source order: `seq` is the point's index in the series (0 = first). `scalars` still
  holds one row per step (the last one); series that never repeat a step have no rows here;
- `raw_summaries` keeps summaries the table has no kind for as their source bytes: `format` names
  the protobuf message ('HistogramProto' or 'TensorProto'); imports before v7 kept histograms
  here, imports since write them to `histograms`;
- `import_files` remembers how far each imported file was read (`read_to`: bytes; the next record
  starts there), into which run, the wall time (seconds since the epoch) of its last event read,
  and `plugins`, the JSON object {tag: plugin name} learned from the directory's files so far (TF2
  writes a tag's plugin only with its first value), so importing the same logs again adds only
  what is new, understood as the first import understood it. A row whose `source` is
  '<incomplete import>' (`store/imported.py` INCOMPLETE; `name` the run id as text, `read_to` 0)
  marks a run whose import began and has not completed: written with the run, deleted once
  everything of it is, so that importing again knows the run is partial;
- `run_tags` (v6) holds a run's tags, several per run (`LogWriter.add_tags`), one row each, each a
  non-empty key (`values.check_key`); DeepBoard's single `runs.tag` is a separate thing and stays.
  The `columns` row 'tags' (kind 'run', hidden by default) lets the filter language and the
  dashboard name them; a run's tags go with the run;
- `histograms` (v7) holds one row per `LogWriter.add_histogram` call (or imported TensorBoard
  histogram): `count` finite values, `nonfinite` NaN/inf values left out of everything else,
  `minimum`/`maximum` NULL when `count` is 0, `total`/`total_squares` the sum and sum of squares,
  `edges` little-endian float64 bucket edges (len(counts) + 1 of them) and `counts` little-endian
  int64 bucket counts, packed with the stdlib `array` module (`tallyboard/histogram.py`).
- `console` (v8) holds the lines a run captured from its process (`capture_console=True`):
  `stream` is 'stdout', 'stderr' or 'log' (a `logging` record, `line` = "LEVEL name: message"),
  `walltime_ms` as for other records, `console_id` increases in capture order (the dashboard's
  live tail asks for ids after the last it has);
- `environments` (v8) holds one JSON object per run (`environment.py`): interpreter, platform,
  host, CPU/GPU, packages and the allowlisted environment variables; since v12 each distinct
  object is kept once, in `environment_contents` (`sha256`: the hex sha256 of its UTF-8 JSON text,
  `content`: that text), and `environments` holds the run's `sha256` (store/environments.py);
  a text stays when the last run linking to it is deleted;
- `scalar_blocks` (v14; it replaces v1's `scalars`, one row per point, and v2's `scalar_blocks`,
  a min/max of every 256 steps) holds each scalar series (run_id, tag_id, rep) as blocks of points,
  keyed by their `first_step`. The blocks of a series never overlap: `first_step` <=
  `last_step` < the next block's `first_step`, and inside a block the steps strictly increase, so a
  series read in `first_step` order is its points in step order, one per step (a step logged
  again replaced its point in the block that holds it: the last value wins). `n` is the block's
  number of points (at most `BLOCK_POINTS`, but blocks that absorbed out-of-order steps may hold
  up to twice that); `lowest`/`highest` its MIN/MAX value with NaN skipped (NULL when all are
  NaN); `first_value`/`last_value` the values at `first_step`/`last_step` (NULL for
  NaN). The points are in `step_data`, `walltime_data` (int64 deltas, zlib'd), `value_data`
  (float64, little-endian, NaN and infinities exact) and `epoch_data` (NULL when no point has an
  epoch): store/block_codec.py. Walltimes are `walltime_ms` as for other records. The last block
  of a series a process writes is rewritten in place as it grows (store/open_blocks.py);
- `texts.markdown` (v8) is 1 when the text was logged with `markdown=True` (rendered, then
  sanitised, by the dashboard), else 0;
- `artifacts` (v9) lists the files kept with a run (`tallyboard/store/artifacts.py`): `name` is unique
  per run (logging a name again replaces the entry: the last one wins), `sha256` names the blob in
  the table's artefact store, `size` is in bytes, `step` NULL when not given, `logged_at` float
  seconds since the Unix epoch (when `log_artifact` was called). The blobs live outside the
  database; a run's entries go with the run, its blobs stay (other runs may share them).
- `hparams` and `results` (v10) keep a typed copy of each value next to its JSON text:
  `value_rank`, `value_number`, `value_text` (`store/indexed_values.py` says what each holds), indexed
  by (name, rank, number, text, run_id) so the dashboard filters and sorts 100,000 runs in SQL;
  `runs_hidden` indexes the (few) hidden runs. Every writer of a value row fills them.
- `meta` 'runs_deleted' (v11) counts the runs ever deleted (integer as text), raised in the
  transaction that deletes one. With the largest run id and the latest `updated_at` (two index
  seeks) it tells a reader that the runs changed without counting them (`COUNT(*)` reads every
  run: 25 ms at 100,000 on every page of the dashboard).
- `runs.error` (v13) is how a failed run failed, as the JSON object {"type", "message",
  "traceback"} (`run/exit_paths.py`: an uncaught exception, a non-zero exit, a signal), NULL for a
  run that did not fail so; `runs.rerun_of` (v13) is the run this one runs again
  (`on_duplicate="new"`), NULL for a first run. Both are added in Python (migrations.run_end_and_reruns).
- `runs.window_tags` (v15) is the JSON array of the run's tags whose steps count the windows of a
  `tallyboard.monitor` Stat (0, 1, 2, ...: logged by `ResultTableEventHandler` before the run had a
  training step), sorted; NULL when none does. It is what lets a chart say "window" under such a
  series rather than "step" (added in Python: migrations.window_tags).
"""

SCHEMA_VERSION = 15
UNIQUE_KEY_PREFIX = 256
BLOCK_BITS = 8
BLOCK_STEPS = 1 << BLOCK_BITS  # steps per row of scalar_blocks (why 256: docs/dashboard.md)

# Engine-neutral DDL; each engine module substitutes the few type names that differ.
# {blob} -> BLOB / BYTEA, {pk} -> INTEGER PRIMARY KEY / BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
# {without_rowid} -> "WITHOUT ROWID" / "".
SCHEMA_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    run_id         {pk},
    experiment     TEXT NOT NULL,
    config_path    TEXT,
    config_hash    TEXT,
    config_content TEXT,
    cli            TEXT,
    command        TEXT,
    comment        TEXT,
    note           TEXT NOT NULL DEFAULT '',
    tag            TEXT NOT NULL DEFAULT '',
    color          TEXT,
    status         TEXT NOT NULL DEFAULT 'running',
    start_time     DOUBLE PRECISION NOT NULL,
    end_time       DOUBLE PRECISION,
    git_commit     TEXT,
    git_diff       TEXT,
    hidden         INTEGER NOT NULL DEFAULT 0,
    unique_key     TEXT,
    updated_at     DOUBLE PRECISION NOT NULL
);
CREATE INDEX runs_by_unique_key ON runs (unique_key);
CREATE INDEX runs_by_updated_at ON runs (updated_at);
CREATE TABLE tags (
    tag_id {pk},
    name   TEXT NOT NULL UNIQUE
);
CREATE TABLE repetitions (
    run_id     BIGINT NOT NULL,
    rep        INTEGER NOT NULL,
    start_time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, rep)
);
CREATE TABLE hparams (
    run_id BIGINT NOT NULL,
    name   TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE results (
    run_id BIGINT NOT NULL,
    name   TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE columns (
    name     TEXT PRIMARY KEY,
    kind     TEXT NOT NULL,
    alias    TEXT NOT NULL,
    position INTEGER
);
CREATE TABLE scalars (
    run_id      BIGINT NOT NULL,
    tag_id      INTEGER NOT NULL,
    rep         INTEGER NOT NULL,
    step        BIGINT NOT NULL,
    epoch       BIGINT,
    walltime_ms BIGINT NOT NULL,
    value       DOUBLE PRECISION,
    PRIMARY KEY (run_id, tag_id, rep, step)
) {without_rowid};
CREATE TABLE media (
    media_id    {pk},
    run_id      BIGINT NOT NULL,
    tag_id      INTEGER NOT NULL,
    rep         INTEGER NOT NULL,
    step        BIGINT NOT NULL,
    epoch       BIGINT,
    walltime_ms BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    width       INTEGER NOT NULL,
    height      INTEGER NOT NULL,
    png         {blob} NOT NULL
);
CREATE INDEX media_by_run ON media (run_id, tag_id, rep, step);
CREATE TABLE texts (
    text_id     {pk},
    run_id      BIGINT NOT NULL,
    tag_id      INTEGER NOT NULL,
    rep         INTEGER NOT NULL,
    step        BIGINT NOT NULL,
    epoch       BIGINT,
    walltime_ms BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    content     TEXT NOT NULL
);
CREATE INDEX texts_by_run ON texts (run_id, tag_id, rep, step);
"""

# The v1 -> v2 backfill: every block of every series, from `scalars` (the writer recomputes one
# block at a time: `Store._rebuild_blocks`).
BACKFILL_BLOCKS = f"""
INSERT INTO scalar_blocks (run_id, tag_id, rep, block, lowest, highest)
SELECT run_id, tag_id, rep, step >> {BLOCK_BITS}, MIN(value), MAX(value) FROM scalars
GROUP BY run_id, tag_id, rep, step >> {BLOCK_BITS}"""

SCALAR_BLOCKS = """
CREATE TABLE scalar_blocks (
    run_id  BIGINT NOT NULL,
    tag_id  INTEGER NOT NULL,
    rep     INTEGER NOT NULL,
    block   BIGINT NOT NULL,
    lowest  DOUBLE PRECISION,
    highest DOUBLE PRECISION,
    PRIMARY KEY (run_id, tag_id, rep, block)
) {without_rowid}"""

# v3: records the database rejected, and an index on the unique key that any key fits.
QUARANTINE = f"""
CREATE TABLE quarantine (
    quarantine_id  {{pk}},
    run_id         BIGINT,
    kind           TEXT NOT NULL,
    tag            TEXT,
    error          TEXT NOT NULL,
    record         TEXT NOT NULL,
    quarantined_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX quarantine_by_run ON quarantine (run_id);
DROP INDEX runs_by_unique_key;
CREATE INDEX runs_by_unique_key ON runs (substr(unique_key, 1, {UNIQUE_KEY_PREFIX}))"""

# v5: what imports of foreign logs keep beyond one point per step (see the conventions above).
IMPORT_TABLES = """
CREATE TABLE scalar_events (
    run_id      BIGINT NOT NULL,
    tag_id      INTEGER NOT NULL,
    rep         INTEGER NOT NULL,
    seq         BIGINT NOT NULL,
    step        BIGINT NOT NULL,
    epoch       BIGINT,
    walltime_ms BIGINT NOT NULL,
    value       DOUBLE PRECISION,
    PRIMARY KEY (run_id, tag_id, rep, seq)
) {without_rowid};
CREATE TABLE raw_summaries (
    raw_id      {pk},
    run_id      BIGINT NOT NULL,
    tag_id      INTEGER NOT NULL,
    rep         INTEGER NOT NULL,
    step        BIGINT NOT NULL,
    walltime_ms BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    format      TEXT NOT NULL,
    data        {blob} NOT NULL
);
CREATE INDEX raw_summaries_by_run ON raw_summaries (run_id, tag_id, rep, step);
CREATE TABLE import_files (
    source  TEXT NOT NULL,
    name    TEXT NOT NULL,
    run_id  BIGINT NOT NULL,
    read_to BIGINT NOT NULL,
    last_wall DOUBLE PRECISION,
    plugins   TEXT NOT NULL DEFAULT '{{}}',
    PRIMARY KEY (source, name)
)"""

# v6: several tags per run, and the column that names them (hidden by default, so the result
# table's DeepBoard layout is unchanged). An hparam or result already named 'tags' keeps its row.
RUN_TAGS = """
CREATE TABLE run_tags (
    run_id BIGINT NOT NULL,
    tag    TEXT NOT NULL,
    PRIMARY KEY (run_id, tag)
);
CREATE INDEX run_tags_by_tag ON run_tags (tag);
INSERT INTO columns (name, kind, alias, position) VALUES ('tags', 'run', 'Tags', NULL)
ON CONFLICT (name) DO NOTHING"""

# v7: histograms (one self-contained step).
HISTOGRAMS = """
CREATE TABLE histograms (
    histogram_id  {pk},
    run_id        BIGINT NOT NULL,
    tag_id        INTEGER NOT NULL,
    rep           INTEGER NOT NULL,
    step          BIGINT NOT NULL,
    epoch         BIGINT,
    walltime_ms   BIGINT NOT NULL,
    count         BIGINT NOT NULL,
    nonfinite     BIGINT NOT NULL,
    minimum       DOUBLE PRECISION,
    maximum       DOUBLE PRECISION,
    total         DOUBLE PRECISION NOT NULL,
    total_squares DOUBLE PRECISION NOT NULL,
    edges         {blob} NOT NULL,
    counts        {blob} NOT NULL
);
CREATE INDEX histograms_by_run ON histograms (run_id, tag_id, rep, step)"""

# v8: a run's captured console and its environment (idempotent: IF NOT EXISTS).
CONSOLE_AND_ENVIRONMENT = """
CREATE TABLE IF NOT EXISTS console (
    console_id  {pk},
    run_id      BIGINT NOT NULL,
    rep         INTEGER NOT NULL,
    walltime_ms BIGINT NOT NULL,
    stream      TEXT NOT NULL,
    line        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS console_by_run ON console (run_id, console_id);
CREATE TABLE IF NOT EXISTS environments (
    run_id  BIGINT PRIMARY KEY,
    content TEXT NOT NULL
)"""  # + texts.markdown: migrations.markdown_flag_on_texts

# v9: the files kept with each run; the bytes are in the artefact store, named by `sha256`.
ARTIFACTS = """
CREATE TABLE artifacts (
    run_id    BIGINT NOT NULL,
    name      TEXT NOT NULL,
    kind      TEXT NOT NULL,
    size      BIGINT NOT NULL,
    sha256    TEXT NOT NULL,
    step      BIGINT,
    logged_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, name)
)"""

# v10: typed copies of hparam and result values, and their indexes (store/indexed_values.py). The
# columns are added and backfilled in Python (migrations.typed_values): the text's type is
# PostgreSQL's "C" collation there, so ordering by it is by code point as on SQLite and in Python.
TYPED_VALUES_STEP = 9  # the version it upgrades from (renumber here only)
TYPED_VALUE_INDEXES = """
CREATE INDEX hparams_by_value ON hparams (name, value_rank, value_number, value_text, run_id);
CREATE INDEX results_by_value ON results (name, value_rank, value_number, value_text, run_id);
CREATE INDEX runs_hidden ON runs (run_id) WHERE hidden <> 0"""

# v11: the count of deleted runs, part of the runs' version (`DashboardQueries.runs_version`).
RUNS_DELETED = "INSERT INTO meta (key, value) VALUES ('runs_deleted', '0')"

# v12: each distinct environment stored once (store/environments.py). The texts get their table;
# the links are copied into a new table of the new shape, each text named by its sha256 on the way
# (in Python: migrations.shared_environments), which then takes the old table's name.
SHARED_ENVIRONMENTS_STEP = 11  # the version it upgrades from
SHARED_ENVIRONMENTS = """
CREATE TABLE environment_contents (
    sha256  TEXT PRIMARY KEY,
    content TEXT NOT NULL
)"""
ENVIRONMENT_LINKS = """
CREATE TABLE environments_v12 (
    run_id BIGINT PRIMARY KEY,
    sha256 TEXT NOT NULL
)"""
ENVIRONMENT_LINKS_SWAP = """
DROP TABLE environments;
ALTER TABLE environments_v12 RENAME TO environments"""

# v13: how a run failed, and which run it runs again (columns of `runs`, added in Python:
# migrations.run_end_and_reruns).
RUN_END_AND_RERUNS_STEP = 12  # the version it upgrades from (renumber here only)

# v14: scalars as blocks of points (store/block_codec.py). The table is built from `scalars` in
# Python (migrations.scalars_as_blocks), then takes the old summaries' name.
BLOCKS_STEP = 13  # the version it upgrades from
BLOCK_POINTS = 1024  # points per block the writer fills before it starts the next one
SCALAR_BLOCKS_V14 = """
CREATE TABLE {table} (
    run_id        BIGINT NOT NULL,
    tag_id        INTEGER NOT NULL,
    rep           INTEGER NOT NULL,
    first_step    BIGINT NOT NULL,
    last_step     BIGINT NOT NULL,
    n             INTEGER NOT NULL,
    lowest        DOUBLE PRECISION,
    highest       DOUBLE PRECISION,
    first_value   DOUBLE PRECISION,
    last_value    DOUBLE PRECISION,
    step_data     {blob} NOT NULL,
    walltime_data {blob} NOT NULL,
    value_data    {blob} NOT NULL,
    epoch_data    {blob},
    PRIMARY KEY (run_id, tag_id, rep, first_step)
)"""
BLOCKS_SWAP = """
DROP TABLE scalar_blocks;
DROP TABLE scalars;
ALTER TABLE scalar_blocks_v14 RENAME TO scalar_blocks"""

# v15: runs.window_tags (added in Python: migrations.window_tags).
WINDOW_TAGS_STEP = 14  # the version it upgrades from

# MIGRATIONS[n] upgrades a store at version n to n + 1. Version 1 is the first released schema.
MIGRATIONS: dict[int, str] = {
    1: SCALAR_BLOCKS + ";" + BACKFILL_BLOCKS,  # v2: block summaries, backfilled
    2: QUARANTINE,  # v3: quarantined records; the unique key indexed by its prefix
    # 3 -> 4: empty note and tag become NULL; differs per engine: migrations.nullable_note_and_tag
    4: IMPORT_TABLES,  # v5: every point of repeated steps, raw histograms, import progress
    5: RUN_TAGS,  # v6: several tags per run
    6: HISTOGRAMS,  # v7: histograms
    7: CONSOLE_AND_ENVIRONMENT,  # v8: console lines, environments; texts.markdown in Python
    8: ARTIFACTS,  # v9: artefacts listed with their run
    # 9 -> 10: typed hparam/result values; in Python: migrations.typed_values
    10: RUNS_DELETED,  # v11: deleted runs counted
    SHARED_ENVIRONMENTS_STEP: SHARED_ENVIRONMENTS,  # v12: environments shared; the links in Python
}
