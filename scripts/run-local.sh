#!/usr/bin/env bash
# `make run`: serve s3gate on this machine with one command.
# With S3GATE_DATABASE_URL set it serves on that database. Without it, it keeps
# a private PostgreSQL cluster under $S3GATE_DATA_DIR/pg (default ./data/pg),
# started from the installed PostgreSQL binaries and stopped on exit, and
# generates a root key pair once into $S3GATE_DATA_DIR/credentials (mode 0600).
set -euo pipefail
bin=${1:-bin/s3gate}
data=${S3GATE_DATA_DIR:-./data}
mkdir -p "$data"
data=$(cd "$data" && pwd)
export S3GATE_DATA_DIR=$data

creds=$data/credentials
if [ -z "${S3GATE_ROOT_ACCESS_KEY:-}" ]; then
  if [ ! -f "$creds" ]; then
    umask 077
    printf 'S3GATE_ROOT_ACCESS_KEY=%s\nS3GATE_ROOT_SECRET_KEY=%s\n' \
      "AK$(od -An -N9 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)" \
      "$(od -An -N30 -tx1 /dev/urandom | tr -d ' \n')" >"$creds"
    echo "s3gate: generated a root key pair in $creds"
  fi
  set -a; . "$creds"; set +a
fi

pgpid=""
if [ -z "${S3GATE_DATABASE_URL:-}" ]; then
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -z "$pgbin" ]; then
    echo "s3gate: set S3GATE_DATABASE_URL, or install PostgreSQL (apt-get install postgresql) for a private cluster" >&2
    exit 2
  fi
  as=()
  if [ "$(id -u)" = 0 ]; then as=(runuser -u postgres --); fi
  pgdata=$data/pg
  if [ ! -f "$pgdata/PG_VERSION" ]; then
    mkdir -p "$pgdata"
    [ "$(id -u)" = 0 ] && chown postgres "$pgdata"
    "${as[@]}" "$pgbin/initdb" -D "$pgdata" -U s3gate -A trust --no-sync >/dev/null
  fi
  port=${S3GATE_PG_PORT:-54329}
  "${as[@]}" "$pgbin/pg_ctl" -D "$pgdata" -w -l "$pgdata/server.log" \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $pgdata" start >/dev/null
  pgpid=$(head -1 "$pgdata/postmaster.pid")
  trap '"${as[@]}" "$pgbin/pg_ctl" -D "$pgdata" -m fast stop >/dev/null' EXIT
  "${as[@]}" "$pgbin/psql" -h 127.0.0.1 -p "$port" -U s3gate -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='s3gate'" | grep -q 1 ||
    "${as[@]}" "$pgbin/createdb" -h 127.0.0.1 -p "$port" -U s3gate s3gate
  export S3GATE_DATABASE_URL="postgres://s3gate@127.0.0.1:$port/s3gate?sslmode=disable"
  echo "s3gate: private PostgreSQL (pid $pgpid) on 127.0.0.1:$port, data in $pgdata"
fi

addr=${S3GATE_ADDR:-127.0.0.1:9000}
cat <<MSG
s3gate: endpoint http://$addr  access key $S3GATE_ROOT_ACCESS_KEY
s3gate: try  AWS_ACCESS_KEY_ID=$S3GATE_ROOT_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3GATE_ROOT_SECRET_KEY aws --region ${S3GATE_REGION:-us-east-1} --endpoint-url http://$addr s3 ls
MSG
"$bin" serve "${@:2}"
