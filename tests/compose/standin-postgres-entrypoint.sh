#!/bin/sh
# The postgres:16 stand-in's entrypoint (tests/compose/standins.py): the part of the
# official image's first-start contract that docker-compose.yml relies on.
set -e
if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec gosu postgres "$0" "$@"
fi
if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -n "$POSTGRES_PASSWORD_FILE" ]; then
        POSTGRES_PASSWORD="$(cat "$POSTGRES_PASSWORD_FILE")"
    fi
    : "${POSTGRES_USER:=postgres}"
    export POSTGRES_USER
    pwfile="$(mktemp)"
    printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" -D "$PGDATA" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sh) if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
            *.sql) psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" -f "$f" postgres ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@"
