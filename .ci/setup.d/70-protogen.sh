# .ci/setup.d/70-protogen.sh — the tools the tests of cmd/protoc-gen-fleet
# and examples/protofirst run (sourced by .ci/services.sh; log and die are
# in scope):
#
#   protoc  Debian's protobuf-compiler, when missing
#   buf     the npm package @bufbuild/buf (pinned below), installed
#           globally with npm when `buf --version` does not print that
#           version; node and npm come from 60-gateway.sh
#
# protoc-gen-go and protoc-gen-fleet are not installed: the tests build
# them with `go build` at the versions the go.mod files require.
# Idempotent: each step is skipped when its tool is already there.
pg_buf_version=1.75.0
if ! command -v protoc >/dev/null 2>&1; then
	log "installing protobuf-compiler"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends protobuf-compiler || die "apt-get install protobuf-compiler failed"
fi
if [[ $(buf --version 2>/dev/null) != "$pg_buf_version" ]]; then
	command -v npm >/dev/null 2>&1 || die "npm missing (60-gateway.sh installs it)"
	log "installing @bufbuild/buf@$pg_buf_version"
	npm install -g --no-audit --no-fund "@bufbuild/buf@$pg_buf_version" || die "npm install -g @bufbuild/buf failed"
	[[ $(buf --version 2>/dev/null) == "$pg_buf_version" ]] || die "buf $pg_buf_version did not install"
fi
log "protogen: $(protoc --version), buf $(buf --version)"
