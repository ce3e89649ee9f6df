package static_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/registrytest"
	"github.com/fleetrpc/fleet/registry/static"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	table, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	registrytest.Run(t,
		func(t *testing.T) registry.Registrar { return table.Registrar() },
		func(t *testing.T) registry.Discovery { return table.Discovery() },
		registrytest.Options{Timeout: 5 * time.Second},
	)
}

func TestFixedList(t *testing.T) {
	fixed := []registry.Instance{
		{Service: "Arith", Addr: "127.0.0.1:8973", Weight: 2},
		{Service: "Arith", Addr: "127.0.0.1:8972"},
		{Service: "Other", Addr: "127.0.0.1:9000"},
	}
	d, err := static.NewDiscovery(static.Config{Instances: fixed})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	got, err := d.Instances(ctx, "Arith")
	if err != nil {
		t.Fatal(err)
	}
	if keys := fmt.Sprint(registrytest.Keys(got)); keys != "[127.0.0.1:8972 127.0.0.1:8973]" {
		t.Fatalf("Instances = %s", keys)
	}
	// Changing the returned list or the Config's must not change the Table.
	got[0].Addr = "changed"
	fixed[0].Weight = 9
	got, _ = d.Instances(ctx, "Arith")
	if got[0].Addr != "127.0.0.1:8972" || got[1].Weight != 2 {
		t.Fatalf("Table changed through an alias: %+v", got)
	}

	// Watch sends the list once, then nothing until ctx ends.
	wctx, wcancel := context.WithCancel(ctx)
	ch, err := d.Watch(wctx, "Arith")
	if err != nil {
		t.Fatal(err)
	}
	first := registrytest.Next(t, "Arith", ch, time.Second)
	if len(first) != 2 {
		t.Fatalf("first list %v", registrytest.Keys(first))
	}
	select {
	case l := <-ch:
		t.Fatalf("second delivery over a fixed list: %v", registrytest.Keys(l))
	case <-time.After(200 * time.Millisecond):
	}
	wcancel()
	if _, ok := <-ch; ok {
		t.Fatal("channel not closed after ctx ended")
	}
}

func TestPeer(t *testing.T) {
	d := static.Peer("Arith", "127.0.0.1:8972")
	defer d.Close()
	got, err := d.Instances(context.Background(), "Arith")
	if err != nil || len(got) != 1 || got[0].Addr != "127.0.0.1:8972" {
		t.Fatalf("Instances = %v, %v", got, err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Peer with an empty address did not panic")
		}
	}()
	static.Peer("Arith", "")
}

func TestInvalidConfig(t *testing.T) {
	for _, in := range []registry.Instance{{}, {Service: "a"}, {Service: "a/b", Addr: "x:1"}} {
		if _, err := static.NewTable(static.Config{Instances: []registry.Instance{in}}); err == nil {
			t.Errorf("NewTable accepted %+v", in)
		}
	}
}

// The Registrar's records die with it; the fixed ones stay.
func TestRegistrarCloseKeepsFixed(t *testing.T) {
	table, err := static.NewTable(static.Config{Instances: []registry.Instance{{Service: "S", Addr: "127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r1, r2 := table.Registrar(), table.Registrar()
	d := table.Discovery()
	defer d.Close()
	r1.Register(ctx, registry.Instance{Service: "S", Addr: "127.0.0.1:2"})
	r2.Register(ctx, registry.Instance{Service: "S", Addr: "127.0.0.1:3"})
	// r2 takes over r1's record: r1's Close must not remove it.
	r2.Register(ctx, registry.Instance{Service: "S", Addr: "127.0.0.1:2", Weight: 5})
	r1.Close()
	got, _ := d.Instances(ctx, "S")
	if keys := fmt.Sprint(registrytest.Keys(got)); keys != "[127.0.0.1:1 127.0.0.1:2 127.0.0.1:3]" {
		t.Fatalf("after r1.Close: %s", keys)
	}
	r2.Close()
	got, _ = d.Instances(ctx, "S")
	if keys := fmt.Sprint(registrytest.Keys(got)); keys != "[127.0.0.1:1]" {
		t.Fatalf("after r2.Close: %s", keys)
	}
}

func Example() {
	table, _ := static.NewTable(static.Config{})
	r := table.Registrar()
	d := table.Discovery()
	defer d.Close()
	ctx := context.Background()

	r.Register(ctx, registry.Instance{Service: "Arith", Addr: "127.0.0.1:8972"})
	list, _ := d.Instances(ctx, "Arith")
	fmt.Println(registrytest.Keys(list))
	r.Close()
	list, _ = d.Instances(ctx, "Arith")
	fmt.Println(len(list))
	// Output:
	// [127.0.0.1:8972]
	// 0
}
