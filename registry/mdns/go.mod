module github.com/fleetrpc/fleet/registry/mdns

go 1.26.8

require (
	github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000
	github.com/hashicorp/mdns v1.0.7
	github.com/miekg/dns v1.1.72
	go.uber.org/goleak v1.3.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
)

replace github.com/fleetrpc/fleet => ../..
