// Command streams serves a server stream and a bidirectional stream on one
// connection, and consumes both.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"time"

	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/server"
)

// Query asks Feed.Count for the numbers 1..N.
type Query struct{ N int }

// Event is one message of a stream.
type Event struct{ Text string }

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	srv := server.New()
	err := server.HandleServerStream(srv, "Feed", "Count", func(ctx context.Context, q *Query, st *server.ServerStream[Event]) error {
		for i := 1; i <= q.N; i++ {
			if err := st.Send(&Event{Text: fmt.Sprint(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	err = server.HandleBidiStream(srv, "Feed", "Upper", func(ctx context.Context, st *server.BidiStream[Event, Event]) error {
		for {
			in, err := st.Receive()
			if errors.Is(err, io.EOF) {
				return nil // the client closed its side
			}
			if err != nil {
				return err
			}
			if err := st.Send(&Event{Text: strings.ToUpper(in.Text)}); err != nil {
				return err
			}
		}
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

	st, err := client.CallServerStream[Query, Event](ctx, c, "Feed", "Count", &Query{N: 3})
	if err != nil {
		log.Fatal(err)
	}
	for st.Receive() {
		fmt.Println("Count:", st.Msg().Text)
	}
	if err := st.Err(); err != nil {
		log.Fatal(err)
	}

	bidi, err := client.CallBidiStream[Event, Event](ctx, c, "Feed", "Upper")
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range []string{"fleet", "streams"} {
		if err := bidi.Send(&Event{Text: w}); err != nil {
			log.Fatal(err)
		}
		out, err := bidi.Receive()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("Upper:", out.Text)
	}
	if err := bidi.CloseRequest(); err != nil {
		log.Fatal(err)
	}
	if _, err := bidi.Receive(); !errors.Is(err, io.EOF) {
		log.Fatal("want io.EOF after the server's return, got ", err)
	}
	fmt.Println("Upper: done")
}
