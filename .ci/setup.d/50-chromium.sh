# .ci/setup.d/50-chromium.sh — Debian's chromium for the dashboard's
# browser test (cmd/fleet/dashboard_browser_test.go, driven by chromedp).
# Sourced by .ci/services.sh; idempotent: nothing happens when
# /usr/bin/chromium is already installed. The test starts Chromium itself,
# headless, on loopback, and stops it.
if ! command -v chromium >/dev/null 2>&1; then
	log "installing chromium"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null ||
		{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; } ||
		die "apt-get install chromium failed"
fi
command -v chromium >/dev/null 2>&1 || die "chromium is not on PATH after installing it"
