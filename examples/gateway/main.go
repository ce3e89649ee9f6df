// Command gateway serves one Fleet server to non-Go clients on its native
// port: HTTP/JSON, JSON-RPC 2.0 and gRPC, each called here from Go as curl
// and grpcurl would call it:
//
//	curl -s -X POST 127.0.0.1:8972/Arith/Add -d '{"A":1,"B":2}'
//	curl -s 127.0.0.1:8972/ -d '{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":2},"id":1}'
//	grpcurl -plaintext -d '"Ada"' 127.0.0.1:8972 Greeter/Hello
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/server"
)

// Args are the arguments of Arith.Add.
type Args struct{ A, B int }

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	srv := server.New()
	err := server.Handle(srv, "Arith", "Add", func(ctx context.Context, args *Args, reply *int) error {
		*reply = args.A + args.B
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	err = server.Handle(srv, "Greeter", "Hello", func(ctx context.Context, name *wrapperspb.StringValue, reply *wrapperspb.StringValue) error {
		reply.Value = "hello, " + name.Value
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	gw := gateway.New(srv)
	go gw.Serve(lis) // native Fleet, gRPC (h2c), HTTP/JSON and JSON-RPC 2.0 on one port
	defer gw.Shutdown(context.Background())
	addr := lis.Addr().String()

	// HTTP/JSON: POST /{service}/{method}.
	fmt.Println("HTTP/JSON:", post(ctx, "http://"+addr+"/Arith/Add", `{"A":1,"B":2}`))

	// JSON-RPC 2.0: POST / with "Service.Method".
	fmt.Println("JSON-RPC:", post(ctx, "http://"+addr+"/", `{"jsonrpc":"2.0","method":"Arith.Add","params":{"A":1,"B":2},"id":1}`))

	// gRPC: any gRPC client; the path is /{Service}/{Method}.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	out := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, "/Greeter/Hello", wrapperspb.String("Ada"), out); err != nil {
		log.Fatal(err)
	}
	fmt.Println("gRPC:", out.Value)

	// The native protocol on the same port.
	c, err := client.Dial(ctx, "tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var sum int
	if err := c.Call(ctx, "Arith", "Add", &Args{A: 1, B: 2}, &sum); err != nil {
		log.Fatal(err)
	}
	fmt.Println("native:", sum)
}

// post sends body as JSON to url and returns the response status and body.
func post(ctx context.Context, url, body string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	return resp.Status + " " + strings.TrimSpace(string(b))
}
