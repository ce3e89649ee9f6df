package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

// Args and Sum are the Adder service's messages.
type Args struct{ A, B int }
type Sum struct {
	N      int
	Server string
}

// serveAdder starts a server whose Adder.Add answers with the sum and the
// server's name (or fails with fail, when not nil); stop shuts it down.
func serveAdder(name string, fail error) (addr string, stop func()) {
	srv := server.New()
	if err := srv.RegisterFunction("Adder", "Add", func(ctx context.Context, in *Args, out *Sum) error {
		if fail != nil {
			return fail
		}
		out.N, out.Server = in.A+in.B, name
		return nil
	}); err != nil {
		panic(err)
	}
	if err := srv.RegisterFunction("Adder", "Log", func(ctx context.Context, in *Args, _ *struct{}) error {
		return nil
	}); err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	return lis.Addr().String(), func() {
		_ = srv.Shutdown(context.Background())
		<-served
	}
}

// Dial one server and call it; the deadline of ctx travels with the call.
func Example() {
	addr, stop := serveAdder("a", nil)
	defer stop()

	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var sum Sum
	err = c.Call(ctx, "Adder", "Add", &Args{A: 2, B: 3}, &sum)
	fmt.Println(sum.N, err)

	err = c.Call(ctx, "Adder", "Sub", &Args{}, &sum)
	fmt.Println(fleet.CodeOf(err))
	// Output:
	// 5 <nil>
	// not_found
}

// Go starts calls without waiting; each completes on its Done channel.
func ExampleClient_Go() {
	addr, stop := serveAdder("a", nil)
	defer stop()
	c, err := client.Dial(context.Background(), "tcp", addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	done := make(chan *client.Call, 3)
	for i := 1; i <= 3; i++ {
		c.Go(context.Background(), "Adder", "Add", &Args{A: i, B: i}, new(Sum), done)
	}
	var sums []int
	for range 3 {
		call := <-done
		if call.Error != nil {
			panic(call.Error)
		}
		sums = append(sums, call.Reply.(*Sum).N)
	}
	sort.Ints(sums) // responses arrive in whatever order they finish
	fmt.Println(sums)
	// Output: [2 4 6]
}

// One interceptor chain, built when the client is made, runs around
// Call, Go and Send alike. A unary-only interceptor is one function
// (UnaryInterceptorFunc).
func ExampleWithInterceptor() {
	addr, stop := serveAdder("a", nil)
	defer stop()
	trace := client.UnaryInterceptorFunc(func(next client.Invoker) client.Invoker {
		return func(ctx context.Context, service, method string, args, reply any) error {
			err := next(ctx, service, method, args, reply)
			fmt.Printf("%s.%s oneway=%v: %v\n", service, method, reply == nil, fleet.CodeOf(err))
			return err
		}
	})
	c, err := client.Dial(context.Background(), "tcp", addr, client.WithInterceptor(trace))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	_ = c.Call(ctx, "Adder", "Add", &Args{A: 1, B: 1}, new(Sum))
	<-c.Go(ctx, "Adder", "Add", &Args{A: 2, B: 2}, new(Sum), nil).Done
	_ = c.Send(ctx, "Adder", "Log", &Args{})
	// Output:
	// Adder.Add oneway=false: ok
	// Adder.Add oneway=false: ok
	// Adder.Log oneway=true: ok
}

// An XClient calls a service over every server a registry lists; here a
// static list of two servers, one of them failing. Failover (the default
// fail mode) retries a call that failed with Unavailable on the other
// server, so every call succeeds.
func ExampleNewXClient() {
	good, stopGood := serveAdder("good", nil)
	defer stopGood()
	sick, stopSick := serveAdder("sick", fleet.NewError(fleet.Unavailable, "overloaded"))
	defer stopSick()

	disc, err := static.NewDiscovery(static.Config{Instances: []registry.Instance{
		{Service: "Adder", Addr: good},
		{Service: "Adder", Addr: sick},
	}})
	if err != nil {
		panic(err)
	}
	defer disc.Close()

	x, err := client.NewXClient("Adder", disc, client.WithFailMode(client.Failover))
	if err != nil {
		panic(err)
	}
	defer x.Close()

	for i := range 4 {
		var sum Sum
		err := x.Call(context.Background(), "Add", &Args{A: i, B: 10}, &sum)
		fmt.Println(sum.N, sum.Server, err)
	}
	fmt.Println(len(x.Servers()), "servers")

	// Broadcast needs every server to succeed.
	err = x.Broadcast(context.Background(), "Add", &Args{}, new(Sum))
	fmt.Println(errors.Is(err, fleet.NewError(fleet.Unavailable, "")))
	// Output:
	// 10 good <nil>
	// 11 good <nil>
	// 12 good <nil>
	// 13 good <nil>
	// 2 servers
	// true
}
