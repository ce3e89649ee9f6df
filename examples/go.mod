module github.com/fleetrpc/fleet/examples

go 1.26.8

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000
	github.com/fleetrpc/fleet/gateway v0.0.0-00010101000000-000000000000
	github.com/fleetrpc/fleet/observability/accesslog v0.0.0-00010101000000-000000000000
	github.com/fleetrpc/fleet/observability/otel v0.0.0-00010101000000-000000000000
	github.com/fleetrpc/fleet/observability/prometheus v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.25.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	connectrpc.com/connect/v2 v2.0.2 // indirect
	connectrpc.com/cors v0.1.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/fleetrpc/fleet/cmd/protoc-gen-fleet v0.0.0-00010101000000-000000000000 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rs/cors v1.11.1 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)

replace (
	github.com/fleetrpc/fleet => ../
	github.com/fleetrpc/fleet/gateway => ../gateway
	github.com/fleetrpc/fleet/observability/accesslog => ../observability/accesslog
	github.com/fleetrpc/fleet/observability/otel => ../observability/otel
	github.com/fleetrpc/fleet/observability/prometheus => ../observability/prometheus
)

tool (
	github.com/fleetrpc/fleet/cmd/protoc-gen-fleet
	google.golang.org/protobuf/cmd/protoc-gen-go
)

replace github.com/fleetrpc/fleet/cmd/protoc-gen-fleet => ../cmd/protoc-gen-fleet

replace github.com/fleetrpc/fleet/policy => ../policy
