# .ci/setup.d/60-gateway.sh — tools for the gateway module's tests (sourced
# by .ci/services.sh; log and die are in scope):
#
#   grpcurl  go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4,
#            into $(go env GOBIN) or $(go env GOPATH)/bin, where gateway's
#            tests look for it
#   node     Debian's nodejs and npm, when missing
#   gateway/testdata/node/node_modules  `npm ci` from the committed
#            package-lock.json (@grpc/grpc-js, @grpc/proto-loader)
#
# Idempotent: each step is skipped when its result is already there (the
# npm step when node_modules holds a copy of the current lock file).
gw_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
gw_grpcurl_version=v1.9.4
gw_gobin=$(go env GOBIN)
[[ -n $gw_gobin ]] || gw_gobin=$(go env GOPATH)/bin
if [[ ! -x $gw_gobin/grpcurl ]]; then
	log "installing grpcurl $gw_grpcurl_version"
	GOWORK=off GOFLAGS= go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$gw_grpcurl_version" ||
		die "go install grpcurl failed"
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	log "installing nodejs and npm"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y nodejs npm || die "apt-get install nodejs npm failed"
fi
gw_node=$gw_root/gateway/testdata/node
if ! cmp -s "$gw_node/package-lock.json" "$gw_node/node_modules/.fleet-package-lock.json"; then
	log "npm ci in $gw_node"
	(cd "$gw_node" && npm ci --no-audit --no-fund) || die "npm ci in $gw_node failed"
	cp "$gw_node/package-lock.json" "$gw_node/node_modules/.fleet-package-lock.json"
fi
log "gateway: grpcurl $("$gw_gobin/grpcurl" -version 2>&1), node $(node --version)"
