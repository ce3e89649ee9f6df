package transport_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/transport"
	"github.com/fleetrpc/fleet/transport/transporttest"
)

// TestInProcessConformance runs the transport suite over the "inprocess"
// network: a server listening under a name, dialled by name and by an
// XClient whose registry entry is "inprocess@name".
func TestInProcessConformance(t *testing.T) {
	transporttest.Run(t, transport.InProcess, transporttest.Options{Addr: "echo"})
}

// TestInProcessNames checks the naming rules: a name in use cannot be
// listened on again and is free once its listener closes; an empty name
// picks a new one; dialling a name nobody listens on fails with
// Unavailable; the client's and server's addresses say "inprocess".
func TestInProcessNames(t *testing.T) {
	srv := server.New()
	defer srv.Close()
	lis, err := srv.Listen(transport.InProcess, "names")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Listen(transport.InProcess, "names"); fleet.CodeOf(err) != fleet.AlreadyExists {
		t.Fatalf("second listener on a name: %v, want AlreadyExists", err)
	}
	if a := lis.Addr(); a.Network() != "inprocess" || a.String() != "names" {
		t.Fatalf("listener address %s/%s, want inprocess/names", a.Network(), a)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	ctx := context.Background()
	c, err := client.Dial(ctx, transport.InProcess, "names")
	if err != nil {
		t.Fatal(err)
	}
	if a := c.RemoteAddr(); a.Network() != "inprocess" || a.String() != "inprocess" {
		t.Fatalf("client's remote address %s/%s, want inprocess/inprocess", a.Network(), a)
	}
	c.Close()

	if _, err := client.Dial(ctx, transport.InProcess, "nobody"); fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial of an unknown name: %v, want Unavailable", err)
	}
	anon, err := srv.Listen(transport.InProcess, "")
	if err != nil {
		t.Fatal(err)
	}
	if name := anon.Addr().String(); name == "" || name == "names" {
		t.Fatalf("empty name picked %q, want a new name", name)
	}
	anon.Close()

	srv.Close()
	<-served
	if _, err := client.Dial(ctx, transport.InProcess, "names"); fleet.CodeOf(err) != fleet.Unavailable {
		t.Fatalf("dial after the listener closed: %v, want Unavailable", err)
	}
	again, err := srv.Listen(transport.InProcess, "names")
	if err == nil {
		again.Close()
	}
	// The server is closed, so Listen may refuse; the name itself must be free.
	if fleet.CodeOf(err) == fleet.AlreadyExists {
		t.Fatalf("name still in use after its listener closed: %v", err)
	}
}
