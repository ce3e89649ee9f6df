// Command protofirst serves a service whose API lives in a .proto file
// (proto/greeter/v1/greeter.proto) and calls it with the client that
// protoc-gen-fleet generated from it (gen/greeter/v1, written by
// `buf generate`): over TCP, in process (no socket) and through an
// XClient over a static registry. It prints the replies and exits.
//
// With -serve it instead serves the service until interrupted, behind a
// gateway on -addr (default 127.0.0.1:8972), for grpcurl, buf curl and
// the browser page under web/, which it serves on -page (default
// 127.0.0.1:8973); see docs/proto-first.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	greeterv1 "github.com/fleetrpc/fleet/examples/protofirst/gen/greeter/v1"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
)

// Greeter implements greeterv1.GreeterServiceServer, the interface
// generated from the .proto's service. Embedding
// UnimplementedGreeterServiceServer keeps it compiling when the .proto
// gains methods.
type Greeter struct {
	greeterv1.UnimplementedGreeterServiceServer
}

// SayHello answers with one greeting.
func (Greeter) SayHello(ctx context.Context, req *greeterv1.SayHelloRequest) (*greeterv1.SayHelloResponse, error) {
	return &greeterv1.SayHelloResponse{Message: "hello, " + req.GetName()}, nil
}

// GreetMany sends req.Times numbered greetings.
func (Greeter) GreetMany(ctx context.Context, req *greeterv1.GreetManyRequest, stream *server.ServerStream[greeterv1.GreetManyResponse]) error {
	if req.GetTimes() < 1 || req.GetTimes() > 10 {
		return fleet.Errorf(fleet.InvalidArgument, "times must be 1 to 10, not %d", req.GetTimes())
	}
	for i := range req.GetTimes() {
		msg := fmt.Sprintf("hello #%d, %s", i+1, req.GetName())
		if err := stream.Send(&greeterv1.GreetManyResponse{Message: msg}); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	serveFlag := flag.Bool("serve", false, "serve the service and the page until interrupted, instead of calling it and exiting")
	gwAddr := flag.String("addr", "127.0.0.1:8972", "with -serve: the gateway's address (every protocol on one port)")
	pageAddr := flag.String("page", "127.0.0.1:8973", "with -serve: the address of the page, whose origin the gateway allows")
	flag.Parse()
	if *serveFlag {
		if err := serve(*gwAddr, *pageAddr); err != nil {
			log.Fatal(err)
		}
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The server: RegisterGreeterService serves every method of the .proto's
	// service under "greeter.v1.GreeterService".
	srv := server.New()
	if err := greeterv1.RegisterGreeterService(srv, Greeter{}); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Shutdown(context.Background())
	addr := lis.Addr().String()

	// Over TCP: the generated client wraps a *client.Client.
	c, err := client.Dial(ctx, "tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	greeter := greeterv1.NewGreeterServiceClient(c)
	res, err := greeter.SayHello(ctx, &greeterv1.SayHelloRequest{Name: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("TCP:", res.GetMessage())
	stream, err := greeter.GreetMany(ctx, &greeterv1.GreetManyRequest{Name: "Ada", Times: 2})
	if err != nil {
		log.Fatal(err)
	}
	for stream.Receive() {
		fmt.Println("TCP stream:", stream.Msg().GetMessage())
	}
	if err := stream.Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("TCP, bad times:", fleet.CodeOf(greetMany(ctx, greeter, 11)))

	// In process: the same client API, no socket.
	ic, err := client.InProcess(srv)
	if err != nil {
		log.Fatal(err)
	}
	defer ic.Close()
	res, err = greeterv1.NewGreeterServiceClient(ic).SayHello(ctx, &greeterv1.SayHelloRequest{Name: "Grace"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in process:", res.GetMessage())

	// Through an XClient: the servers of the service come from a registry
	// (a static list here; etcd, ZooKeeper, ... alike).
	disc, err := static.NewDiscovery(static.Config{Instances: []registry.Instance{
		{Service: greeterv1.GreeterServiceName, Addr: addr},
	}})
	if err != nil {
		log.Fatal(err)
	}
	x, err := client.NewXClient(greeterv1.GreeterServiceName, disc)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	xg := greeterv1.NewGreeterServiceXClient(x)
	res, err = xg.SayHello(ctx, &greeterv1.SayHelloRequest{Name: "Linus"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("XClient:", res.GetMessage())
	xs, err := xg.GreetMany(ctx, &greeterv1.GreetManyRequest{Name: "Linus", Times: 2})
	if err != nil {
		log.Fatal(err)
	}
	for xs.Receive() {
		fmt.Println("XClient stream:", xs.Msg().GetMessage())
	}
	if err := xs.Err(); err != nil {
		log.Fatal(err)
	}
}

// greetMany reads a GreetMany stream to its end and returns its error.
func greetMany(ctx context.Context, g greeterv1.GreeterServiceClient, times int32) error {
	st, err := g.GreetMany(ctx, &greeterv1.GreetManyRequest{Name: "x", Times: times})
	if err != nil {
		return err
	}
	for st.Receive() {
	}
	return st.Err()
}
