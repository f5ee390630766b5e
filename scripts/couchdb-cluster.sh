#!/usr/bin/env bash
# A three-node Apache CouchDB cluster on loopback, for cluster-mode tests and benchmarks, made
# from a CouchDB release you have already built (this script builds and downloads nothing; see
# docs/compatibility.md for building CouchDB 3.4.3 beside the project).
#
#   scripts/couchdb-cluster.sh start RELEASE DIR   copies RELEASE (e.g. ../peers/couchdb/rel/couchdb)
#                                                  into DIR/node1..3, starts them, joins them and
#                                                  prints LT_TEST_COUCHDB_CLUSTER=...
#   scripts/couchdb-cluster.sh stop DIR            stops the three nodes (their data stays in DIR)
#   scripts/couchdb-cluster.sh kill DIR N          kill -9 of node N's Erlang VM (a failure test)
#   scripts/couchdb-cluster.sh restart DIR N       starts node N again on its data
#
# Nodes: couchdb1..3@127.0.0.1 on ports 15984, 25984, 35984 (LT_CLUSTER_PORTS="a b c" to change),
# admin admin:relax (LT_CLUSTER_ADMIN=name:password), n=3 and q=2 by default; they are joined
# through /_node/_local/_nodes, because _cluster_setup's enable_cluster refuses a loopback bind.
set -euo pipefail
command="${1:-}"
admin="${LT_CLUSTER_ADMIN:-admin:relax}"
read -r -a ports <<< "${LT_CLUSTER_PORTS:-15984 25984 35984}"
usage() { sed -n '2,14p' "$0" >&2; exit 2; }

node_dir() { echo "$1/node$2"; }
url() { echo "http://${admin}@127.0.0.1:${ports[$(($1 - 1))]}"; }

start_node() {
    local dir; dir="$(node_dir "$1" "$2")"
    # Erlang's port mapper first, detached from this shell's output (it outlives the nodes).
    "$dir"/erts-*/bin/epmd -daemon < /dev/null > /dev/null 2>&1 || true
    (cd "$dir" && nohup ./bin/couchdb < /dev/null > "$dir/couchdb.log" 2>&1 & echo $! > "$dir/couchdb.pid")
}

wait_up() {
    for _ in $(seq 1 120); do
        if curl -fsS "$(url "$1")/_up" > /dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    echo "couchdb-cluster: node $1 did not start; see its couchdb.log" >&2
    exit 1
}

case "$command" in
    start)
        release="${2:-}"; dir="${3:-}"
        [[ -x "$release/bin/couchdb" && -n "$dir" ]] || usage
        mkdir -p "$dir"
        secret="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
        uuid="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
        for i in 1 2 3; do
            node="$(node_dir "$dir" "$i")"
            if [[ ! -d "$node" ]]; then
                cp -a "$release" "$node"
                rm -rf "$node/data" "$node/var" "$node/etc/local.d" && mkdir -p "$node/data" "$node/etc/local.d"
                sed -i "s/^-name .*/-name couchdb${i}@127.0.0.1/" "$node/etc/vm.args"
                # The same uuid and cookie secret on every node (one cluster); each its own port.
                cat > "$node/etc/local.ini" <<EOF
[couchdb]
uuid = $uuid
[chttpd]
port = ${ports[$((i - 1))]}
bind_address = 127.0.0.1
[chttpd_auth]
secret = $secret
[cluster]
n = 3
q = ${LT_CLUSTER_Q:-2}
[admins]
${admin%%:*} = ${admin#*:}
EOF
            fi
            start_node "$dir" "$i"
        done
        for i in 1 2 3; do wait_up "$i"; done
        # Join nodes 2 and 3 to node 1's view of the cluster, then the system databases.
        for i in 2 3; do
            curl -fsS -X PUT "$(url 1)/_node/_local/_nodes/couchdb${i}@127.0.0.1" -d '{}' > /dev/null || true
        done
        for _ in $(seq 1 60); do
            members="$(curl -fsS "$(url 1)/_membership" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["cluster_nodes"]))')"
            [[ "$members" == 3 ]] && break
            sleep 0.5
        done
        for db in _users _replicator _global_changes; do
            curl -sS -X PUT "$(url 1)/$db" > /dev/null
        done
        echo "couchdb-cluster: 3 nodes joined ($(curl -fsS "$(url 1)/_membership"))"
        echo "LT_TEST_COUCHDB_CLUSTER=$(url 1),$(url 2),$(url 3)"
        ;;
    stop)
        dir="${2:-}"; [[ -n "$dir" ]] || usage
        for i in 1 2 3; do
            pid_file="$(node_dir "$dir" "$i")/couchdb.pid"
            [[ -f "$pid_file" ]] || continue
            pkill -TERM -f "couchdb${i}@127.0.0.1" 2>/dev/null || true
            rm -f "$pid_file"
        done
        ;;
    kill)
        dir="${2:-}"; n="${3:-}"; [[ -n "$dir" && -n "$n" ]] || usage
        pkill -KILL -f "beam.smp.*couchdb${n}@127.0.0.1" || true
        ;;
    restart)
        dir="${2:-}"; n="${3:-}"; [[ -n "$dir" && -n "$n" ]] || usage
        start_node "$dir" "$n"
        wait_up "$n"
        ;;
    *) usage ;;
esac
