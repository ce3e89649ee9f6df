module github.com/fleetrpc/fleet/cmd/protoc-gen-fleet

go 1.26.8

require google.golang.org/protobuf v1.36.12

require go.uber.org/goleak v1.3.0
