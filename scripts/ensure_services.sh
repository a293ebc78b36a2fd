#!/usr/bin/env bash
# Makes sure the real services the tests use are present: a PostgreSQL server on 127.0.0.1:5432
# and Debian's headless Chromium. Installs them with apt where they are missing (needs root).
set -uo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_ready=0
apt_install() {
  if [ $apt_ready = 0 ]; then as_root apt-get update -qq || return 1; apt_ready=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
if ! pg_up; then
  echo "== starting PostgreSQL =="
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then as_root pg_createcluster 15 main || true; fi
  for v in $(ls /etc/postgresql 2>/dev/null); do
    as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start 2>/dev/null || as_root pg_ctlcluster "$v" main start || true
  done
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  pg_up || echo "warning: PostgreSQL did not come up on 127.0.0.1:5432"
fi
# The tests log in as postgres without a password (tests/pg_support.py). A freshly installed
# cluster asks for one on TCP: trust loopback connections (this script is for test machines only)
# and create the database `test`.
pg_test_login() { psql -h 127.0.0.1 -U postgres -d test -Atqc 'SELECT 1' >/dev/null 2>&1; }
if pg_up && ! pg_test_login; then
  echo "== configuring PostgreSQL for the tests (trust on 127.0.0.1, database test) =="
  for hba in /etc/postgresql/*/main/pg_hba.conf; do
    as_root grep -q '^host all postgres 127.0.0.1/32 trust' "$hba" ||
      as_root sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
  done
  for v in $(ls /etc/postgresql 2>/dev/null); do as_root pg_ctlcluster "$v" main reload || true; done
  psql -h 127.0.0.1 -U postgres -d postgres -qc 'CREATE DATABASE test' 2>/dev/null || true
  pg_test_login || echo "warning: cannot log in to PostgreSQL as postgres on 127.0.0.1 (tests/pg_support.py)"
fi

if ! command -v chromium >/dev/null; then
  echo "== installing Debian's chromium =="
  apt_install chromium || echo "warning: could not install chromium"
fi
exit 0
