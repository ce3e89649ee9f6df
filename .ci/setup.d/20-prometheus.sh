# .ci/setup.d/20-prometheus.sh — the Prometheus server binary that the tests
# of observability/prometheus start themselves (as a child process on
# 127.0.0.1 with a scrape config they write, killed by PID at the end).
# Sourced by .ci/services.sh; idempotent: nothing happens when
# /usr/bin/prometheus exists.
#
# Debian's package would also start a system-wide Prometheus (port 9090,
# scraping node exporters) where an init system runs; the tests do not need
# it, so when one was started we stop it again.
if [[ -x /usr/bin/prometheus ]]; then
	log "prometheus already installed ($(/usr/bin/prometheus --version 2>&1 | head -n 1))"
else
	log "installing prometheus"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends prometheus
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
		systemctl stop prometheus || true
	elif [[ -x /etc/init.d/prometheus ]]; then
		/etc/init.d/prometheus stop >/dev/null 2>&1 || true
	fi
	[[ -x /usr/bin/prometheus ]] || die "prometheus did not install /usr/bin/prometheus"
fi
