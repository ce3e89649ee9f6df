module github.com/fleetrpc/fleet/observability/prometheus

go 1.26.8

require (
	github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	go.uber.org/goleak v1.3.0
)

require (
	connectrpc.com/connect/v2 v2.0.2 // indirect
	connectrpc.com/cors v0.1.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/rs/cors v1.11.1 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fleetrpc/fleet/gateway v0.0.0-00010101000000-000000000000
	github.com/fleetrpc/fleet/policy v0.0.0-00010101000000-000000000000
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/fleetrpc/fleet => ../..

replace github.com/fleetrpc/fleet/gateway => ../../gateway

replace github.com/fleetrpc/fleet/policy => ../../policy
