# .ci/setup.d/61-conformance.sh — Node packages for the conformance
# module's browser and buf curl tests, and for examples/protofirst/web/
# build.sh, which bundles the example's page with the same esbuild and
# connect-es (sourced by .ci/services.sh; log and die are in scope):
#
#   conformance/testdata/web/node_modules  `npm ci` from the committed
#            package-lock.json (@connectrpc/connect, @connectrpc/connect-web,
#            @bufbuild/protobuf, esbuild, @bufbuild/buf)
#
# node and npm come from 60-gateway.sh; Chromium from 50-chromium.sh. The
# conformance runner itself is built by the test (go build, from the
# module's tool requirement). Idempotent: skipped when node_modules holds
# a copy of the current lock file.
cf_web=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/conformance/testdata/web
if ! cmp -s "$cf_web/package-lock.json" "$cf_web/node_modules/.fleet-package-lock.json"; then
	log "npm ci in $cf_web"
	(cd "$cf_web" && npm ci --no-audit --no-fund) || die "npm ci in $cf_web failed"
	cp "$cf_web/package-lock.json" "$cf_web/node_modules/.fleet-package-lock.json"
fi
log "conformance: esbuild $("$cf_web/node_modules/.bin/esbuild" --version), buf $("$cf_web/node_modules/.bin/buf" --version)"
