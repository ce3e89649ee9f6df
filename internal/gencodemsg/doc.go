// Package gencodemsg holds the benchmark message as gencode
// (github.com/andyleap/gencode) generates it, for the gencode codec's tests
// and the fleet bench program's gencode codec row and fleet-gencode peer.
//
// benchmark.schema is the 40 fields of internal/benchpb's BenchmarkMessage
// in gencode's schema language (int32 and int64 as the varints vint32 and
// vint64, repeated fixed64 as []uint64, optional fields as plain fields:
// gencode has no presence bits). benchmark.schema.gen.go was generated from
// it with
//
//	gencode go -schema benchmark.schema -package gencodemsg
//
// by gencode at commit e142383 (built against github.com/andyleap/parser at
// db5a13a); the Go module proxy does not serve gencode, so the generated
// file is checked in unmodified. Do not edit it.
//
// New fills the message the way the benchmarks fill the protobuf one, and
// Echo is the benchmark handler's answer.
//
// This package is internal: it exists for tests and benchmarks. It imports
// no Fleet package but internal/benchpb (for the shared field values).
package gencodemsg
