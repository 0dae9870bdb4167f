#!/usr/bin/env bash
# A real streaming replica of the CI PostgreSQL (127.0.0.1:5432) on 127.0.0.1:5433, made with
# Debian's cluster tools and `pg_basebackup -R`. Run as root.
#
#   .ci/replica.sh up      create it (or reuse a healthy one left by an earlier run), start it,
#                          wait until it streams; fails loudly when it cannot
#   .ci/replica.sh stop    stop it (the replica tests use this to take it away mid-test)
#   .ci/replica.sh start   start it again and wait until it streams
set -euo pipefail

VERSION="${PG_VERSION:-$(ls /etc/postgresql | sort -V | tail -1)}"
NAME=replica
PORT=5433
PRIMARY_PORT=5432
DATA="/var/lib/postgresql/$VERSION/$NAME"

psql_replica() { psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -w -Atc "$1" 2>/dev/null; }

streaming() {
    [ "$(psql_replica 'select pg_is_in_recovery()')" = t ] &&
        [ "$(psql_replica 'select status from pg_stat_wal_receiver')" = streaming ]
}

wait_streaming() {
    for _ in $(seq 1 60); do streaming && return 0; sleep 0.5; done
    return 1
}

allow_replication_connections() {
    # A replication connection matches only `replication` lines of pg_hba.conf.
    local hba
    hba="$(psql -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -w -Atc 'show hba_file')"
    if ! grep -Eq '^host\s+replication\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
        echo "host replication all 127.0.0.1/32 trust" >>"$hba"
        psql -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -w -Atc 'select pg_reload_conf()' >/dev/null
    fi
    local senders
    senders="$(psql -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -w -Atc 'show max_wal_senders')"
    [ "$senders" -ge 2 ] || { echo "replica: max_wal_senders=$senders on the primary" >&2; exit 1; }
}

create() {
    pg_dropcluster --stop "$VERSION" "$NAME" 2>/dev/null || true
    # The cluster's configuration (port, logging) comes from pg_createcluster; its data
    # directory is replaced by a base backup that writes standby.signal and primary_conninfo.
    # A disposable CI copy: trust on 127.0.0.1 like the primary, and no fsync (it also skips
    # the ten-second sync of the whole data directory when the backup first starts).
    pg_createcluster "$VERSION" "$NAME" -p "$PORT" -o fsync=off -- --auth=trust >/dev/null
    rm -rf "$DATA"
    install -d -o postgres -g postgres -m 700 "$DATA"
    runuser -u postgres -- pg_basebackup -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres \
        -D "$DATA" -R -X stream -c fast --no-sync
    pg_ctlcluster --skip-systemctl-redirect "$VERSION" "$NAME" start
}

start() {
    pg_ctlcluster --skip-systemctl-redirect "$VERSION" "$NAME" start 2>/dev/null || true
    wait_streaming
}

case "${1:-up}" in
up)
    allow_replication_connections
    if [ -d "/etc/postgresql/$VERSION/$NAME" ] && start; then
        # A run that died in the middle of a pause test must not leave it paused.
        psql_replica 'select pg_wal_replay_resume()' >/dev/null
        echo "replica: reusing $VERSION/$NAME on port $PORT"
    else
        create
        wait_streaming || { echo "replica: $VERSION/$NAME does not stream" >&2; exit 1; }
        echo "replica: created $VERSION/$NAME on port $PORT"
    fi
    ;;
stop) pg_ctlcluster --skip-systemctl-redirect "$VERSION" "$NAME" stop -m fast ;;
start) start || { echo "replica: $VERSION/$NAME does not stream" >&2; exit 1; } ;;
*) echo "usage: $0 [up|stop|start]" >&2; exit 2 ;;
esac
