#!/usr/bin/env bash
# .ci/services.sh — start the registry servers that the tests under
# ./registry/... talk to, all on loopback:
#
#   ZooKeeper            127.0.0.1:2181  (Debian package "zookeeper")
#   Redis                127.0.0.1:6379  (Debian package "redis-server")
#   NATS with JetStream  127.0.0.1:4222  (Debian package "nats-server")
#
# etcd needs nothing here: registry/etcd's tests run it in-process.
#
# The script is idempotent: a server that already answers is left alone, a
# missing package is installed with apt-get, a stopped server is started in
# the background, and the script then waits (bounded by WAIT_SECONDS,
# default 60) until every server answers, failing with the tail of the
# server's log when one does not. Run it as root before
# the tests.
#
# Environment:
#   WAIT_SECONDS    how long to wait for each server (default 60)
#   FLEET_CI_STATE  where the ZooKeeper config, data and pid file live
#                   (default /var/lib/fleet-ci)
set -euo pipefail

WAIT_SECONDS=${WAIT_SECONDS:-60}
CI_STATE=${FLEET_CI_STATE:-/var/lib/fleet-ci}
ZK_DIR="$CI_STATE/zookeeper"
ZK_CFG="$ZK_DIR/zoo.cfg"
ZK_LOG_DIR=/var/log/zookeeper
REDIS_LOG=/var/log/redis/ci.log
NATS_LOG=/var/log/nats-server.log

log() { echo "services.sh: $*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# tcp_open HOST PORT: true when a TCP connection to HOST:PORT succeeds.
tcp_open() {
	timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# zk_ok: ZooKeeper answers the "srvr" four-letter command (whitelisted by
# default) with its mode, which it only does once it serves requests.
zk_ok() {
	local out
	out=$(timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; printf srvr >&3; cat <&3' 2>/dev/null) || true
	[[ $out == *"Mode:"* ]]
}

redis_ok() {
	[[ $(timeout 3 redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null) == PONG ]]
}

# nats_ok: the server's greeting (INFO) says JetStream is enabled.
nats_ok() {
	local out
	out=$(timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/4222; read -r line <&3; printf "%s\n" "$line"' 2>/dev/null) || true
	[[ $out == INFO* && $out == *'"jetstream":true'* ]]
}

# wait_for NAME CHECK LOGFILE: poll CHECK for up to WAIT_SECONDS.
wait_for() {
	local name=$1 check=$2 logfile=$3 deadline=$((SECONDS + WAIT_SECONDS))
	until "$check"; do
		if ((SECONDS >= deadline)); then
			log "$name did not answer within ${WAIT_SECONDS}s; last lines of $logfile:"
			tail -n 30 "$logfile" >&2 2>/dev/null || true
			die "$name is not up"
		fi
		sleep 0.5
	done
	log "$name is up"
}

# --- packages -------------------------------------------------------------

missing=()
[[ -x /usr/share/zookeeper/bin/zkServer.sh ]] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
[[ -x /usr/sbin/nats-server ]] || missing+=(nats-server)
if ((${#missing[@]} > 0)); then
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y "${missing[@]}"
fi

# --- ZooKeeper ------------------------------------------------------------
#
# Debian's package ships /etc/zookeeper/conf/zoo.cfg (clientPort 2181 on all
# interfaces, dataDir /tmp/zookeeper) and the upstream zkServer.sh, but no
# service that starts it. We leave /etc alone and start zkServer.sh with our
# own config: loopback only, the admin HTTP server off, tickTime 1s so the
# session timeouts the tests ask for (2 s to 20 s) are allowed.
if zk_ok; then
	log "ZooKeeper already answers on 127.0.0.1:2181"
else
	if tcp_open 127.0.0.1 2181; then
		log "port 2181 is open but ZooKeeper is not serving yet; waiting"
	else
		mkdir -p "$ZK_DIR/data" "$ZK_LOG_DIR"
		cat >"$ZK_CFG" <<EOF
# Written by .ci/services.sh; edits are overwritten.
tickTime=1000
initLimit=10
syncLimit=5
dataDir=$ZK_DIR/data
clientPort=2181
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr
EOF
		log "starting ZooKeeper with $ZK_CFG"
		# zkServer.sh backgrounds java with nohup and writes the pid file;
		# setsid detaches it from this script's process group.
		ZOOPIDFILE="$ZK_DIR/zookeeper_server.pid" JVMFLAGS="${JVMFLAGS:--Xmx256m}" \
			setsid /usr/share/zookeeper/bin/zkServer.sh start "$ZK_CFG" </dev/null >"$ZK_DIR/start.out" 2>&1 ||
			{
				cat "$ZK_DIR/start.out" >&2
				die "zkServer.sh start failed"
			}
	fi
fi
wait_for ZooKeeper zk_ok "$(ls -t "$ZK_LOG_DIR"/*.out "$ZK_LOG_DIR"/*.log 2>/dev/null | head -n 1 || echo "$ZK_DIR/start.out")"

# --- Redis ----------------------------------------------------------------
if redis_ok; then
	log "Redis already answers on 127.0.0.1:6379"
else
	mkdir -p /var/lib/redis "$(dirname "$REDIS_LOG")"
	log "starting Redis"
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
		--dir /var/lib/redis --logfile "$REDIS_LOG" || die "redis-server failed to start (see $REDIS_LOG)"
fi
wait_for Redis redis_ok "$REDIS_LOG"

# --- NATS -----------------------------------------------------------------
if nats_ok; then
	log "NATS with JetStream already answers on 127.0.0.1:4222"
else
	if tcp_open 127.0.0.1 4222; then
		# Debian's nats-server package starts a systemd service without
		# JetStream; replace it with ours.
		if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nats-server 2>/dev/null; then
			log "stopping the nats-server systemd service (it runs without JetStream)"
			systemctl stop nats-server
			for _ in $(seq 20); do tcp_open 127.0.0.1 4222 || break; sleep 0.5; done
		fi
		if tcp_open 127.0.0.1 4222; then
			die "something listens on 127.0.0.1:4222 but it is not a NATS server with JetStream enabled"
		fi
	fi
	mkdir -p /var/lib/nats-server
	log "starting NATS"
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
		-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l "$NATS_LOG" || die "nats-server failed to start"
fi
wait_for NATS nats_ok "$NATS_LOG"

log "all registry servers are up"

# --- tools of other modules -------------------------------------------------
# Each module whose tests need a tool or server besides the registries above
# (Prometheus, grpcurl, Node packages, Chromium, ...) adds one script to
# .ci/setup.d/; each is sourced here, in name order, with the helpers above
# (log, die, tcp_open, wait_for) in scope, and must be idempotent.
for setup in "$(dirname "$0")"/setup.d/*.sh; do
	[[ -e $setup ]] || continue
	log "running ${setup##*/}"
	# shellcheck source=/dev/null
	source "$setup"
done
log "all tools are ready"
