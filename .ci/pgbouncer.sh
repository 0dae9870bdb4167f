#!/usr/bin/env bash
# PgBouncer (Debian's package) in transaction pooling mode on 127.0.0.1:6432, in front of the
# CI PostgreSQL on 127.0.0.1:5432: every database name is passed through. Run as root; a
# PgBouncer this script started on an earlier run is stopped (by its pid file) and replaced,
# so the configuration below is always the one running.
set -euo pipefail

DIR=/var/lib/tickwork-ci/pgbouncer
PORT=6432

if ! command -v pgbouncer >/dev/null; then
    apt-get install -y -qq pgbouncer >/dev/null 2>&1 ||
        { apt-get update -qq && apt-get install -y -qq pgbouncer >/dev/null; } ||
        { echo "pgbouncer: cannot install Debian's package (offline?)" >&2; exit 1; }
fi

install -d -o postgres -g postgres "$DIR"
if [ -s "$DIR/pgbouncer.pid" ] && kill -0 "$(cat "$DIR/pgbouncer.pid")" 2>/dev/null; then
    kill "$(cat "$DIR/pgbouncer.pid")"
    for _ in $(seq 1 50); do [ -e "$DIR/pgbouncer.pid" ] || break; sleep 0.1; done
fi

# auth_type=trust still wants each user listed in auth_file.
echo '"postgres" ""' >"$DIR/userlist.txt"
cat >"$DIR/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = trust
auth_file = $DIR/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
max_db_connections = 60
server_reset_query =
ignore_startup_parameters = extra_float_digits
pidfile = $DIR/pgbouncer.pid
logfile = $DIR/pgbouncer.log
EOF
chown postgres:postgres "$DIR"/*

runuser -u postgres -- pgbouncer -d "$DIR/pgbouncer.ini"
for _ in $(seq 1 50); do
    psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -w -Atc 'select 1' >/dev/null 2>&1 &&
        { echo "pgbouncer: transaction pooling on 127.0.0.1:$PORT"; exit 0; }
    sleep 0.1
done
echo "pgbouncer: not answering on 127.0.0.1:$PORT (see $DIR/pgbouncer.log)" >&2
exit 1
