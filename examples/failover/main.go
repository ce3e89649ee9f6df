// Command failover runs three servers of one service published in an
// in-memory registry (registry/static), calls them through an XClient, kills
// one without warning, and shows every call still succeeding: the XClient
// fails over to the others. With etcd, ZooKeeper, Redis, NATS or mDNS only
// the Registrar and Discovery change (registry/etcd's NewRegistrar and
// NewDiscovery, for example).
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/selector"
	"github.com/fleetrpc/fleet/server"
)

// Args are the arguments of Arith.Add.
type Args struct{ A, B int }

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	table, err := static.NewTable(static.Config{})
	if err != nil {
		log.Fatal(err)
	}
	var servers []*server.Server
	for i := 0; i < 3; i++ {
		srv := server.New()
		err := server.Handle(srv, "Arith", "Add", func(ctx context.Context, args *Args, reply *int) error {
			*reply = args.A + args.B
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
		inst := registry.Instance{Service: "Arith", Addr: lis.Addr().String(), Weight: 1}
		if err := srv.Publish(ctx, table.Registrar(), inst, server.PublishConfig{DrainDelay: 100 * time.Millisecond}); err != nil {
			log.Fatal(err)
		}
		servers = append(servers, srv)
	}

	x, err := client.NewXClient("Arith", table.Discovery(),
		client.WithSelector(selector.NewRoundRobin()),
		client.WithFailMode(client.Failover), // the default: retry on another server
		client.WithIdempotent("Add"),         // safe to run twice: also retried after a lost connection
	)
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()

	calls := func(n int) (ok int) {
		for i := 0; i < n; i++ {
			var sum int
			if err := x.Call(ctx, "Add", &Args{A: i, B: 1}, &sum); err == nil && sum == i+1 {
				ok++
			}
		}
		return ok
	}
	fmt.Printf("3 servers: %d of 30 calls succeeded\n", calls(30))

	servers[0].Close() // a crash: no deregistration, connections cut
	fmt.Printf("one server killed: %d of 30 calls succeeded\n", calls(30))

	servers[1].Shutdown(ctx) // graceful: deregisters, drains, then stops
	fmt.Printf("one more shut down: %d of 30 calls succeeded\n", calls(30))
	servers[2].Shutdown(ctx)
}
