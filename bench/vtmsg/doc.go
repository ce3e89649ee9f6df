// Package vtmsg is the echo scenario's BenchmarkMessage (the same fields
// and numbers as internal/benchpb, in proto package pbvt so that both can
// be linked into one program) with the fast-path methods that
// protoc-gen-go-vtproto (github.com/planetscale/vtprotobuf) generates:
// SizeVT, MarshalToSizedBufferVT and UnmarshalVT. Fleet's protobuf codec
// uses them when a message has them; the bench's fleet-vt peer measures
// what that changes. The wire bytes are those of the standard message.
//
// Everything here but doc.go is generated from internal/benchpb's
// sources by go generate in this directory, with protoc, protoc-gen-go at
// the version of google.golang.org/protobuf in go.mod and
// protoc-gen-go-vtproto at the version of github.com/planetscale/vtprotobuf
// in go.mod on PATH: benchmark_vt.proto is benchpb's benchmark.proto with
// its package and go_package changed; echo.go is benchpb's echo.go with its
// package changed, so that this message's handler does exactly the work of
// every other peer's.
package vtmsg

//go:generate sh -c "{ echo '// Generated from ../../internal/benchpb/benchmark.proto by go generate. DO NOT EDIT.'; echo; sed -e 's/^package pb;$/package pbvt;/' -e 's#go_package = \"github.com/fleetrpc/fleet/internal/benchpb\"#go_package = \"github.com/fleetrpc/fleet/bench/vtmsg\"#' ../../internal/benchpb/benchmark.proto; } > benchmark_vt.proto"
//go:generate protoc -I. --go_out=. --go_opt=paths=source_relative --go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size benchmark_vt.proto

//go:generate sh -c "{ echo '// Code generated from ../../internal/benchpb/echo.go by go generate. DO NOT EDIT.'; echo; sed 's/^package benchpb$/package vtmsg/' ../../internal/benchpb/echo.go; } > echo.go"

import (
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/internal/benchpb"
)

// New returns the message filled as benchpb.New fills it (581 bytes on
// the wire). It panics if the two messages' fields differ.
func New() *BenchmarkMessage {
	b, err := proto.Marshal(benchpb.New())
	if err != nil {
		panic(err)
	}
	m := new(BenchmarkMessage)
	if err := proto.Unmarshal(b, m); err != nil {
		panic(err)
	}
	if len(m.ProtoReflect().GetUnknown()) != 0 {
		panic("vtmsg: BenchmarkMessage lacks fields of benchpb.BenchmarkMessage")
	}
	return m
}
