package registrytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
)

// ServiceName returns a service name unique to this test and process,
// built from the test's name, of at most 40 characters in [a-z0-9-], valid
// for every backend (ZooKeeper paths, NATS subjects, DNS labels, Redis
// keys), so tests of parallel packages never share a service.
func ServiceName(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 27 {
		name = strings.TrimRight(name[len(name)-27:], "-")
		name = strings.TrimLeft(name, "-")
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	if name == "" {
		name = "svc"
	}
	return name + "-" + hex.EncodeToString(rnd[:])
}

// Keys returns the Key of every instance in list, in order.
func Keys(list []registry.Instance) []string {
	keys := make([]string, len(list))
	for i, in := range list {
		keys[i] = in.Key()
	}
	return keys
}

// HasKeys returns a predicate for WaitFor and WaitInstances that is true
// when a list holds exactly the given keys (in any order of arguments).
func HasKeys(keys ...string) func([]registry.Instance) bool {
	want := slices.Clone(keys)
	slices.Sort(want)
	return func(list []registry.Instance) bool {
		got := Keys(list)
		slices.Sort(got)
		return slices.Equal(got, want)
	}
}

// checkList fails t when list is not sorted by Key or holds an instance
// of another service or an invalid one.
func checkList(t testing.TB, service string, list []registry.Instance) {
	t.Helper()
	for i, in := range list {
		if err := in.Validate(); err != nil {
			t.Errorf("list %v: instance %d: %v", Keys(list), i, err)
		}
		if in.Service != service {
			t.Errorf("list for service %q holds an instance of %q", service, in.Service)
		}
		if i > 0 && list[i-1].Key() >= in.Key() {
			t.Errorf("list %v is not sorted by Key without duplicates", Keys(list))
		}
	}
}

// Next returns the next list from a Watch channel, failing t when none
// arrives within timeout or the channel is closed. Every list is checked
// to be sorted and to hold only instances of service.
func Next(t testing.TB, service string, ch <-chan []registry.Instance, timeout time.Duration) []registry.Instance {
	t.Helper()
	select {
	case list, ok := <-ch:
		if !ok {
			t.Fatalf("watch of %q: channel closed", service)
		}
		checkList(t, service, list)
		return list
	case <-time.After(timeout):
		t.Fatalf("watch of %q: no list within %v", service, timeout)
		return nil
	}
}

// WaitFor reads lists from a Watch channel until one satisfies ok and
// returns it, failing t (with the last list seen) when none does within
// timeout or the channel is closed.
func WaitFor(t testing.TB, service string, ch <-chan []registry.Instance, timeout time.Duration, ok func([]registry.Instance) bool) []registry.Instance {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last []registry.Instance
	seen := false
	for {
		select {
		case list, open := <-ch:
			if !open {
				t.Fatalf("watch of %q: channel closed; last list %v", service, Keys(last))
			}
			checkList(t, service, list)
			last, seen = list, true
			if ok(list) {
				return list
			}
		case <-deadline.C:
			if !seen {
				t.Fatalf("watch of %q: no list within %v", service, timeout)
			}
			t.Fatalf("watch of %q: no matching list within %v; last list %v", service, timeout, Keys(last))
			return nil
		}
	}
}

// WaitInstances polls d.Instances until its list satisfies ok and returns
// it, failing t when none does within timeout.
func WaitInstances(t testing.TB, d registry.Discovery, service string, timeout time.Duration, ok func([]registry.Instance) bool) []registry.Instance {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last []registry.Instance
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		list, err := d.Instances(ctx, service)
		cancel()
		if err == nil {
			checkList(t, service, list)
			if ok(list) {
				return list
			}
			last, lastErr = list, nil
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				t.Fatalf("Instances(%q): no matching list within %v; last error: %v", service, timeout, lastErr)
			}
			t.Fatalf("Instances(%q): no matching list within %v; last list %v", service, timeout, Keys(last))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Quiet fails t if a list satisfying bad arrives on ch within d; it is
// used to check that something stays gone.
func Quiet(t testing.TB, service string, ch <-chan []registry.Instance, d time.Duration, bad func([]registry.Instance) bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case list, ok := <-ch:
			if !ok {
				t.Fatalf("watch of %q: channel closed", service)
			}
			checkList(t, service, list)
			if bad(list) {
				t.Fatalf("watch of %q: unexpected list %v", service, Keys(list))
			}
		case <-timer.C:
			return
		}
	}
}

// Addr returns the loopback address "127.0.0.1:<20000+n>" used for the
// n-th instance in a test. Nothing listens there: registries only store it.
func Addr(n int) string { return fmt.Sprintf("127.0.0.1:%d", 20000+n) }

// Logger returns the logger backend tests configure: it writes warnings
// and errors to standard error, so they show in the test output.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Constructor turns a backend's NewRegistrar or NewDiscovery into a test
// helper that returns what it makes and fails t when it returns an error:
//
//	var newRegistrar = registrytest.Constructor(etcd.NewRegistrar)
//	...
//	r := newRegistrar(t, cfg)
func Constructor[C, T any](newFn func(C) (T, error)) func(t testing.TB, cfg C) T {
	return func(t testing.TB, cfg C) T {
		t.Helper()
		v, err := newFn(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
