# .ci/setup.d/65-cli.sh — tools for cmd/fleet's tests (sourced by
# .ci/services.sh; log and die are in scope):
#
#   protoc   Debian's protobuf-compiler: compiles what `fleet describe
#            --proto` writes
#   node     Debian's nodejs and npm, when missing
#   cmd/fleet/testdata/node/node_modules  `npm ci` from the committed
#            package-lock.json (@grpc/grpc-js and @grpc/proto-loader for a
#            client built from that .proto; @apidevtools/swagger-parser
#            to validate what `fleet describe --openapi` writes)
#
# Idempotent: each step is skipped when its result is already there (the
# npm step when node_modules holds a copy of the current lock file).
cli_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cli_missing=()
command -v protoc >/dev/null 2>&1 || cli_missing+=(protobuf-compiler)
command -v node >/dev/null 2>&1 || cli_missing+=(nodejs)
command -v npm >/dev/null 2>&1 || cli_missing+=(npm)
if ((${#cli_missing[@]} > 0)); then
	log "installing ${cli_missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y "${cli_missing[@]}" || die "apt-get install ${cli_missing[*]} failed"
fi
cli_node=$cli_root/cmd/fleet/testdata/node
if ! cmp -s "$cli_node/package-lock.json" "$cli_node/node_modules/.fleet-package-lock.json"; then
	log "npm ci in $cli_node"
	(cd "$cli_node" && npm ci --no-audit --no-fund) || die "npm ci in $cli_node failed"
	cp "$cli_node/package-lock.json" "$cli_node/node_modules/.fleet-package-lock.json"
fi
log "cli: $(protoc --version), node $(node --version)"
