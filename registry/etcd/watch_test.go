package etcd_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
	"github.com/fleetrpc/fleet/registry/registrytest"
)

// A watch follows raw etcd writes one event at a time: each delivery is
// the sorted list Instances reads; a put that changes nothing (the same
// record again) and a delete of an absent key deliver nothing; a bad
// record is dropped from the list; lists delivered earlier are left as
// they were.
func TestWatchFollowsEvents(t *testing.T) {
	s := startEtcd(t)
	cfg := config(s, 3*time.Second)
	d := newDiscovery(t, cfg)
	defer d.Close()
	raw := rawClient(t, s)
	svc := registrytest.ServiceName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := func(i int) string { return "/fleet/services/" + svc + "/" + registrytest.Addr(i) }
	put := func(i, w int) {
		t.Helper()
		b, _ := registry.Instance{Service: svc, Addr: registrytest.Addr(i), Weight: w, Meta: map[string]string{"w": "x"}}.Marshal()
		if _, err := raw.Put(ctx, key(i), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{3, 1, 2} {
		put(i, 1)
	}
	ch, err := d.Watch(ctx, svc)
	if err != nil {
		t.Fatal(err)
	}
	var kept, copies [][]registry.Instance
	next := func(want int) {
		t.Helper()
		select {
		case l := <-ch:
			now, err := d.Instances(ctx, svc)
			if err != nil || !reflect.DeepEqual(l, now) || len(l) != want {
				t.Fatalf("delivered %v; Instances %v, %v; want %d instances", l, now, err, want)
			}
			kept, copies = append(kept, l), append(copies, regutil.Clone(l))
		case <-ctx.Done():
			t.Fatal("nothing delivered")
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case l := <-ch:
			t.Fatalf("delivered %v, want nothing", l)
		case <-time.After(300 * time.Millisecond):
		}
	}
	next(3)
	put(2, 5) // update
	next(3)
	put(2, 5) // the same record again
	quiet()
	put(0, 1) // first in order
	next(4)
	if _, err := raw.Delete(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	next(3)
	if _, err := raw.Delete(ctx, key(9)); err != nil { // absent
		t.Fatal(err)
	}
	quiet()
	if _, err := raw.Put(ctx, key(3), "not json"); err != nil {
		t.Fatal(err)
	}
	next(2)
	// Several events in one transaction arrive as one batch.
	b, _ := registry.Instance{Service: svc, Addr: registrytest.Addr(7)}.Marshal()
	if _, err := raw.Txn(ctx).Then(clientv3.OpPut(key(7), string(b)), clientv3.OpDelete(key(0))).Commit(); err != nil {
		t.Fatal(err)
	}
	next(2)
	for i := range kept {
		if !reflect.DeepEqual(kept[i], copies[i]) {
			t.Fatalf("list %d changed after later events: %v, was %v", i, kept[i], copies[i])
		}
	}
}
