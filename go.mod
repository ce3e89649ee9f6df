module github.com/fleetrpc/fleet

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/klauspost/compress v1.20.3
	github.com/sony/gobreaker/v2 v2.4.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
