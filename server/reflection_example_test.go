package server_test

import (
	"context"
	"fmt"
	"net"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// Every server describes itself through the built-in fleet.Reflection
// service: here a client lists the services, then asks for the JSON
// shape of Arith.Multiply's argument.
func Example_reflection() {
	srv := server.New()
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
	var list server.ReflectionList
	if err := c.Call(ctx, server.ReflectionService, "List", &server.ReflectionListRequest{}, &list); err != nil {
		panic(err)
	}
	for _, s := range list.Services {
		if s.Name == "Arith" || s.Name == server.ReflectionService {
			fmt.Println(s.Name, s.Methods)
		}
	}
	var d server.ReflectionDescription
	req := &server.ReflectionDescribeRequest{Service: "Arith", Method: "Multiply"}
	if err := c.Call(ctx, server.ReflectionService, "Describe", req, &d); err != nil {
		panic(err)
	}
	m := d.Methods[0]
	fmt.Println(m.Args.GoType, string(m.Args.Example), "->", m.Reply.GoType)
	// Output:
	// Arith [Divide Multiply]
	// fleet.Reflection [Describe List]
	// server_test.Args {"A":0,"B":0} -> int
}
