package gencodemsg

import "github.com/fleetrpc/fleet/internal/benchpb"

// New returns the benchmark message filled as benchpb.New fills the
// protobuf one: every string field benchpb.Text, every integer field
// benchpb.Number, every bool true, Field5 empty.
func New() *BenchmarkMessage {
	const s, n = benchpb.Text, benchpb.Number
	return &BenchmarkMessage{
		Field1: s, Field9: s, Field18: s, Field80: true, Field81: true,
		Field2: n, Field3: n, Field280: n, Field6: n, Field22: n,
		Field4: s, Field59: true, Field7: s, Field16: n, Field130: n,
		Field12: true, Field17: true, Field13: true, Field14: true,
		Field104: n, Field100: n, Field101: n, Field102: s, Field103: s,
		Field29: n, Field30: true, Field60: n, Field271: n, Field272: n,
		Field150: n, Field23: n, Field24: true, Field25: n, Field78: true,
		Field67: n, Field68: n, Field128: n, Field129: s, Field131: n,
	}
}

// Echo makes dst the benchmark server's answer to src: a copy of src with
// Field1 = "OK" and Field2 = 100 (Field5's backing array is shared).
func Echo(dst, src *BenchmarkMessage) {
	*dst = *src
	dst.Field1 = "OK"
	dst.Field2 = 100
}
