module github.com/fleetrpc/fleet/transport/quic

go 1.26.8

require (
	github.com/fleetrpc/fleet v0.0.0-00010101000000-000000000000
	github.com/quic-go/quic-go v0.65.0
)

require (
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/fleetrpc/fleet => ../..
