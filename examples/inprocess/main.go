// Command inprocess shows the in-process client, the way to test a Fleet
// service (docs/testing.md): the server and a client joined inside the
// process by client.InProcess, with no port opened, so every call goes
// through the server's whole pipeline (auth, limits, metadata,
// interceptors, codecs, streams) exactly as a network call does. It calls
// a unary method, checks an error code, shows that the server's auth
// applies, reads a server stream, and shuts the server down.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// HelloArgs is the argument of Greeter.Hello and Greeter.Repeat.
type HelloArgs struct {
	Name  string
	Times int
}

// HelloReply is the reply of Greeter.Hello and each message of Repeat.
type HelloReply struct{ Text string }

// Greeter says hello.
type Greeter struct{}

// Hello greets args.Name; an empty name is invalid_argument.
func (Greeter) Hello(ctx context.Context, args *HelloArgs, reply *HelloReply) error {
	if args.Name == "" {
		return fleet.NewError(fleet.InvalidArgument, "name is required")
	}
	reply.Text = "hello, " + args.Name
	fleet.SetResponseMetadata(ctx, "greeted", args.Name)
	return nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The server, with auth: in-process calls pass through it like any.
	srv := server.New(server.WithAuth(func(ctx context.Context, info *fleet.CallInfo, token string) error {
		if token != "s3cret" {
			return fleet.NewError(fleet.Unauthenticated, "bad token")
		}
		return nil
	}))
	if err := srv.Register(Greeter{}); err != nil {
		log.Fatal(err)
	}
	err := server.HandleServerStream(srv, "Greeter", "Repeat",
		func(ctx context.Context, args *HelloArgs, st *server.ServerStream[HelloReply]) error {
			for i := range args.Times {
				if err := st.Send(&HelloReply{Text: fmt.Sprintf("%d: hello, %s", i+1, args.Name)}); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}

	// A client joined to it without a socket.
	c, err := client.InProcess(srv, client.WithAuthToken("s3cret"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var reply HelloReply
	var md fleet.Metadata
	if err := c.Call(fleet.WithResponseMetadata(ctx, &md), "Greeter", "Hello", &HelloArgs{Name: "Ada"}, &reply); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("Hello: %s (metadata greeted=%s)\n", reply.Text, md["greeted"])

	err = c.Call(ctx, "Greeter", "Hello", &HelloArgs{}, &reply)
	fmt.Printf("Hello without a name: %s\n", fleet.CodeOf(err))

	anon, err := client.InProcess(srv)
	if err != nil {
		log.Fatal(err)
	}
	err = anon.Call(ctx, "Greeter", "Hello", &HelloArgs{Name: "Ada"}, &reply)
	fmt.Printf("without the token: %s\n", fleet.CodeOf(err))
	anon.Close()

	st, err := client.CallServerStream[HelloArgs, HelloReply](ctx, c, "Greeter", "Repeat", &HelloArgs{Name: "Grace", Times: 2})
	if err != nil {
		log.Fatal(err)
	}
	for st.Receive() {
		fmt.Printf("Repeat: %s\n", st.Msg().Text)
	}
	if err := st.Err(); err != nil {
		log.Fatal(err)
	}
	st.Close()

	if err := srv.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	err = c.Call(ctx, "Greeter", "Hello", &HelloArgs{Name: "Ada"}, &reply)
	fmt.Printf("after Shutdown: %s\n", fleet.CodeOf(err))
}
