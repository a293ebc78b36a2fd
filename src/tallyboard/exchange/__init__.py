"""Moving runs in and out of a result table: lossless export to files, and imports of whole runs.

`bundle` is the store-neutral shape of one complete run that every importer produces; `formats`
reads and writes the row files of an export (CSV, Parquet, JSON lines); `export` and `reimport` are
the two directions of a lossless round trip. Adapters for other tools' logs live in
`tallyboard.integrations`.
"""
