package reflection_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/reflection"
)

// Shape exercises the encoding/json rules the JSON Schema follows.
type Shape struct {
	Name    string            `json:"name"`
	Hidden  string            `json:"-"`
	Count   int64             `json:"count,string"`
	Size    uint16            `json:"size,omitempty"`
	Data    []byte            `json:"data"`
	Tags    []string          `json:"tags"`
	Pair    [2]float64        `json:"pair"`
	Labels  map[string]int    `json:"labels"`
	When    time.Time         `json:"when"`
	Any     any               `json:"any"`
	Raw     json.RawMessage   `json:"raw"`
	Next    *Shape            `json:"next"`
	ByID    map[int]*Shape    `json:"by_id"`
	private int               // skipped: unexported
	Inner                     // flattened
	Named   Inner             `json:"named"`
	Extra   map[string]string // no tag: the Go name
}

// Inner is embedded in Shape.
type Inner struct {
	Depth int  `json:"depth"`
	OK    bool `json:"ok"`
}

func reflServer(t *testing.T, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	srv := server.New(opts...)
	if err := reflection.Register(srv); err != nil {
		t.Fatal(err)
	}
	for name, rcvr := range map[string]any{"Svc": Svc{}, "Arith": new(Arith), "Hello": Hello{}, "Greeter": valueRecv{prefix: "hi "}} {
		if err := srv.RegisterName(name, rcvr); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.RegisterFunction("Fn", "Shape", func(ctx context.Context, in *Shape, out *[]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := srv.Alias("Arith", "Multiply", "Mul"); err != nil {
		t.Fatal(err)
	}
	return srv, testutil.Serve(t, srv)
}

// TestReflectionList lists services, methods and codecs with each codec a
// client might use for it.
func TestReflectionList(t *testing.T) {
	_, addr := reflServer(t)
	for _, cd := range []codec.ID{codec.MsgPack, codec.JSON, codec.Gob} {
		c := dial(t, addr, client.WithCodec(cd))
		var list reflection.ListReply
		if err := c.Call(context.Background(), reflection.Service, "List", &reflection.ListRequest{}, &list); err != nil {
			t.Fatalf("codec %d: %v", cd, err)
		}
		got := map[string][]string{}
		var names []string
		for _, s := range list.Services {
			names = append(names, s.Name)
			got[s.Name] = s.Methods
		}
		want := map[string][]string{
			"Arith":            {"Divide", "Mul", "Multiply"},
			"Fn":               {"Shape"},
			"Greeter":          {"Greet"},
			"Hello":            {"Say"},
			"Svc":              {"Echo", "Note", "Sleep"},
			"fleet.Reflection": {"Describe", "List"},
		}
		if !reflect.DeepEqual(got, want) || !slices.IsSorted(names) {
			t.Fatalf("codec %d: services %v, want %v (sorted)", cd, got, want)
		}
		var codecs []string
		for _, x := range list.Codecs {
			codecs = append(codecs, x.Name)
		}
		for _, n := range []string{"raw", "json", "protobuf", "msgpack", "gob"} {
			if !slices.Contains(codecs, n) {
				t.Fatalf("codec %d: codecs %v lack %s", cd, codecs, n)
			}
		}
		if list.Codecs[1].ID != uint8(codec.JSON) || list.Codecs[1].Name != "json" {
			t.Fatalf("codecs %v: want json under ID 1", list.Codecs)
		}
	}
}

func describe(t *testing.T, c *client.Client, svc, method string) *reflection.DescribeReply {
	t.Helper()
	var d reflection.DescribeReply
	if err := c.Call(context.Background(), reflection.Service, "Describe", &reflection.DescribeRequest{Service: svc, Method: method}, &d); err != nil {
		t.Fatalf("describe %s.%s: %v", svc, method, err)
	}
	return &d
}

// TestReflectionDescribeForms describes a method of each registration
// form: pointer receiver with and without a context, value receiver,
// function, alias, protobuf messages and built-in types.
func TestReflectionDescribeForms(t *testing.T) {
	_, addr := reflServer(t)
	c := dial(t, addr, client.WithCodec(codec.JSON))
	for _, tc := range []struct {
		svc, method      string
		args, reply      string // Go types
		argSch, replySch string // a fragment of each JSON Schema; "" for protobuf
		example          string // the args example
	}{
		{"Arith", "Multiply", "reflection_test.Args", "int", `"properties":{"A":{"type":"integer"},"B":{"type":"integer"}}`, `"type":"integer"`, `{"A":0,"B":0}`},
		{"Arith", "Mul", "reflection_test.Args", "int", `"title":"reflection_test.Args"`, `"type":"integer"`, `{"A":0,"B":0}`},
		{"Arith", "Divide", "reflection_test.Args", "reflection_test.Quotient", `"type":"object"`, `"properties":{"Quo":{"type":"integer"},"Rem":{"type":"integer"}}`, `{"A":0,"B":0}`},
		{"Svc", "Sleep", "time.Duration", "string", `"type":"integer"`, `"type":"string"`, `0`},
		{"Svc", "Note", "reflection_test.Msg", "struct {}", `"properties":{"S":{"type":"string"}}`, `"type":"object"`, `{"S":""}`},
		{"Greeter", "Greet", "reflection_test.Msg", "reflection_test.Msg", `"S"`, `"S"`, `{"S":""}`},
		{"Fn", "Shape", "reflection_test.Shape", "[]uint8", `"name":{"type":"string"}`, `"contentEncoding":"base64"`, ""},
		{"Hello", "Say", "benchpb.BenchmarkMessage", "benchpb.BenchmarkMessage", "", "", ""},
	} {
		d := describe(t, c, tc.svc, tc.method)
		if len(d.Methods) != 1 {
			t.Fatalf("%s.%s: %d methods described", tc.svc, tc.method, len(d.Methods))
		}
		m := d.Methods[0]
		if m.Service != tc.svc || m.Name != tc.method || m.Args.GoType != tc.args || m.Reply.GoType != tc.reply {
			t.Errorf("%s.%s described as %s.%s(%s) %s", tc.svc, tc.method, m.Service, m.Name, m.Args.GoType, m.Reply.GoType)
		}
		for _, x := range []struct {
			typ  reflection.TypeInfo
			frag string
		}{{m.Args, tc.argSch}, {m.Reply, tc.replySch}} {
			if tc.argSch == "" { // protobuf
				if x.typ.Protobuf == "" || len(x.typ.FileDescriptorSet) == 0 || x.typ.JSONSchema != nil {
					t.Errorf("%s.%s: protobuf type described as %+v", tc.svc, tc.method, x.typ)
				}
				continue
			}
			if x.typ.Protobuf != "" || !json.Valid(x.typ.JSONSchema) || !strings.Contains(string(x.typ.JSONSchema), x.frag) {
				t.Errorf("%s.%s: schema %s lacks %s", tc.svc, tc.method, x.typ.JSONSchema, x.frag)
			}
		}
		if tc.example != "" && string(m.Args.Example) != tc.example {
			t.Errorf("%s.%s: example %s, want %s", tc.svc, tc.method, m.Args.Example, tc.example)
		}
		if len(d.Codecs) == 0 {
			t.Errorf("%s.%s: no codecs", tc.svc, tc.method)
		}
	}
	all := describe(t, c, "Arith", "")
	var names []string
	for _, m := range all.Methods {
		names = append(names, m.Name)
	}
	if !reflect.DeepEqual(names, []string{"Divide", "Mul", "Multiply"}) {
		t.Fatalf("describe Arith: methods %v", names)
	}
}

// TestReflectionJSONSchema checks the schema derived from a Go type
// against encoding/json's rules, and that the example decodes.
func TestReflectionJSONSchema(t *testing.T) {
	_, addr := reflServer(t)
	c := dial(t, addr)
	m := describe(t, c, "Fn", "Shape").Methods[0]
	var sch struct {
		Schema     string                     `json:"$schema"`
		Title      string                     `json:"title"`
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(m.Args.JSONSchema, &sch); err != nil {
		t.Fatal(err)
	}
	if sch.Schema != "https://json-schema.org/draft/2020-12/schema" || sch.Type != "object" || sch.Title != "reflection_test.Shape" {
		t.Fatalf("schema head: %s", m.Args.JSONSchema)
	}
	want := map[string]string{
		"name":   `{"type":"string"}`,
		"count":  `{"description":"a int64 in a JSON string","type":"string"}`,
		"size":   `{"type":"integer","minimum":0}`,
		"data":   `{"type":"string","contentEncoding":"base64"}`,
		"tags":   `{"type":"array","items":{"type":"string"}}`,
		"pair":   `{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":2}`,
		"labels": `{"type":"object","additionalProperties":{"type":"integer"}}`,
		"when":   `{"type":"string","format":"date-time"}`,
		"any":    `{"description":"any JSON value"}`,
		"raw":    `{"description":"any JSON value"}`,
		"next":   `{"$ref":"#/$defs/reflection_test.Shape"}`,
		"by_id":  `{"type":"object","additionalProperties":{"$ref":"#/$defs/reflection_test.Shape"}}`,
		"depth":  `{"type":"integer"}`,
		"ok":     `{"type":"boolean"}`,
		"named":  `{"title":"reflection_test.Inner","type":"object","properties":{"depth":{"type":"integer"},"ok":{"type":"boolean"}}}`,
		"Extra":  `{"type":"object","additionalProperties":{"type":"string"}}`,
	}
	got := map[string]string{}
	for k, v := range sch.Properties {
		got[k] = string(v)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("properties:\n got %v\nwant %v", got, want)
	}
	if _, ok := sch.Defs["reflection_test.Shape"]; !ok {
		t.Fatalf("$defs lack the recursive type: %s", m.Args.JSONSchema)
	}
	// Properties keep the field order.
	s := string(m.Args.JSONSchema)
	if strings.Index(s, `"name"`) > strings.Index(s, `"count"`) || strings.Index(s, `"Extra"`) < strings.Index(s, `"depth"`) {
		t.Fatalf("properties out of field order: %s", s)
	}
	var v Shape
	if err := json.Unmarshal(m.Args.Example, &v); err != nil || v.private != 0 {
		t.Fatalf("example %s does not decode: %v", m.Args.Example, err)
	}
}

// TestReflectionProtobufDescriptors builds the argument of Hello.Say from
// the reflected descriptors alone (dynamicpb) and calls the method with
// it, as a client without the generated code would.
func TestReflectionProtobufDescriptors(t *testing.T) {
	_, addr := reflServer(t)
	c := dial(t, addr)
	m := describe(t, c, "Hello", "Say").Methods[0]
	if m.Args.Protobuf != "pb.BenchmarkMessage" {
		t.Fatalf("protobuf name %q", m.Args.Protobuf)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(m.Args.FileDescriptorSet, &set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatal(err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(m.Args.Protobuf))
	if err != nil {
		t.Fatal(err)
	}
	md := d.(protoreflect.MessageDescriptor)
	if got, want := md.Fields().Len(), (&benchpb.BenchmarkMessage{}).ProtoReflect().Descriptor().Fields().Len(); got != want {
		t.Fatalf("reflected message has %d fields, generated %d", got, want)
	}
	in := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(mustMarshal(t, benchpb.New()), in); err != nil {
		t.Fatal(err)
	}
	out := dynamicpb.NewMessage(md)
	if err := c.Call(context.Background(), "Hello", "Say", in, out); err != nil {
		t.Fatal(err)
	}
	f1 := md.Fields().ByName("field1")
	if got := out.Get(f1).String(); got != "OK" {
		t.Fatalf("reply field1 = %q", got)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReflectionErrors: bad requests fail with a code; a server without
// Register answers NotFound; a second Register fails; auth guards
// reflection too.
func TestReflectionErrors(t *testing.T) {
	_, addr := reflServer(t)
	c := dial(t, addr)
	ctx := context.Background()
	for _, tc := range []struct {
		req  reflection.DescribeRequest
		code fleet.Code
	}{
		{reflection.DescribeRequest{}, fleet.InvalidArgument},
		{reflection.DescribeRequest{Service: "Nope"}, fleet.NotFound},
		{reflection.DescribeRequest{Service: "Arith", Method: "Nope"}, fleet.NotFound},
	} {
		err := c.Call(ctx, reflection.Service, "Describe", &tc.req, &reflection.DescribeReply{})
		if fleet.CodeOf(err) != tc.code {
			t.Errorf("describe %+v: %v, want %s", tc.req, err, tc.code)
		}
	}

	off := server.New()
	if err := off.Register(new(Arith)); err != nil {
		t.Fatal(err)
	}
	if _, ok := off.Services()[reflection.Service]; ok {
		t.Fatal("a server without reflection.Register lists the reflection service")
	}
	c2 := dial(t, testutil.Serve(t, off))
	err := c2.Call(ctx, reflection.Service, "List", &reflection.ListRequest{}, &reflection.ListReply{})
	if fleet.CodeOf(err) != fleet.NotFound {
		t.Fatalf("list without reflection: %v", err)
	}

	errNo := errors.New("no token")
	guarded := server.New(server.WithAuth(func(ctx context.Context, _ *fleet.CallInfo, token string) error {
		if token != "secret" {
			return errNo
		}
		return nil
	}))
	if err := reflection.Register(guarded); err != nil {
		t.Fatal(err)
	}
	if err := reflection.Register(guarded); err == nil {
		t.Fatal("second Register succeeded")
	}
	gaddr := testutil.Serve(t, guarded)
	err = dial(t, gaddr).Call(ctx, reflection.Service, "List", &reflection.ListRequest{}, &reflection.ListReply{})
	if fleet.CodeOf(err) != fleet.Unauthenticated {
		t.Fatalf("list without token: %v", err)
	}
	var list reflection.ListReply
	if err := dial(t, gaddr, client.WithAuthToken("secret")).Call(ctx, reflection.Service, "List", &reflection.ListRequest{}, &list); err != nil {
		t.Fatalf("list with token: %v", err)
	}
	found := false
	for _, svc := range list.Services {
		found = found || svc.Name == reflection.Service
	}
	if !found {
		t.Fatalf("list with token: %+v lacks %s", list, reflection.Service)
	}
}
