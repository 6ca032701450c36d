#!/bin/sh
# The official postgres image's contract on Debian's PostgreSQL: on an empty $PGDATA, make the
# cluster with superuser $POSTGRES_USER (password $POSTGRES_PASSWORD, scram-sha-256 over TCP)
# and database $POSTGRES_DB; then run the server on every interface of the container.
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$database" != postgres ]; then
    echo "CREATE DATABASE \"$database\" OWNER \"$user\";" \
      | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
