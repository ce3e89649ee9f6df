package reflection_test

import (
	"context"
	"fmt"
	"net"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/reflection"
)

// A server with reflection registered describes itself through the
// fleet.Reflection service: here a client lists the services, then asks
// for the JSON shape of Arith.Multiply's argument.
func Example() {
	srv := server.New()
	if err := reflection.Register(srv); err != nil {
		panic(err)
	}
	if err := srv.Register(new(Arith)); err != nil {
		panic(err)
	}
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Close()

	ctx := context.Background()
	c, err := client.Dial(ctx, "tcp", lis.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var list reflection.ListReply
	if err := c.Call(ctx, reflection.Service, "List", &reflection.ListRequest{}, &list); err != nil {
		panic(err)
	}
	for _, s := range list.Services {
		if s.Name == "Arith" || s.Name == reflection.Service {
			fmt.Println(s.Name, s.Methods)
		}
	}
	var d reflection.DescribeReply
	req := &reflection.DescribeRequest{Service: "Arith", Method: "Multiply"}
	if err := c.Call(ctx, reflection.Service, "Describe", req, &d); err != nil {
		panic(err)
	}
	m := d.Methods[0]
	fmt.Println(m.Args.GoType, string(m.Args.Example), "->", m.Reply.GoType)
	// Output:
	// Arith [Divide Multiply]
	// fleet.Reflection [Describe List]
	// reflection_test.Args {"A":0,"B":0} -> int
}
