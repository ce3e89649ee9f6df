// Code generated from ../../internal/benchpb/echo.go by go generate. DO NOT EDIT.

package vtmsg

// Echo makes dst the benchmark server's answer to src: src's fields with
// Field1 = "OK" and Field2 = 100. It shares src's field values instead of
// copying them (a shallow copy, as the rpcx benchmark's handler does), so dst
// must not be modified through pointers it shares with src. Every peer in
// `fleet bench` answers with Echo, so they all do the same work.
func Echo(dst, src *BenchmarkMessage) {
	dst.Field1 = src.Field1
	dst.Field9 = src.Field9
	dst.Field18 = src.Field18
	dst.Field80 = src.Field80
	dst.Field81 = src.Field81
	dst.Field2 = src.Field2
	dst.Field3 = src.Field3
	dst.Field280 = src.Field280
	dst.Field6 = src.Field6
	dst.Field22 = src.Field22
	dst.Field4 = src.Field4
	dst.Field5 = src.Field5
	dst.Field59 = src.Field59
	dst.Field7 = src.Field7
	dst.Field16 = src.Field16
	dst.Field130 = src.Field130
	dst.Field12 = src.Field12
	dst.Field17 = src.Field17
	dst.Field13 = src.Field13
	dst.Field14 = src.Field14
	dst.Field104 = src.Field104
	dst.Field100 = src.Field100
	dst.Field101 = src.Field101
	dst.Field102 = src.Field102
	dst.Field103 = src.Field103
	dst.Field29 = src.Field29
	dst.Field30 = src.Field30
	dst.Field60 = src.Field60
	dst.Field271 = src.Field271
	dst.Field272 = src.Field272
	dst.Field150 = src.Field150
	dst.Field23 = src.Field23
	dst.Field24 = src.Field24
	dst.Field25 = src.Field25
	dst.Field78 = src.Field78
	dst.Field67 = src.Field67
	dst.Field68 = src.Field68
	dst.Field128 = src.Field128
	dst.Field129 = src.Field129
	dst.Field131 = src.Field131
	ok, hundred := "OK", int32(100)
	dst.Field1 = &ok
	dst.Field2 = &hundred
}
