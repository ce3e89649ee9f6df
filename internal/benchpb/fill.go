package benchpb

// Text is the 54-byte UTF-8 string the benchmarks put in every string field.
const Text = "许多往事在眼前一幕一幕，变的那麼模糊"

// Number is the value the benchmarks put in every int32 and int64 field.
const Number = 100000

// Size is the length in bytes of the protobuf encoding of New(), as produced
// by google.golang.org/protobuf/proto.Marshal.
const Size = 581

// New returns a BenchmarkMessage filled as rpcx-benchmark fills it: every
// int32 and int64 field is Number (100000), every bool field is true, every
// string field is Text, and the repeated field5 is empty. Its protobuf
// encoding is Size (581) bytes. Each call returns a new message, so callers
// may modify it freely.
func New() *BenchmarkMessage {
	s := func() *string { v := Text; return &v }
	b := func() *bool { v := true; return &v }
	i := func() *int32 { v := int32(Number); return &v }
	l := func() *int64 { v := int64(Number); return &v }
	return &BenchmarkMessage{
		Field1:   s(),
		Field9:   s(),
		Field18:  s(),
		Field80:  b(),
		Field81:  b(),
		Field2:   i(),
		Field3:   i(),
		Field280: i(),
		Field6:   i(),
		Field22:  l(),
		Field4:   s(),
		Field59:  b(),
		Field7:   s(),
		Field16:  i(),
		Field130: i(),
		Field12:  b(),
		Field17:  b(),
		Field13:  b(),
		Field14:  b(),
		Field104: i(),
		Field100: i(),
		Field101: i(),
		Field102: s(),
		Field103: s(),
		Field29:  i(),
		Field30:  b(),
		Field60:  i(),
		Field271: i(),
		Field272: i(),
		Field150: i(),
		Field23:  i(),
		Field24:  b(),
		Field25:  i(),
		Field78:  b(),
		Field67:  i(),
		Field68:  i(),
		Field128: i(),
		Field129: s(),
		Field131: i(),
	}
}

// Plain is an ordinary Go struct with the fields of BenchmarkMessage, in the
// same order and with the same names, for the codecs that do not speak
// protobuf (encoding/json, MessagePack, encoding/gob). Its json and msgpack
// tags are the lowercase proto field names, so its JSON encoding matches
// that of a fully populated BenchmarkMessage. In JSON, Field5 is omitted
// when empty, as in the generated struct; in MessagePack it is not, because
// omitempty makes that library allocate on every Marshal.
type Plain struct {
	Field1   string   `json:"field1" msgpack:"field1"`
	Field9   string   `json:"field9" msgpack:"field9"`
	Field18  string   `json:"field18" msgpack:"field18"`
	Field80  bool     `json:"field80" msgpack:"field80"`
	Field81  bool     `json:"field81" msgpack:"field81"`
	Field2   int32    `json:"field2" msgpack:"field2"`
	Field3   int32    `json:"field3" msgpack:"field3"`
	Field280 int32    `json:"field280" msgpack:"field280"`
	Field6   int32    `json:"field6" msgpack:"field6"`
	Field22  int64    `json:"field22" msgpack:"field22"`
	Field4   string   `json:"field4" msgpack:"field4"`
	Field5   []uint64 `json:"field5,omitempty" msgpack:"field5"`
	Field59  bool     `json:"field59" msgpack:"field59"`
	Field7   string   `json:"field7" msgpack:"field7"`
	Field16  int32    `json:"field16" msgpack:"field16"`
	Field130 int32    `json:"field130" msgpack:"field130"`
	Field12  bool     `json:"field12" msgpack:"field12"`
	Field17  bool     `json:"field17" msgpack:"field17"`
	Field13  bool     `json:"field13" msgpack:"field13"`
	Field14  bool     `json:"field14" msgpack:"field14"`
	Field104 int32    `json:"field104" msgpack:"field104"`
	Field100 int32    `json:"field100" msgpack:"field100"`
	Field101 int32    `json:"field101" msgpack:"field101"`
	Field102 string   `json:"field102" msgpack:"field102"`
	Field103 string   `json:"field103" msgpack:"field103"`
	Field29  int32    `json:"field29" msgpack:"field29"`
	Field30  bool     `json:"field30" msgpack:"field30"`
	Field60  int32    `json:"field60" msgpack:"field60"`
	Field271 int32    `json:"field271" msgpack:"field271"`
	Field272 int32    `json:"field272" msgpack:"field272"`
	Field150 int32    `json:"field150" msgpack:"field150"`
	Field23  int32    `json:"field23" msgpack:"field23"`
	Field24  bool     `json:"field24" msgpack:"field24"`
	Field25  int32    `json:"field25" msgpack:"field25"`
	Field78  bool     `json:"field78" msgpack:"field78"`
	Field67  int32    `json:"field67" msgpack:"field67"`
	Field68  int32    `json:"field68" msgpack:"field68"`
	Field128 int32    `json:"field128" msgpack:"field128"`
	Field129 string   `json:"field129" msgpack:"field129"`
	Field131 int32    `json:"field131" msgpack:"field131"`
}

// NewPlain returns a Plain filled the same way as New: every integer field
// is Number, every bool is true, every string is Text and Field5 is nil.
func NewPlain() *Plain {
	return &Plain{
		Field1: Text, Field9: Text, Field18: Text, Field4: Text, Field7: Text,
		Field102: Text, Field103: Text, Field129: Text,

		Field80: true, Field81: true, Field59: true, Field12: true,
		Field17: true, Field13: true, Field14: true, Field30: true,
		Field24: true, Field78: true,

		Field2: Number, Field3: Number, Field280: Number, Field6: Number,
		Field16: Number, Field130: Number, Field104: Number, Field100: Number,
		Field101: Number, Field29: Number, Field60: Number, Field271: Number,
		Field272: Number, Field150: Number, Field23: Number, Field25: Number,
		Field67: Number, Field68: Number, Field128: Number, Field131: Number,
		Field22: Number,
	}
}
