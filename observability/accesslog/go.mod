module github.com/fleetrpc/fleet/observability/accesslog

go 1.26.8

require github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000

require golang.org/x/time v0.15.0 // indirect

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/fleetrpc/fleet => ../..
