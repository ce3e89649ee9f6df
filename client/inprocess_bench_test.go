package client_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
)

// BenchmarkTransports compares the connections a client and a server in
// one process can share, with Hello.Say and the 581-byte BenchmarkMessage:
// client.InProcess (internal/memconn), net.Pipe served the same way, and
// loopback TCP; "serial" is one caller, "parallel" GOMAXPROCS×64 callers on
// the one connection. Besides the wall time it reports cpu-ns/op: the
// process's user and system CPU time (getrusage) per call, both sides and
// the kernel's share of TCP included, which a machine busy with other work
// disturbs less than the wall time.
//
//	go test -run '^$' -bench BenchmarkTransports -benchtime 2s ./client/
func BenchmarkTransports(b *testing.B) {
	dials := []struct {
		name string
		dial func(b *testing.B, srv *server.Server) *client.Client
	}{
		{"inprocess", func(b *testing.B, srv *server.Server) *client.Client {
			c, err := client.InProcess(srv)
			if err != nil {
				b.Fatal(err)
			}
			return c
		}},
		{"netpipe", func(b *testing.B, srv *server.Server) *client.Client {
			cc, sc := net.Pipe()
			go srv.ServeConn(sc)
			return client.NewClient(cc)
		}},
		{"tcp", func(b *testing.B, srv *server.Server) *client.Client {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(lis)
			c, err := client.Dial(context.Background(), "tcp", lis.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			return c
		}},
	}
	for _, d := range dials {
		for _, parallel := range []bool{false, true} {
			name := d.name + "/serial"
			if parallel {
				name = d.name + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				srv := server.New()
				if err := srv.Register(&demo.Hello{}); err != nil {
					b.Fatal(err)
				}
				c := d.dial(b, srv)
				defer srv.Close()
				defer c.Close()
				args := benchpb.New()
				ctx := context.Background()
				b.ReportAllocs()
				cpu0 := cpuTime()
				defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
				b.ResetTimer()
				if !parallel {
					var reply benchpb.BenchmarkMessage
					for i := 0; i < b.N; i++ {
						reply.Reset()
						if err := c.Call(ctx, "Hello", "Say", args, &reply); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(64)
				b.RunParallel(func(pb *testing.PB) {
					var reply benchpb.BenchmarkMessage
					for pb.Next() {
						reply.Reset()
						if err := c.Call(ctx, "Hello", "Say", args, &reply); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// cpuTime returns the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
