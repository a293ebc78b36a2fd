#!/usr/bin/env bash
# Makes sure the real services the tests use are there: a PostgreSQL server the tests can log in to,
# Debian's pgbouncer (the tests start their own), Debian's headless Chromium, and Debian's nodejs
# (runs the dashboard scripts' unit tests, tests/js). Where one is missing it installs it with apt
# and starts it (needs root or sudo). It changes how PostgreSQL authenticates (a `trust` line for
# user postgres on 127.0.0.1 in pg_hba.conf) only on a CI machine (CI=true) or when asked:
#
#   bash scripts/ensure_services.sh --configure-postgres
#
# Elsewhere it prints that command instead, and the PostgreSQL tests skip (under CI=true a skip is a
# failure). To test against a server of your own instead, give its URL (any database the user may
# create databases in; the tests make and drop a scratch database per session):
#
#   export TALLYBOARD_TEST_PG_URL=postgresql://me:secret@localhost:5432/postgres
set -uo pipefail

configure_postgres=0
[ "${CI:-}" = true ] && configure_postgres=1
for arg in "$@"; do
  case "$arg" in
    --configure-postgres) configure_postgres=1 ;;
    *) echo "usage: $0 [--configure-postgres]" >&2; exit 2 ;;
  esac
done

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_ready=0
apt_install() {
  if [ $apt_ready = 0 ]; then as_root apt-get update -qq || return 1; apt_ready=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}
can_log_in() { psql "$1" -Atqc 'SELECT 1' >/dev/null 2>&1; }

# The name the tests read (tests/pg_support.py); TALLYBOARD_TEST_PG is its older spelling.
given_url="${TALLYBOARD_TEST_PG_URL:-${TALLYBOARD_TEST_PG:-}}"
default_url=postgresql://postgres@127.0.0.1:5432/test

if [ -n "$given_url" ]; then
  command -v psql >/dev/null || apt_install postgresql-client || true
  if can_log_in "$given_url"; then
    echo "== PostgreSQL: using the server in TALLYBOARD_TEST_PG_URL =="
  else
    echo "warning: cannot log in with TALLYBOARD_TEST_PG_URL; the PostgreSQL tests will skip (fail under CI=true)"
  fi
else
  pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
  if ! pg_up; then
    echo "== installing and starting PostgreSQL on 127.0.0.1:5432 =="
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then as_root pg_createcluster 15 main || true; fi
    for v in $(ls /etc/postgresql 2>/dev/null); do
      as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start 2>/dev/null || as_root pg_ctlcluster "$v" main start || true
    done
    for _ in $(seq 1 30); do pg_up && break; sleep 1; done
    pg_up || echo "warning: PostgreSQL did not come up on 127.0.0.1:5432"
  fi
  if pg_up && ! can_log_in "$default_url"; then
    if [ $configure_postgres = 1 ]; then
      # A fresh cluster asks for a password on TCP: trust user postgres from 127.0.0.1 only.
      echo "== configuring PostgreSQL for the tests: trust user postgres on 127.0.0.1, database test =="
      for hba in /etc/postgresql/*/main/pg_hba.conf; do
        as_root grep -q '^host all postgres 127.0.0.1/32 trust' "$hba" ||
          as_root sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
      done
      for v in $(ls /etc/postgresql 2>/dev/null); do as_root pg_ctlcluster "$v" main reload || true; done
      psql -h 127.0.0.1 -U postgres -d postgres -qc 'CREATE DATABASE test' 2>/dev/null || true
      can_log_in "$default_url" || echo "warning: still cannot log in as $default_url"
    else
      echo "PostgreSQL runs on 127.0.0.1:5432, but the tests cannot log in as $default_url."
      echo "Either let this script allow it (adds a trust line for user postgres on 127.0.0.1 to"
      echo "pg_hba.conf and creates the database test):"
      echo "    bash scripts/ensure_services.sh --configure-postgres"
      echo "or point the tests at a server you can log in to:"
      echo "    export TALLYBOARD_TEST_PG_URL=postgresql://USER:PASSWORD@HOST:5432/postgres"
      echo "Until then the PostgreSQL tests skip."
    fi
  fi
fi

if ! [ -x /usr/sbin/pgbouncer ] && ! command -v pgbouncer >/dev/null; then
  echo "== installing Debian's pgbouncer (the cluster tests start their own, in front of PostgreSQL) =="
  apt_install pgbouncer || echo "warning: could not install pgbouncer; the PgBouncer tests will skip"
fi

if ! command -v chromium >/dev/null; then
  echo "== installing Debian's chromium (the browser tests drive it headless) =="
  apt_install chromium || echo "warning: could not install chromium; the browser tests will skip"
fi

if ! command -v node >/dev/null && ! command -v nodejs >/dev/null; then
  echo "== installing Debian's nodejs (runs the dashboard scripts' unit tests in tests/js) =="
  apt_install nodejs || echo "warning: could not install nodejs; the script unit tests will skip"
fi
exit 0
