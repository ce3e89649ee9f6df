package gateway

import (
	"encoding/json"
	"reflect"

	"github.com/fleetrpc/fleet"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// What decoding a Go-typed gRPC request may cost (see docs/gateway.md, "Go
// types over gRPC"). A request of a few wire bytes may stand for a large
// decoded value: an empty element of a repeated message field is 2 bytes
// on the wire (tag, zero length) but a dynamicpb message, a Go struct and
// its JSON object once decoded. checkDecodeCost scans the wire bytes
// against the synthesized descriptor before anything is decoded and adds
// up an estimate of the bytes the decoding allocates; a request whose
// estimate passes the limit is refused without being decoded.
//
// The estimate, in bytes, per item of the wire (figures for Go 1.26 and
// google.golang.org/protobuf v1.36, measured by TestDecodeCostEstimate):
//
//   - each message (the request, each nested or element message, each
//     map value message, present or not): costMessage for the dynamicpb
//     message, plus the size of its Go type, plus costJSON times the
//     length of the JSON of its Go type's zero value (encoding/json's
//     growing buffer and the copy it returns);
//   - each field occurrence: costField (its slot in the dynamicpb map),
//     each list element costListElem (its protoreflect.Value and the
//     list's growth), each map entry costMapEntry, plus the Go size of
//     the element (three times for a map entry: the map and two
//     temporaries);
//   - a string: its length (dynamicpb's copy), costJSON times its JSON
//     length (escapes counted), and its length again for a
//     TextUnmarshaler; bytes: twice their length plus costJSON times
//     their base64 length; a number or bool of n wire bytes: costJSON
//     times 3n+3 bytes of JSON;
//   - an unknown field (one the message does not declare, or of another
//     wire type): costUnknown times its bytes (dynamicpb keeps them,
//     appending each to the last).
//
// The estimate errs high (a singular field sent many times is counted
// each time; duplicate map keys too).
const (
	costMessage   = 192
	costField     = 48
	costListElem  = 136
	costMapEntry  = 192
	costJSON      = 4
	costUnknown   = 6
	decodeCostMul = 8
)

// maxDecodeCost returns the bound on the estimated decoding cost of one
// Go-typed gRPC request: WithMaxDecodeCost, else decodeCostMul times
// the server's Limits.MaxDecompressedSize (32 MiB with the 4 MiB
// default).
func (g *Gateway) maxDecodeCost() int64 {
	if g.opts.maxDecodeCost > 0 {
		return g.opts.maxDecodeCost
	}
	return decodeCostMul * int64(g.srv.Limits().MaxDecompressedSize)
}

// errDecodeCost is the error of a request whose decoding would cost
// more than the limit.
func errDecodeCost(limit int64) error {
	return fleet.Errorf(fleet.ResourceExhausted, "decoding the request would cost more than %d bytes", limit)
}

// checkDecodeCost scans b, protobuf bytes of g's message, and returns an
// error, before anything is decoded: ResourceExhausted when the
// estimated cost of decoding b (see above) exceeds limit,
// InvalidArgument for bytes that are not protobuf wire format (as
// proto.Unmarshal would find) or that nest messages or groups deeper
// than maxDepth. It allocates nothing per byte of b; it runs in time
// linear in len(b).
func (g *goMessage) checkDecodeCost(b []byte, limit int64, maxDepth int) error {
	s := costScan{g: g, limit: limit, maxDepth: maxDepth}
	return s.message(b, g.md, 1)
}

type costScan struct {
	g           *goMessage
	cost, limit int64
	maxDepth    int
}

func (s *costScan) add(n int64) error {
	s.cost += n
	if s.cost > s.limit {
		return errDecodeCost(s.limit)
	}
	return nil
}

func wireError(n int) error {
	return fleet.Errorf(fleet.InvalidArgument, "proto: cannot parse invalid wire-format data: %v", protowire.ParseError(n))
}

func (s *costScan) tooDeep() error {
	return fleet.Errorf(fleet.InvalidArgument, "protobuf message nests deeper than %d levels", s.maxDepth)
}

// message scans the fields b of a message md at nesting depth depth. A
// message of a Go type (one with a plan) is counted; a map entry (no
// plan) is counted by its caller.
func (s *costScan) message(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	if depth > s.maxDepth {
		return s.tooDeep()
	}
	plan := s.g.plans[md.FullName()]
	if plan != nil {
		if err := s.add(plan.cost); err != nil {
			return err
		}
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireError(n)
		}
		b = b[n:]
		if typ == protowire.StartGroupType {
			// Groups are never declared by the synthesized (proto3)
			// messages: an unknown field, skipped within the depth.
			m, err := s.group(num, b, depth+1)
			if err != nil {
				return err
			}
			if err := s.add(costUnknown * int64(n+m)); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return wireError(m)
		}
		v := b[:m]
		b = b[m:]
		fd := fields.ByNumber(num)
		if fd == nil || !wireFits(fd, typ) {
			if err := s.add(costUnknown * int64(n+m)); err != nil {
				return err
			}
			continue
		}
		var goSize int64
		if plan != nil {
			goSize = plan.goElem[fd.Index()]
		}
		if err := s.field(fd, typ, v, goSize, depth); err != nil {
			return err
		}
	}
	return nil
}

// group skips an unknown group of field num whose start tag was just
// read, nested depth deep, and returns its length up to and including
// its end tag.
func (s *costScan) group(num protowire.Number, b []byte, depth int) (int, error) {
	if depth > s.maxDepth {
		return 0, s.tooDeep()
	}
	for i := 0; ; {
		n2, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return 0, wireError(n)
		}
		i += n
		switch typ {
		case protowire.EndGroupType:
			if n2 != num {
				return 0, wireError(-1)
			}
			return i, nil
		case protowire.StartGroupType:
			m, err := s.group(n2, b[i:], depth+1)
			if err != nil {
				return 0, err
			}
			i += m
		default:
			m := protowire.ConsumeFieldValue(n2, typ, b[i:])
			if m < 0 {
				return 0, wireError(m)
			}
			i += m
		}
	}
}

// wireType is the wire type of one value of kind k.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.FloatKind, protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return protowire.Fixed32Type
	case protoreflect.DoubleKind, protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return protowire.BytesType
	}
	return protowire.VarintType
}

// wireFits reports whether protobuf-go decodes a value of wire type typ
// into fd (else it keeps it as an unknown field).
func wireFits(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	wt := wireType(fd.Kind())
	return typ == wt || fd.IsList() && typ == protowire.BytesType && wt != protowire.BytesType
}

// field counts one occurrence v (its value's bytes, as
// protowire.ConsumeFieldValue delimits them) of the known field fd whose
// wire type fits; goSize is the Go size of one of its values.
func (s *costScan) field(fd protoreflect.FieldDescriptor, typ protowire.Type, v []byte, goSize int64, depth int) error {
	switch {
	case fd.IsMap():
		if err := s.add(costMapEntry + 3*goSize); err != nil {
			return err
		}
		if vd := fd.MapValue(); vd.Kind() == protoreflect.MessageKind {
			// The value message is made even when the entry has none.
			if plan := s.g.plans[vd.Message().FullName()]; plan != nil {
				if err := s.add(plan.cost); err != nil {
					return err
				}
			}
		}
		entry, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return wireError(n)
		}
		return s.message(entry, fd.Message(), depth+1)
	case fd.IsList() && typ == protowire.BytesType && wireType(fd.Kind()) != protowire.BytesType:
		// Packed scalars.
		packed, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return wireError(n)
		}
		for len(packed) > 0 {
			var m int
			switch wireType(fd.Kind()) {
			case protowire.Fixed32Type:
				_, m = protowire.ConsumeFixed32(packed)
			case protowire.Fixed64Type:
				_, m = protowire.ConsumeFixed64(packed)
			default:
				_, m = protowire.ConsumeVarint(packed)
			}
			if m < 0 {
				return wireError(m)
			}
			packed = packed[m:]
			if err := s.add(costListElem + goSize + costJSON*(3*int64(m)+3)); err != nil {
				return err
			}
		}
		return nil
	case fd.IsList():
		if err := s.add(costListElem + goSize); err != nil {
			return err
		}
	default:
		if err := s.add(costField); err != nil {
			return err
		}
	}
	return s.value(fd, v, depth)
}

// value counts one value v of the singular or list field fd.
func (s *costScan) value(fd protoreflect.FieldDescriptor, v []byte, depth int) error {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		b, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return wireError(n)
		}
		return s.message(b, fd.Message(), depth+1)
	case protoreflect.StringKind:
		b, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return wireError(n)
		}
		// The copy, the JSON, and (TextUnmarshaler) the []byte copy.
		return s.add(2*int64(len(b)) + costJSON*jsonStringLen(b))
	case protoreflect.BytesKind:
		b, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return wireError(n)
		}
		return s.add(2*int64(len(b)) + costJSON*(int64(len(b)+2)/3*4+3))
	}
	return s.add(costJSON * (3*int64(len(v)) + 3))
}

// jsonStringLen bounds the length of b as a JSON string by
// encoding/json: quotes, a comma, and 12 bytes for a byte it may escape
// (control characters, '"', '\\', '<', '>', '&'): 6 of JSON, and as
// many for encoding/json's escaping, measured at about twice the
// unescaped cost.
func jsonStringLen(b []byte) int64 {
	n := int64(len(b)) + 3
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			n += 11
		}
	}
	return n
}

// goSizeOf returns the Go bytes one value of a field of Go type t takes
// once decoded: for a slice or array, one element's; for a map, a key's
// and a value's; a pointer's target counted beside the pointer.
func goSizeOf(t reflect.Type) int64 {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return derefSize(t.Elem())
	case t.Kind() == reflect.Map:
		return derefSize(t.Key()) + derefSize(t.Elem())
	}
	return int64(t.Size())
}

// derefSize is t's size plus, through its pointers, their targets'.
func derefSize(t reflect.Type) int64 {
	n := int64(t.Size())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		n += int64(t.Size())
	}
	return n
}

// planCost sets p.cost, the count of one message of p's Go type: see
// costMessage.
func planCost(p *msgPlan) {
	p.cost = costMessage + int64(p.goType.Size()) + costJSON*zeroJSONLen(p.goType)
}

// zeroJSONLen is the length of encoding/json's form of t's zero value (0
// when it has none, or a MarshalJSON or MarshalText method panics on it).
func zeroJSONLen(t reflect.Type) (n int64) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	b, err := json.Marshal(reflect.New(t).Interface())
	if err != nil {
		return 0
	}
	return int64(len(b))
}
