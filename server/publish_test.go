package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

// TestPublications: Publications lists what Publish keeps, in order;
// Publication.Update writes a change to the registry and keeps it (the
// instance reads it back); Shutdown's deregistration empties the list.
func TestPublications(t *testing.T) {
	tab, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := tab.Registrar()
	defer reg.Close()
	disc := tab.Discovery()
	defer disc.Close()
	srv, _, addr := newServer(t)
	ctx := context.Background()
	for _, svc := range []string{"Svc", "Arith"} {
		in := registry.Instance{Service: svc, Addr: addr, Weight: 1, Tags: []string{"a"}}
		if err := srv.Publish(ctx, reg, in, server.PublishConfig{LoadInterval: -1, DrainDelay: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	pubs := srv.Publications()
	if len(pubs) != 2 || pubs[0].Instance().Service != "Svc" || pubs[1].Instance().Service != "Arith" {
		t.Fatalf("Publications: %d records", len(pubs))
	}
	if err := pubs[1].Update(ctx, func(in *registry.Instance) { in.Weight, in.State = 7, registry.Draining }); err != nil {
		t.Fatal(err)
	}
	if in := pubs[1].Instance(); in.Weight != 7 || in.State != registry.Draining {
		t.Fatalf("Instance after Update: %+v", in)
	}
	in := pubs[0].Instance()
	in.Tags[0] = "changed" // a copy: the record keeps its tags
	if got := pubs[0].Instance().Tags[0]; got != "a" {
		t.Fatalf("Instance shares its tags: %q", got)
	}
	list, err := disc.Instances(ctx, "Arith")
	if err != nil || len(list) != 1 || list[0].Weight != 7 || list[0].State != registry.Draining {
		t.Fatalf("registry after Update: %+v, %v", list, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Publications()); n != 0 {
		t.Fatalf("%d records after Shutdown", n)
	}
}
