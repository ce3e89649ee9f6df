package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/rpc"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/testutil"
	"github.com/fleetrpc/fleet/server"
)

// The receivers below are written the way Go's own net/rpc tests write
// theirs (server_test.go in package net/rpc): every form net/rpc accepts,
// with no Fleet-specific code. Each must register with net/rpc and with
// Fleet, and every method must answer through a Fleet client.

// Pair is the two operands of an arithmetic call.
type Pair struct{ A, B int }

// Sum is an arithmetic result.
type Sum struct{ C int }

// Arithmetic mixes args by value and by pointer on a pointer receiver.
type Arithmetic int

func (*Arithmetic) Add(args Pair, reply *Sum) error { // args by value
	reply.C = args.A + args.B
	return nil
}

func (*Arithmetic) Mul(args *Pair, reply *Sum) error {
	reply.C = args.A * args.B
	return nil
}

func (*Arithmetic) Div(args Pair, reply *Sum) error {
	if args.B == 0 {
		return errors.New("divide by zero")
	}
	reply.C = args.A / args.B
	return nil
}

func (*Arithmetic) String(args *Pair, reply *string) error { // builtin reply
	*reply = fmt.Sprintf("%d+%d=%d", args.A, args.B, args.A+args.B)
	return nil
}

func (*Arithmetic) Scan(args string, reply *Sum) error { // builtin args by value
	_, err := fmt.Sscan(args, &reply.C)
	return err
}

func (*Arithmetic) Error(args *Pair, reply *Sum) error { panic("arithmetic exploded") }

// tally's exported method is promoted through the unexported embedded
// field of Wrapper, as net/rpc's "hidden" receiver is.
type tally int

func (*tally) Exported(args Pair, reply *Sum) error {
	reply.C = args.A + args.B
	return nil
}

// Wrapper only embeds tally.
type Wrapper struct{ tally }

// Builtins has a value receiver and builtin reply (and args) types; the
// map and slice replies are used without being made, as net/rpc allows.
type Builtins struct{}

func (Builtins) Map(args *Pair, reply *map[int]int) error {
	(*reply)[args.A] = args.B
	return nil
}

func (Builtins) Slice(args *Pair, reply *[]int) error {
	*reply = append(*reply, args.A, args.B)
	return nil
}

func (Builtins) Array(args *Pair, reply *[2]int) error {
	reply[0], reply[1] = args.A, args.B
	return nil
}

func (Builtins) Len(args []string, reply *int) error { // slice args by value
	*reply = len(args)
	return nil
}

func (Builtins) Total(args map[string]int, reply *int) error { // map args by value
	for _, v := range args {
		*reply += v
	}
	return nil
}

// Suffixer is a value receiver using Fleet's context form, args by value.
type Suffixer struct{ suffix string }

func (s Suffixer) Add(ctx context.Context, args string, reply *string) error {
	*reply = args + s.suffix
	return ctx.Err()
}

// netrpcCall is one call and the reply it must produce.
type netrpcCall struct {
	service, method string
	args            any
	reply           func() any // new pointer to decode into
	want            any        // the dereferenced reply
	code            fleet.Code // fleet.OK when the call succeeds
	msg             string     // part of the error message when it fails
}

func netrpcCalls() []netrpcCall {
	sum := func() any { return new(Sum) }
	return []netrpcCall{
		{"Arithmetic", "Add", Pair{3, 4}, sum, Sum{7}, fleet.OK, ""},
		{"Arithmetic", "Add", &Pair{3, 4}, sum, Sum{7}, fleet.OK, ""},
		{"Arithmetic", "Mul", &Pair{3, 4}, sum, Sum{12}, fleet.OK, ""},
		{"Arithmetic", "Div", Pair{13, 4}, sum, Sum{3}, fleet.OK, ""},
		{"Arithmetic", "Div", Pair{1, 0}, sum, nil, fleet.Unknown, "divide by zero"},
		{"Arithmetic", "String", &Pair{3, 4}, func() any { return new(string) }, "3+4=7", fleet.OK, ""},
		{"Arithmetic", "Scan", "42", sum, Sum{42}, fleet.OK, ""},
		{"Arithmetic", "Scan", "forty-two", sum, nil, fleet.Unknown, "expected integer"},
		{"Arithmetic", "Error", &Pair{}, sum, nil, fleet.Internal, "arithmetic exploded"},
		{"Arithmetic", "Nope", &Pair{}, sum, nil, fleet.NotFound, "Nope"},
		{"Wrapper", "Exported", Pair{5, 6}, sum, Sum{11}, fleet.OK, ""},
		{"Builtins", "Map", &Pair{1, 2}, func() any { return new(map[int]int) }, map[int]int{1: 2}, fleet.OK, ""},
		{"Builtins", "Slice", &Pair{1, 2}, func() any { return new([]int) }, []int{1, 2}, fleet.OK, ""},
		{"Builtins", "Array", &Pair{1, 2}, func() any { return new([2]int) }, [2]int{1, 2}, fleet.OK, ""},
		{"Builtins", "Len", []string{"a", "b", "c"}, func() any { return new(int) }, 3, fleet.OK, ""},
		{"Builtins", "Total", map[string]int{"a": 1, "b": 2}, func() any { return new(int) }, 3, fleet.OK, ""},
		{"Suffixer", "Add", "fleet", func() any { return new(string) }, "fleet!", fleet.OK, ""},
	}
}

// syncBuffer is a bytes.Buffer safe for a logger used from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newNetRPCServer(t *testing.T, log *slog.Logger) *server.Server {
	t.Helper()
	srv := server.New(server.WithLogger(log))
	rcvrs := []any{new(Arithmetic), new(Wrapper), Builtins{}}
	for _, r := range rcvrs {
		if err := rpc.NewServer().Register(r); err != nil {
			t.Fatalf("net/rpc refuses %T: %v", r, err)
		}
		if err := srv.Register(r); err != nil {
			t.Fatalf("Register(%T): %v", r, err)
		}
	}
	if err := srv.Register(Suffixer{suffix: "!"}); err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestNetRPCReceivers(t *testing.T) {
	var logs syncBuffer
	srv := newNetRPCServer(t, slog.New(slog.NewTextHandler(&logs, nil)))
	want := map[string][]string{
		"Arithmetic": {"Add", "Div", "Error", "Mul", "Scan", "String"},
		"Wrapper":    {"Exported"},
		"Builtins":   {"Array", "Len", "Map", "Slice", "Total"},
		"Suffixer":   {"Add"},
	}
	got := srv.Services()
	for name := range got {
		if strings.HasPrefix(name, "fleet.") { // built-in services (health, reflection)
			delete(got, name)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Services() = %v, want %v", got, want)
	}
	if l := logs.String(); l != "" {
		t.Fatalf("registration of fitting types logged: %s", l)
	}
	addr := testutil.Serve(t, srv)
	for _, cd := range []struct {
		name string
		id   codec.ID
	}{{"msgpack", codec.MsgPack}, {"json", codec.JSON}, {"gob", codec.Gob}} {
		t.Run(cd.name, func(t *testing.T) {
			c := dial(t, addr, client.WithCodec(cd.id))
			for _, tc := range netrpcCalls() {
				reply := tc.reply()
				err := c.Call(context.Background(), tc.service, tc.method, tc.args, reply)
				name := fmt.Sprintf("%s.%s(%#v)", tc.service, tc.method, tc.args)
				if tc.code != fleet.OK {
					if fleet.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
						t.Errorf("%s: err = %v, want code %v and %q", name, err, tc.code, tc.msg)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if got := reflect.ValueOf(reply).Elem().Interface(); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s = %#v, want %#v", name, got, tc.want)
				}
			}
		})
	}
	// The panic was logged once, the server still serves.
	if !strings.Contains(logs.String(), "arithmetic exploded") {
		t.Errorf("handler panic not logged: %s", logs.String())
	}
}

// Faulty has one method of each shape net/rpc refuses, and one that fits.
type Faulty struct{}

type hiddenArgs struct{ A int }

type hiddenReply struct{ C int }

func (Faulty) Good(args Pair, reply *Sum) error                          { return nil }
func (Faulty) ReplyByValue(args *Pair, reply Sum) error                  { return nil }
func (Faulty) HiddenArgs(args *hiddenArgs, reply *Sum) error             { return nil }
func (Faulty) HiddenReply(args *Pair, reply *hiddenReply) error          { return nil }
func (Faulty) OneParam(args *Pair) error                                 { return nil }
func (Faulty) TwoResults(args *Pair, reply *Sum) (int, error)            { return 0, nil }
func (Faulty) NoError(args *Pair, reply *Sum) int                        { return 0 }
func (Faulty) CtxNotFirst(args *Pair, ctx context.Context, r *Sum) error { return nil }

// OnlyPointer's single method needs a pointer receiver.
type OnlyPointer struct{}

func (*OnlyPointer) Do(args Pair, reply *Sum) error { return nil }

// OnlyFaulty has no method that fits.
type OnlyFaulty struct{}

func (OnlyFaulty) Bad(args *Pair, reply Sum) error { return nil }

func TestRegisterReportsSkipped(t *testing.T) {
	var logs syncBuffer
	srv := server.New(server.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err := srv.Register(Faulty{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Services()["Faulty"]; !reflect.DeepEqual(got, []string{"Good"}) {
		t.Fatalf("Faulty methods = %v, want [Good]", got)
	}
	l := logs.String()
	for _, want := range []string{
		"method=ReplyByValue reason=\"reply type server_test.Sum is not a pointer\"",
		"method=HiddenArgs reason=\"argument type *server_test.hiddenArgs is not exported\"",
		"method=HiddenReply reason=\"reply type *server_test.hiddenReply is not exported\"",
		"method=OneParam reason=\"has 1 parameters",
		"method=TwoResults reason=\"must return exactly one value, of type error\"",
		"method=NoError reason=\"must return exactly one value, of type error\"",
		"method=CtxNotFirst reason=\"first of 3 parameters is *server_test.Pair, want context.Context\"",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
	if n := strings.Count(l, "level=WARN"); n != 7 {
		t.Errorf("%d warnings logged, want 7:\n%s", n, l)
	}

	err := srv.Register(OnlyFaulty{})
	if err == nil || !strings.Contains(err.Error(), "Bad: reply type server_test.Sum is not a pointer") {
		t.Errorf("Register(OnlyFaulty{}) = %v, want the skipped method and its reason", err)
	}
	err = srv.Register(OnlyPointer{})
	if err == nil || !strings.Contains(err.Error(), "register a pointer") {
		t.Errorf("Register(OnlyPointer{}) = %v, want the pointer hint", err)
	}
	if err := srv.Register(new(OnlyPointer)); err != nil {
		t.Errorf("Register(new(OnlyPointer)) = %v", err)
	}
	err = srv.RegisterFunction("F", "Bad", func(args *Pair, reply Sum) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "is not a pointer") {
		t.Errorf("RegisterFunction with a reply by value = %v", err)
	}
	if err := srv.RegisterFunction("F", "Good", func(args []int, reply *map[string]int) error { return nil }); err != nil {
		t.Errorf("RegisterFunction with builtin args by value: %v", err)
	}
	if _, ok := srv.Services()["OnlyFaulty"]; ok {
		t.Error("OnlyFaulty registered")
	}
}
