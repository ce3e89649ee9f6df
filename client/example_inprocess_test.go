package client_test

import (
	"context"
	"fmt"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// Greeting is the Greeter service's message.
type Greeting struct{ Name, Text string }

// A unit test of a service: a real server and a client joined in the
// process by InProcess, with no socket; every call goes through the
// server's whole pipeline (here its auth check). docs/testing.md has the
// full guide.
func ExampleInProcess() {
	srv := server.New(server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		if token != "s3cret" {
			return fleet.NewError(fleet.Unauthenticated, "bad token")
		}
		return nil
	}))
	server.Handle(srv, "Greeter", "Hello", func(ctx context.Context, in *Greeting, out *Greeting) error {
		if in.Name == "" {
			return fleet.NewError(fleet.InvalidArgument, "name is required")
		}
		out.Text = "hello, " + in.Name
		return nil
	})
	defer srv.Shutdown(context.Background())

	c, err := client.InProcess(srv, client.WithAuthToken("s3cret"))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	var out Greeting
	err = c.Call(ctx, "Greeter", "Hello", &Greeting{Name: "Ada"}, &out)
	fmt.Println(out.Text, err)
	err = c.Call(ctx, "Greeter", "Hello", &Greeting{}, &out)
	fmt.Println(err)

	anon, err := client.InProcess(srv) // no token
	if err != nil {
		panic(err)
	}
	defer anon.Close()
	err = anon.Call(ctx, "Greeter", "Hello", &Greeting{Name: "Eve"}, &out)
	fmt.Println(fleet.CodeOf(err))
	fmt.Println(c.RemoteAddr())
	// Output:
	// hello, Ada <nil>
	// invalid_argument: name is required
	// unauthenticated
	// inprocess
}
