package nats_test

import (
	"context"
	"fmt"
	"log"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/nats"
)

// A server registers itself; a client watches the service.
func Example() {
	ctx := context.Background()

	// Server side: keep the record alive until Deregister.
	r, err := nats.NewRegistrar(nats.Config{URL: "nats://127.0.0.1:4222"})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	self := registry.Instance{Service: "Arith", Addr: "192.0.2.10:8972", Weight: 2}
	if err := r.Register(ctx, self); err != nil {
		log.Fatal(err)
	}
	defer r.Deregister(ctx, self)

	// Client side: the full list, now and after every change.
	d, err := nats.NewDiscovery(nats.Config{URL: "nats://127.0.0.1:4222"})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	ch, err := d.Watch(ctx, "Arith")
	if err != nil {
		log.Fatal(err)
	}
	for list := range ch {
		fmt.Println(len(list), "instances")
	}
}
