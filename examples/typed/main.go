// Command typed registers methods with server.Handle (typed, no reflection
// per call) and server.RegisterFunction, and shows how errors reach the
// caller: a handler's *fleet.Error keeps its code and message.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// DivArgs are the arguments of Math.Div.
type DivArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// Quotient is Math.Div's reply.
type Quotient struct {
	Quo int `json:"quo"`
	Rem int `json:"rem"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	srv := server.New()
	err := server.Handle(srv, "Math", "Div", func(ctx context.Context, args *DivArgs, reply *Quotient) error {
		if args.B == 0 {
			return fleet.NewError(fleet.InvalidArgument, "divide by zero")
		}
		reply.Quo, reply.Rem = args.A/args.B, args.A%args.B
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// RegisterFunction takes one plain function of the net/rpc shape.
	err = srv.RegisterFunction("Math", "Neg", func(ctx context.Context, x int, reply *int) error {
		*reply = -x
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Shutdown(context.Background())

	c, err := client.Dial(ctx, "tcp", lis.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var q Quotient
	if err := c.Call(ctx, "Math", "Div", &DivArgs{A: 17, B: 5}, &q); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("17 / 5 = %d remainder %d\n", q.Quo, q.Rem)

	var neg int
	if err := c.Call(ctx, "Math", "Neg", 7, &neg); err != nil {
		log.Fatal(err)
	}
	fmt.Println("Neg 7 =", neg)

	err = c.Call(ctx, "Math", "Div", &DivArgs{A: 1, B: 0}, &q)
	var fe *fleet.Error
	if errors.As(err, &fe) {
		fmt.Printf("1 / 0: code %s, message %q\n", fe.Code(), fe.Message())
	}
	err = c.Call(ctx, "Math", "Sqrt", 2, &neg)
	fmt.Println("Math.Sqrt:", fleet.CodeOf(err))
}
