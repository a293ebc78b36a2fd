"""PostgreSQL connections that work the same directly and through PgBouncer in transaction pooling.

Why this exists: a cluster of hundreds of training processes needs a pooler (each process holds a
connection; PostgreSQL allows `max_connections`, 100 by default), and PgBouncer's transaction
pooling hands a client a server connection for one transaction at a time. Anything that outlives a
transaction on the server session then leaks to other clients or is gone at the next one. So:
- no session state: a reading connection does not `SET default_transaction_read_only` (that would
  make some other client's writes fail); it runs each statement in its own `BEGIN READ ONLY`
  transaction, pipelined with the statement, and no pipeline ends a transaction
  (`pipelined_transaction` says why);
- no server-side prepared statements (psycopg prepares a query it has run 5 times; PgBouncer
  before 1.21 sends the next EXECUTE to a server connection that never saw the PREPARE);
- locks are transaction-scoped advisory locks (store/postgres.py), never session ones;
- the connect call is the one place that reads the location's password (store/location.py), and
  what libpq says about a URL it cannot use is scrubbed of it before it travels on;
- errors a cluster produces name their remedy: a server out of connection slots points to
  PgBouncer, and PgBouncer refusing the `options` startup parameter (`?options=-csearch_path=...`)
  points to setting the search_path on the pooler's database alias instead (docs/cluster.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus

if TYPE_CHECKING:
    from tallyboard.store.location import Location

GUIDE = "docs/cluster.md"
# The server's words when every connection slot is taken (SQLSTATE 53300, not exposed at connect).
_SERVER_FULL = ("too many clients", "remaining connection slots are reserved")
_OPTIONS_REFUSED = "unsupported startup parameter: options"


class ServerFull(psycopg.OperationalError):
    """The server has no connection slot left for this process."""


class OptionsRefused(psycopg.OperationalError):
    """A pooler in front of the server refused the URL's `options` parameter."""


def connect(location: Location, **kwargs: Any) -> psycopg.Connection:
    """An autocommit connection without server-side prepared statements; a refusal a cluster
    produces raises with its remedy in the message."""
    try:
        return psycopg.connect(location.secret(), autocommit=True, prepare_threshold=None, **kwargs)
    except psycopg.Error as error:
        refusal = _refusal(error, location.scrub(str(error)))
    raise refusal  # outside the handler: the error libpq worded is not even its context


def _refusal(error: psycopg.Error, reason: str) -> psycopg.Error:
    """What to raise for a connection refused with `reason` (`error`'s words, scrubbed): the
    error itself when its words needed no scrubbing (without the errors of psycopg's earlier
    attempts it chains, which were not scrubbed), else one of its class in those words."""
    if any(words in reason for words in _SERVER_FULL):
        return ServerFull(
            f"{reason.strip()}\nThe PostgreSQL server has no connection left for this process: every"
            " training process holds one. Put PgBouncer in transaction pooling mode between the"
            f" processes and the server (see {GUIDE}), or raise max_connections."
        )
    if _OPTIONS_REFUSED in reason:
        return OptionsRefused(
            f"{reason.strip()}\nA pooler (PgBouncer) refuses `options=` in the URL. Set the"
            " search_path on the pooler's side instead: `connect_query='SET search_path TO ...'`"
            f" on its database alias, or ALTER ROLE ... SET search_path (see {GUIDE})."
        )
    if reason != str(error):
        return type(error)(reason)
    error.__cause__ = error.__context__ = None
    return error


@contextlib.contextmanager
def pipelined_transaction(conn: psycopg.Connection, read_only: bool) -> Iterator[None]:
    """Run the block's statements in one transaction sent as one pipeline, and commit after it: the
    block should only send statements, and fetch their results after it ends. A connection already
    in a transaction of psycopg's (not autocommit) sends the block in that one, which its owner ends.

    Why the COMMIT is not part of the pipeline: leaving a pipeline, psycopg follows its Sync with a
    Flush whenever results are still on their way. When the Sync ended the transaction, PgBouncer in
    transaction pooling may already have taken the server connection back when that Flush arrives;
    it then hands the Flush a server connection of the pool, which never answers a Flush with the
    ReadyForQuery PgBouncer waits for to take it back, so every other client of that pool waits for
    a connection for good (tests/store/test_pgbouncer.py reproduces it). Ending the pipeline inside
    the transaction keeps the server connection with this client until the COMMIT's answer."""
    begin = conn.autocommit
    try:
        with conn.pipeline():
            if begin:
                conn.execute("BEGIN READ ONLY" if read_only else "BEGIN")
            yield
        if begin:
            conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        raise
