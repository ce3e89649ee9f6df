package regutil_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/internal/regutil"
)

// TestWatchDoc: a document equal to the last one delivered is not
// delivered again (the first always is, nil included); a failed round is
// retried when the wake channel taken before it closes, well before its
// minute-long backoff; Close ends the watch and closes the channel; a bad
// service name is refused with InvalidArgument, and a watch after Close
// with ErrClosed.
func TestWatchDoc(t *testing.T) {
	life := regutil.NewLife()
	var sig regutil.Signal
	rounds := make(chan int, 10)
	n := 0
	ch, err := life.WatchDoc(context.Background(), "S", "test", slog.New(slog.DiscardHandler), func(d *regutil.DocWatch) {
		d.Backoff = regutil.Backoff{Min: time.Minute, Max: time.Minute}
		d.Rounds(sig.C, func(ctx context.Context, wake <-chan struct{}) error {
			n++
			rounds <- n
			switch n {
			case 1:
				d.Deliver(nil)
				d.Deliver(nil)
				d.Deliver([]byte("a"))
				d.Deliver([]byte("a"))
				return nil
			case 2:
				return errors.New("unreachable")
			case 3:
				d.Deliver([]byte("a"))
				d.Deliver([]byte("b"))
			}
			<-ctx.Done()
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, want := range []string{"<nil>", "a"} {
		doc := <-ch
		s := string(doc)
		if doc == nil {
			s = "<nil>"
		}
		if got = append(got, s); s != want {
			t.Fatalf("delivered %q, want %q", got, want)
		}
	}
	for <-rounds != 2 {
	}
	sig.Fire() // the reconnection wakes the failed round's wait
	select {
	case doc := <-ch:
		if string(doc) != "b" {
			t.Fatalf("after the failed round, delivered %q, want b (a again is no change)", doc)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wake channel did not end the backoff")
	}
	life.Close()
	if _, ok := <-ch; ok {
		t.Fatal("the channel is open after Close")
	}
	if _, err := regutil.NewLife().WatchDoc(context.Background(), "a/b", "test", nil, nil); fleet.CodeOf(err) != fleet.InvalidArgument {
		t.Fatalf("bad service: %v", err)
	}
	if _, err := life.WatchDoc(context.Background(), "S", "test", nil, func(*regutil.DocWatch) {}); !errors.Is(err, registry.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
