#!/usr/bin/env bash
# A three-node Apache CouchDB cluster on loopback, for cluster-mode tests and benchmarks, made
# from a CouchDB release you have already built (this script builds and downloads nothing; see
# docs/compatibility.md for building CouchDB 3.4.3 beside the project).
#
#   scripts/couchdb-cluster.sh start RELEASE DIR   copies RELEASE (e.g. ../peers/couchdb/rel/couchdb)
#                                                  into DIR/node1..3, starts them, joins them, starts
#                                                  HAProxy in front when installed, and prints
#                                                  LT_TEST_COUCHDB_CLUSTER=... (and ..._PROXY=...)
#   scripts/couchdb-cluster.sh stop DIR            stops the nodes and HAProxy (data stays in DIR)
#   scripts/couchdb-cluster.sh kill DIR N          kill -9 of node N's Erlang VM (a failure test)
#   scripts/couchdb-cluster.sh restart DIR N       starts node N again on its data
#   scripts/couchdb-cluster.sh wipe DIR N          kill -9 of node N, its data deleted, started
#                                                  empty in maintenance mode (CouchDB's procedure
#                                                  for a node whose shards are not up to date: it
#                                                  takes no part in requests while internal
#                                                  replication refills it)
#   scripts/couchdb-cluster.sh rejoin DIR N        waits until internal replication has refilled
#                                                  node N (no job pending on any node for 5 s),
#                                                  then ends its maintenance mode
#   scripts/couchdb-cluster.sh block DIR N         node N partitioned away: its HTTP and Erlang
#                                                  distribution ports drop every packet (iptables)
#   scripts/couchdb-cluster.sh unblock DIR N       ends that partition
#
# Nodes: couchdb1..3@127.0.0.1 on ports 15984, 25984, 35984 (LT_CLUSTER_PORTS="a b c" to change),
# Erlang distribution on 9101..9103, admin admin:relax (LT_CLUSTER_ADMIN=name:password), n=3 and
# q=2 by default (LT_CLUSTER_Q); they are joined through /_node/_local/_nodes, because
# _cluster_setup's enable_cluster refuses a loopback bind. HAProxy (Debian's haproxy) listens on
# 45984 (LT_CLUSTER_PROXY_PORT) and sends each request to a node whose /_up answers.
set -euo pipefail
command="${1:-}"
admin="${LT_CLUSTER_ADMIN:-admin:relax}"
read -r -a ports <<< "${LT_CLUSTER_PORTS:-15984 25984 35984}"
usage() { sed -n '2,32p' "$0" >&2; exit 2; }

proxy_port="${LT_CLUSTER_PROXY_PORT:-45984}"
node_dir() { echo "$1/node$2"; }
dist_port() { echo $((9100 + $1)); }
url() { echo "http://${admin}@127.0.0.1:${ports[$(($1 - 1))]}"; }

# Runs a command in the background holding none of this shell's open files beyond 0-2 (a caller
# that waits for its pipes, or for a descriptor it passed us, to close would wait for the node).
detached() {
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd="${fd##*/}"
            if [[ "$fd" -gt 2 ]]; then eval "exec $fd>&-" 2> /dev/null || true; fi
        done
        exec setsid "$@" < /dev/null
    ) &
}

start_node() {
    local dir; dir="$(node_dir "$1" "$2")"
    # Erlang's port mapper first (it outlives the nodes).
    detached "$dir"/erts-*/bin/epmd -daemon > /dev/null 2>&1
    sleep 0.2
    (cd "$dir" && detached ./bin/couchdb > "$dir/couchdb.log" 2>&1; echo $! > "$dir/couchdb.pid")
}

wait_up() {
    for _ in $(seq 1 120); do
        if curl -fsS "$(url "$1")/_up" > /dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    echo "couchdb-cluster: node $1 did not start; see its couchdb.log" >&2
    exit 1
}

# Until node N answers /_up at all (a node in maintenance mode answers 404).
wait_answering() {
    for _ in $(seq 1 120); do
        if [[ "$(curl -sS -o /dev/null -w '%{http_code}' "$(url "$1")/_up" 2> /dev/null)" != 000 ]]; then return 0; fi
        sleep 0.5
    done
    echo "couchdb-cluster: node $1 did not start; see its couchdb.log" >&2
    exit 1
}

# Internal replication jobs waiting or running on node N (its /_node/_local/_system).
replication_jobs() {
    curl -fsS "$(url "$1")/_node/_local/_system" 2> /dev/null \
        | python3 -c 'import json,sys; print(json.load(sys.stdin).get("internal_replication_jobs", 0))' 2> /dev/null || echo unknown
}

maintenance_file() { echo "$(node_dir "$1" "$2")/etc/local.d/zz-maintenance.ini"; }

# HAProxy in front of the three nodes, each checked every second through /_up (down after 2
# failures, up after 2 answers); a request whose node cannot be connected to goes to another.
start_proxy() {
    cat > "$1/haproxy.cfg" <<EOF
global
    maxconn 4096
defaults
    mode http
    balance roundrobin
    option redispatch
    retries 3
    option http-server-close
    timeout connect 1s
    timeout client 150s
    timeout server 3600s
frontend couchdb
    bind 127.0.0.1:${proxy_port}
    default_backend nodes
backend nodes
    option httpchk GET /_up
    http-check expect status 200
    default-server inter 1s fall 2 rise 2
    server couchdb1 127.0.0.1:${ports[0]} check
    server couchdb2 127.0.0.1:${ports[1]} check
    server couchdb3 127.0.0.1:${ports[2]} check
EOF
    detached haproxy -D -f "$1/haproxy.cfg" -p "$1/haproxy.pid" > "$1/haproxy.log" 2>&1
    sleep 0.5
}

unblock() {
    command -v iptables > /dev/null || return 0
    for port in "${ports[$(($1 - 1))]}" "$(dist_port "$1")"; do
        while iptables -D INPUT -p tcp --dport "$port" -j DROP 2>/dev/null; do :; done
        while iptables -D INPUT -p tcp --sport "$port" -j DROP 2>/dev/null; do :; done
    done
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
                # A fixed distribution port per node, so a partition can block it.
                echo "-kernel inet_dist_listen_min $(dist_port "$i") inet_dist_listen_max $(dist_port "$i")" >> "$node/etc/vm.args"
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
; A node that starts empty answers /_up 404 ("seeding") until it has the cluster's _nodes,
; _dbs and _users again, so HAProxy's and lt's health checks keep requests away from it.
seedlist = couchdb1@127.0.0.1,couchdb2@127.0.0.1,couchdb3@127.0.0.1
[admins]
${admin%%:*} = ${admin#*:}
EOF
            fi
            start_node "$dir" "$i"
        done
        for i in 1 2 3; do wait_up "$i"; done
        # Join nodes 2 and 3 to node 1's view of the cluster, then the system databases.
        for i in 2 3; do
            # (409 when the seedlist has joined it already)
            curl -fsS -X PUT "$(url 1)/_node/_local/_nodes/couchdb${i}@127.0.0.1" -d '{}' > /dev/null 2>&1 || true
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
        if command -v haproxy > /dev/null; then
            start_proxy "$dir"
            echo "LT_TEST_COUCHDB_CLUSTER_PROXY=http://${admin}@127.0.0.1:${proxy_port}"
        fi
        ;;
    stop)
        dir="${2:-}"; [[ -n "$dir" ]] || usage
        for i in 1 2 3; do
            pid_file="$(node_dir "$dir" "$i")/couchdb.pid"
            [[ -f "$pid_file" ]] || continue
            pkill -TERM -f "beam.smp.*couchdb${i}@127.0.0.1" 2>/dev/null || true
            # Erlang stops in its own time; after 10 s it is made to.
            for _ in $(seq 1 20); do pgrep -f "beam.smp.*couchdb${i}@127.0.0.1" > /dev/null || break; sleep 0.5; done
            pkill -KILL -f "beam.smp.*couchdb${i}@127.0.0.1" 2>/dev/null || true
            rm -f "$pid_file"
            unblock "$i"
        done
        if [[ -f "$dir/haproxy.pid" ]]; then kill "$(cat "$dir/haproxy.pid")" 2>/dev/null || true; rm -f "$dir/haproxy.pid"; fi
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
    wipe)
        dir="${2:-}"; n="${3:-}"; [[ -n "$dir" && -n "$n" ]] || usage
        pkill -KILL -f "beam.smp.*couchdb${n}@127.0.0.1" || true
        sleep 0.5
        rm -rf "$(node_dir "$dir" "$n")/data" && mkdir -p "$(node_dir "$dir" "$n")/data"
        # Maintenance mode from its first moment (docs/src/cluster/sharding.rst, "Set the target
        # node to maintenance mode"): /_up answers 404, so HAProxy and lt keep requests away, and
        # the other nodes leave its shards out of reads, writes and changes feeds until `rejoin`.
        printf '[couchdb]\nmaintenance_mode = true\n' > "$(maintenance_file "$dir" "$n")"
        start_node "$dir" "$n"
        wait_answering "$n"
        ;;
    rejoin)
        dir="${2:-}"; n="${3:-}"; [[ -n "$dir" && -n "$n" ]] || usage
        # Internal replication refills the node from the other copies (every node pushes its
        # shards to a node that comes up); it is done when no node has a job for 5 s in a row.
        quiet=0
        for second in $(seq 1 600); do
            jobs=""
            for i in 1 2 3; do jobs="$jobs $(replication_jobs "$i")"; done
            if [[ "$jobs" =~ ^( 0){3}$ ]]; then quiet=$((quiet + 1)); else quiet=0; fi
            (( second % 10 == 0 )) && echo "couchdb-cluster: node $n refilling; internal replication jobs per node:$jobs" >&2
            [[ $quiet -ge 5 ]] && break
            sleep 1
        done
        if [[ $quiet -lt 5 ]]; then
            echo "couchdb-cluster: internal replication did not settle within 10 minutes; node $n stays in maintenance mode" >&2
            exit 1
        fi
        curl -fsS -X PUT "$(url "$n")/_node/_local/_config/couchdb/maintenance_mode" -d '"false"' > /dev/null
        rm -f "$(maintenance_file "$dir" "$n")"
        wait_up "$n"
        echo "couchdb-cluster: node $n refilled and out of maintenance mode" >&2
        ;;
    block)
        dir="${2:-}"; n="${3:-}"; [[ -n "$dir" && -n "$n" ]] || usage
        for port in "${ports[$((n - 1))]}" "$(dist_port "$n")"; do
            iptables -I INPUT -p tcp --dport "$port" -j DROP
            iptables -I INPUT -p tcp --sport "$port" -j DROP
        done
        ;;
    unblock)
        dir="${2:-}"; n="${3:-}"; [[ -n "$dir" && -n "$n" ]] || usage
        unblock "$n"
        ;;
    *) usage ;;
esac
