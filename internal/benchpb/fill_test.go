package benchpb_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fleetrpc/fleet/internal/benchpb"
)

func TestNewSize(t *testing.T) {
	if got := proto.Size(benchpb.New()); got != 581 {
		t.Fatalf("proto.Size(New()) = %d, want 581", got)
	}
	b, err := proto.Marshal(benchpb.New())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 581 {
		t.Fatalf("len(proto.Marshal(New())) = %d, want 581", len(b))
	}
	if len(benchpb.Text) != 54 {
		t.Fatalf("len(Text) = %d, want 54", len(benchpb.Text))
	}
}

// TestNewFill checks every field through reflection, so that a field added
// to the .proto but not to New is caught.
func TestNewFill(t *testing.T) {
	m := benchpb.New().ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := string(fd.Name())
		if fd.IsList() {
			if m.Has(fd) {
				t.Errorf("%s: repeated field is set, want empty", name)
			}
			continue
		}
		if !m.Has(fd) {
			t.Errorf("%s: not set", name)
			continue
		}
		v := m.Get(fd)
		switch fd.Kind() {
		case protoreflect.StringKind:
			if v.String() != benchpb.Text {
				t.Errorf("%s = %q, want %q", name, v.String(), benchpb.Text)
			}
		case protoreflect.BoolKind:
			if !v.Bool() {
				t.Errorf("%s = false, want true", name)
			}
		case protoreflect.Int32Kind, protoreflect.Int64Kind:
			if v.Int() != benchpb.Number {
				t.Errorf("%s = %d, want %d", name, v.Int(), benchpb.Number)
			}
		default:
			t.Errorf("%s: unexpected kind %v", name, fd.Kind())
		}
	}
	if err := proto.CheckInitialized(benchpb.New()); err != nil {
		t.Fatal(err)
	}
}

// TestPlainMirrorsMessage checks that Plain has the message's fields and
// that NewPlain holds the same values as New, by comparing JSON encodings.
func TestPlainMirrorsMessage(t *testing.T) {
	fields := benchpb.New().ProtoReflect().Descriptor().Fields()
	pt := reflect.TypeFor[benchpb.Plain]()
	if pt.NumField() != fields.Len() {
		t.Fatalf("Plain has %d fields, message has %d", pt.NumField(), fields.Len())
	}
	want, err := json.Marshal(benchpb.New())
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(benchpb.NewPlain())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("JSON of NewPlain differs from New:\n got %s\nwant %s", got, want)
	}
}

func TestNewIndependent(t *testing.T) {
	a, b := benchpb.New(), benchpb.New()
	*a.Field1 = "OK"
	if b.GetField1() != benchpb.Text {
		t.Fatal("New returns messages sharing storage")
	}
}
