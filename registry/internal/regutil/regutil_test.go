package regutil_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func list(addrs ...string) []registry.Instance {
	out := []registry.Instance{}
	for _, a := range addrs {
		out = append(out, registry.Instance{Service: "S", Addr: a})
	}
	return out
}

func recv(t *testing.T, ch <-chan []registry.Instance) []registry.Instance {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return l
	case <-time.After(2 * time.Second):
		t.Fatal("nothing delivered")
		return nil
	}
}

func idle(t *testing.T, ch <-chan []registry.Instance) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("unexpected delivery %v", l)
	case <-time.After(50 * time.Millisecond):
	}
}

// A slow consumer gets the newest list, equal lists are dropped unless
// forced, and the channel closes when the context ends.
func TestFeed(t *testing.T) {
	f := regutil.NewFeed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()

	f.Publish(nil, false) // nil is delivered as an empty list
	if l := recv(t, f.C()); l == nil || len(l) != 0 {
		t.Fatalf("first = %#v; want an empty list", l)
	}
	f.Publish(list("a"), false)
	f.Publish(list("a", "b"), false)
	f.Publish(list("a", "b", "c"), false)
	// Run may already hold an older list; the newest follows at once.
	l := recv(t, f.C())
	if len(l) != 3 {
		l = recv(t, f.C())
	}
	if len(l) != 3 {
		t.Fatalf("slow consumer ended with %v; want the newest list", l)
	}
	idle(t, f.C())
	f.Publish(list("a", "b", "c"), false)
	idle(t, f.C())
	f.Publish(list("a", "b", "c"), true)
	if l := recv(t, f.C()); len(l) != 3 {
		t.Fatalf("forced = %v", l)
	}
	cancel()
	<-done
	if _, ok := <-f.C(); ok {
		t.Fatal("channel open after Run returned")
	}
}

// The Feed's copy for comparison is not affected by what the consumer does
// with its list.
func TestFeedIsolation(t *testing.T) {
	f := regutil.NewFeed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	l := list("a")
	l[0].Meta = map[string]string{"k": "v"}
	f.Publish(l, false)
	got := recv(t, f.C())
	got[0].Meta["k"] = "changed"
	same := list("a")
	same[0].Meta = map[string]string{"k": "v"}
	f.Publish(same, false)
	idle(t, f.C())
}

func TestLife(t *testing.T) {
	l := regutil.NewLife()
	ch, err := l.Watch(context.Background(), "S", func(ctx context.Context, f *regutil.Feed) {
		f.Publish(list("a"), true)
		<-ctx.Done()
	})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, ch)
	if _, err := l.Watch(context.Background(), "a/b", nil); err == nil {
		t.Fatal("Watch accepted a service with '/'")
	}
	if !l.Close() || l.Close() {
		t.Fatal("Close should report true once")
	}
	if _, ok := <-ch; ok {
		t.Fatal("watch channel open after Close")
	}
	if _, err := l.Watch(context.Background(), "S", nil); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Watch after Close = %v", err)
	}
	if err := l.Go(func() {}); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("Go after Close = %v", err)
	}
}

func TestBackoff(t *testing.T) {
	b := regutil.Backoff{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	for i, ceil := range []time.Duration{10, 20, 40, 80, 80, 80} {
		d := b.Next()
		ceil *= time.Millisecond
		if d < ceil/2 || d > ceil {
			t.Fatalf("delay %d = %v; want in [%v, %v]", i, d, ceil/2, ceil)
		}
	}
	b.Reset()
	if d := b.Next(); d > 10*time.Millisecond {
		t.Fatalf("after Reset = %v", d)
	}
	var zero regutil.Backoff
	if d := zero.Next(); d < 50*time.Millisecond || d > 100*time.Millisecond {
		t.Fatalf("zero value first delay = %v", d)
	}
}

func TestSignal(t *testing.T) {
	var s regutil.Signal
	c1, c2 := s.C(), s.C()
	s.Fire()
	for _, c := range []<-chan struct{}{c1, c2} {
		select {
		case <-c:
		default:
			t.Fatal("receiver not woken")
		}
	}
	select {
	case <-s.C():
		t.Fatal("a channel taken after Fire is already closed")
	default:
	}
}

func TestCacheFallback(t *testing.T) {
	var c regutil.Cache
	log := slog.New(slog.DiscardHandler)
	down := errors.New("down")
	if _, err := c.Fallback(context.Background(), "S", down, log); err != down {
		t.Fatalf("no cache: %v", err)
	}
	c.Put("S", list("a"))
	got, err := c.Fallback(context.Background(), "S", down, log)
	if err != nil || len(got) != 1 {
		t.Fatalf("cached: %v, %v", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Fallback(ctx, "S", down, log); err != down {
		t.Fatalf("caller's ctx done: %v; want the error", err)
	}
	if _, err := c.Fallback(context.Background(), "S", registry.ErrClosed, log); err != registry.ErrClosed {
		t.Fatalf("closed: %v", err)
	}
}

func TestDecode(t *testing.T) {
	b, _ := registry.Instance{Service: "A", Addr: "h:1"}.Marshal()
	if _, err := regutil.Decode(b, "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := regutil.Decode(b, "B"); err == nil {
		t.Fatal("record of A accepted for B")
	}
	if _, err := regutil.Decode([]byte("{"), "A"); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

// fakeBackend records what the hooks of a Registrations do.
type fakeBackend struct {
	writes  []string // "<op> <key>"
	deleted []string
	keeping chan string // receives the key when a Keep starts
	fail    error       // returned by Create
}

func newRegistrations(b *fakeBackend) *regutil.Registrations[string] {
	return &regutil.Registrations[string]{
		Backend: "fake",
		Life:    regutil.NewLife(),
		Key:     func(in registry.Instance) string { return in.Service + "/" + in.Key() },
		Create: func(_ context.Context, key string, _ registry.Instance, _ []byte) (string, error) {
			b.writes = append(b.writes, "create "+key)
			return key, b.fail
		},
		Write: func(_ context.Context, op, key string, _ []byte) error {
			b.writes = append(b.writes, op+" "+key)
			return nil
		},
		Keep: func(ctx context.Context, key string) {
			b.keeping <- key
			<-ctx.Done()
		},
		Delete: func(_ context.Context, key string, _ registry.Instance, state string) error {
			b.deleted = append(b.deleted, key+"="+state)
			return nil
		},
	}
}

// Register creates then writes, Update needs a registration, Deregister
// stops Keep before Delete, errors carry the backend, op and key, and
// nothing runs after Close.
func TestRegistrations(t *testing.T) {
	b := &fakeBackend{keeping: make(chan string, 4)}
	regs := newRegistrations(b)
	ctx := context.Background()
	in := registry.Instance{Service: "S", Addr: "h:1"}

	err := regs.Update(ctx, in)
	if !errors.Is(err, registry.ErrNotRegistered) || err.Error() != "fake: update S/h:1: registry: instance not registered" {
		t.Fatalf("Update before Register = %v", err)
	}
	if err := regs.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	if k := <-b.keeping; k != "S/h:1" {
		t.Fatalf("Keep of %q", k)
	}
	if err := regs.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := regs.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := regs.Deregister(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := regs.Deregister(ctx, in); err != nil { // not registered: Delete all the same
		t.Fatal(err)
	}
	want := []string{"create S/h:1", "register S/h:1", "update S/h:1"}
	if !slices.Equal(b.writes, want) || !slices.Equal(b.deleted, []string{"S/h:1=S/h:1", "S/h:1="}) {
		t.Fatalf("writes %q, deletes %q", b.writes, b.deleted)
	}

	if err := regs.Register(ctx, registry.Instance{Service: "S"}); err == nil || !strings.HasPrefix(err.Error(), "fake: registry: ") {
		t.Fatalf("Register of an invalid instance = %v", err)
	}
	b.fail = errors.New("down")
	if err := regs.Register(ctx, in); err == nil || err.Error() != "fake: register S/h:1: down" {
		t.Fatalf("Register failing = %v", err)
	}
	b.fail = nil
	if err := regs.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	<-b.keeping
	regs.Life.Close() // stops the Keep without deleting
	for _, err := range []error{regs.Register(ctx, in), regs.Update(ctx, in), regs.Deregister(ctx, in)} {
		if !errors.Is(err, registry.ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	}
	if len(b.deleted) != 2 {
		t.Fatalf("Delete called after Close: %q", b.deleted)
	}
}
