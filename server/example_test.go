package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// Greeter is a service written in net/rpc style: exported methods with
// (args, *reply) error, here with a leading context.
type Greeter struct{}

// Hello greets name.
func (Greeter) Hello(ctx context.Context, name *string, reply *string) error {
	if *name == "" {
		return fleet.NewError(fleet.InvalidArgument, "empty name")
	}
	*reply = "Hello, " + *name
	return nil
}

// startExample serves srv on a loopback port and returns a client for it
// and a function that closes both.
func startExample(srv *server.Server) (*client.Client, func()) {
	lis, err := srv.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	c, err := client.Dial(context.Background(), "tcp", lis.Addr().String())
	if err != nil {
		panic(err)
	}
	return c, func() {
		c.Close()
		_ = srv.Shutdown(context.Background())
		if err := <-served; !errors.Is(err, server.ErrServerClosed) {
			panic(err)
		}
	}
}

// A server with one service, called by a client on the same machine.
func Example() {
	srv := server.New()
	if err := srv.Register(Greeter{}); err != nil {
		panic(err)
	}
	c, stop := startExample(srv)
	defer stop()

	name, reply := "Fleet", ""
	err := c.Call(context.Background(), "Greeter", "Hello", &name, &reply)
	fmt.Println(reply, err)

	name = ""
	err = c.Call(context.Background(), "Greeter", "Hello", &name, &reply)
	fmt.Println(fleet.CodeOf(err), err)
	// Output:
	// Hello, Fleet <nil>
	// invalid_argument invalid_argument: empty name
}

// RegisterFunction serves a plain function as service.method.
func ExampleServer_RegisterFunction() {
	srv := server.New()
	err := srv.RegisterFunction("Text", "Upper", func(ctx context.Context, in *string, out *string) error {
		*out = strings.ToUpper(*in)
		return nil
	})
	if err != nil {
		panic(err)
	}
	c, stop := startExample(srv)
	defer stop()

	in, out := "quiet", ""
	if err := c.Call(context.Background(), "Text", "Upper", &in, &out); err != nil {
		panic(err)
	}
	fmt.Println(out, srv.Services()["Text"])
	// Output: QUIET [Upper]
}

// Interceptors wrap every call, the first added outermost; they see the
// call's info and may set response metadata or refuse the call. A
// unary-only interceptor is one function (UnaryInterceptorFunc); the
// server wraps each method once, when it is registered.
func ExampleWithInterceptor() {
	logCalls := server.UnaryInterceptorFunc(func(next server.UnaryFunc) server.UnaryFunc {
		return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
			err := next(ctx, info, args, reply)
			fmt.Printf("served %s.%s: %v\n", info.Service, info.Method, fleet.CodeOf(err))
			return err
		}
	})
	tenantOnly := server.UnaryInterceptorFunc(func(next server.UnaryFunc) server.UnaryFunc {
		return func(ctx context.Context, info *fleet.CallInfo, args, reply any) error {
			if info.Metadata()["tenant"] == "" {
				return fleet.NewError(fleet.PermissionDenied, "no tenant")
			}
			fleet.SetResponseMetadata(ctx, "served-for", info.Metadata()["tenant"])
			return next(ctx, info, args, reply)
		}
	})
	srv := server.New(server.WithInterceptor(logCalls, tenantOnly))
	if err := srv.Register(Greeter{}); err != nil {
		panic(err)
	}
	c, stop := startExample(srv)
	defer stop()

	name, reply := "Ada", ""
	err := c.Call(context.Background(), "Greeter", "Hello", &name, &reply)
	fmt.Println("without tenant:", err)

	var md fleet.Metadata
	ctx := fleet.WithOutgoingMetadata(context.Background(), fleet.Metadata{"tenant": "acme"})
	ctx = fleet.WithResponseMetadata(ctx, &md)
	err = c.Call(ctx, "Greeter", "Hello", &name, &reply)
	fmt.Println(reply, err, md["served-for"])
	// Output:
	// served Greeter.Hello: permission_denied
	// without tenant: permission_denied: no tenant
	// served Greeter.Hello: ok
	// Hello, Ada <nil> acme
}
