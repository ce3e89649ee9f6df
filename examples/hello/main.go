// Command hello serves a net/rpc-style service and calls it three ways:
// synchronously (Call), asynchronously (Go) and one-way (Send). Server and
// client run in one process on loopback; it prints the results and exits.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// Args are the arguments of Arith's methods.
type Args struct{ A, B int }

// Arith is written as for Go's net/rpc: it registers unchanged.
type Arith struct{}

// Add sets reply to A + B.
func (Arith) Add(args *Args, reply *int) error { *reply = args.A + args.B; return nil }

// Mul sets reply to A × B.
func (Arith) Mul(args *Args, reply *int) error { *reply = args.A * args.B; return nil }

// Log receives one-way messages.
type Log struct{ lines chan string }

// Write takes one line; a one-way caller never sees its reply.
func (l *Log) Write(line string, _ *struct{}) error { l.lines <- line; return nil }

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	srv := server.New()
	if err := srv.Register(Arith{}); err != nil {
		log.Fatal(err)
	}
	logSvc := &Log{lines: make(chan string, 1)}
	if err := srv.Register(logSvc); err != nil {
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

	var sum int
	if err := c.Call(ctx, "Arith", "Add", &Args{A: 1, B: 2}, &sum); err != nil { // synchronous
		log.Fatal(err)
	}
	fmt.Println("Arith.Add 1 + 2 =", sum)

	var product int
	call := c.Go(ctx, "Arith", "Mul", &Args{A: 3, B: 4}, &product, nil) // asynchronous
	<-call.Done
	if call.Error != nil {
		log.Fatal(call.Error)
	}
	fmt.Println("Arith.Mul 3 * 4 =", product)

	if err := c.Send(ctx, "Log", "Write", "hello, Fleet"); err != nil { // one-way
		log.Fatal(err)
	}
	fmt.Println("Log.Write got:", <-logSvc.lines)
}
