#!/usr/bin/env bash
# PostGIS on the same data and query as `lt-bench geo`: 1,000,000 clustered points, radius
# 4,023.35 m, nearest first, limit 100 (geography, GiST index, ST_DWithin + ORDER BY <->).
# Needs PostgreSQL with PostGIS (Debian: apt-get install postgresql-15-postgis-3). Starts a
# throwaway cluster on port 5499 as the postgres user, loads the points that
# `lt-bench geo --export DIR` writes, and runs pgbench with 1 and 2 clients for 10 s each.
set -euo pipefail
cd "$(dirname "$0")/.."
POINTS=${POINTS:-1000000}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
WORK=$(mktemp -d /tmp/lt-postgis.XXXXXX)
chmod 777 "$WORK"
trap 'su postgres -c "$PGBIN/pg_ctl -D $WORK/data -m immediate stop" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

swift build -c release --product lt-bench >/dev/null
.build/release/lt-bench geo --points "$POINTS" --export "$WORK/csv"
chmod -R a+r "$WORK/csv"

su postgres -c "$PGBIN/initdb -D $WORK/data -A trust" >/dev/null
su postgres -c "$PGBIN/pg_ctl -D $WORK/data -o '-p 5499 -k $WORK -c shared_buffers=512MB -c fsync=off -c synchronous_commit=off' -l $WORK/log start" >/dev/null
PSQL="psql -h $WORK -p 5499 -U postgres -q -v ON_ERROR_STOP=1"
for _ in $(seq 30); do $PSQL -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.5; done

start=$(date +%s.%N)
$PSQL <<SQL
CREATE EXTENSION postgis;
CREATE TABLE raw(id text, lon float8, lat float8);
\copy raw FROM '$WORK/csv/points.csv' WITH (FORMAT csv)
CREATE TABLE pts AS SELECT id, ST_SetSRID(ST_MakePoint(lon, lat), 4326)::geography AS g FROM raw;
CREATE INDEX pts_g ON pts USING gist(g);
CREATE TABLE q(n int PRIMARY KEY, lon float8, lat float8);
\copy q FROM '$WORK/csv/queries.csv' WITH (FORMAT csv)
ALTER TABLE q ADD COLUMN g geography;
UPDATE q SET g = ST_SetSRID(ST_MakePoint(lon, lat), 4326)::geography;
VACUUM ANALYZE;
SQL
end=$(date +%s.%N)
QUERIES=$(wc -l < "$WORK/csv/queries.csv")
echo "PostGIS load + GiST build: $(echo "$POINTS / ($end - $start)" | bc) points/s (COPY, geography cast, index, analyze)"
echo "PostGIS table + index size: $($PSQL -At -c "SELECT pg_total_relation_size('pts') / $POINTS") bytes per point"

cat > "$WORK/query.sql" <<SQL
\\set n random(1, $QUERIES)
SELECT p.id FROM pts p, q WHERE q.n = :n AND ST_DWithin(p.g, q.g, 4023.35) ORDER BY p.g <-> q.g LIMIT 100;
SQL
chmod a+r "$WORK/query.sql"
for clients in 1 2; do
  tps=$(pgbench -h "$WORK" -p 5499 -U postgres -n -f "$WORK/query.sql" -c $clients -j $clients -T 10 postgres 2>/dev/null | awk '/^tps/ {print $3; exit}')
  echo "PostGIS app query, $clients client(s): $tps queries/s"
done
