package gateway_test

// The route conformance suite (issue 22, item 6): one table of hostile and
// edge cases, run against every route into a Fleet server (confRoutes in
// conformance_routes_test.go). Each cell asserts the code the caller sees,
// mapped per route as docs/gateway.md states, whether the handler ran,
// and how far the process's heap rose while the call ran.
//
// Expectations are the specification (issue 22, docs/gateway.md,
// DESIGN.md "The call pipeline"), not what the code did when the suite
// was written. Cells that do not meet it yet are listed in knownGaps.
//
//	go test -race -count=1 -run TestConformance ./gateway/     # about 30-40 s
//	FLEET_CONFORMANCE_GAPS=1 go test -count=1 -run TestConformance -v ./gateway/   # run the known gaps too

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/protocol"
	"github.com/fleetrpc/fleet/server"
)

// knownGaps lists the cells ("case/route") that do not meet the
// specification yet, each with what is missing. They are skipped (and
// logged) unless FLEET_CONFORMANCE_GAPS is set; a fix removes its lines.
// It is empty: every cell meets the specification.
var knownGaps = map[string]string{}

// payloadKind is what a case sends as the request.
type payloadKind int

const (
	pValid       payloadKind = iota // a valid request running the case's mode
	pUndecodable                    // bytes that do not decode as the argument
	pZstdBomb                       // zstd without a declared size, 8 MiB of zeros
	pGzipBomb                       // gzip (grpc-encoding: gzip on gRPC), 8 MiB of zeros
	pOverLimit                      // over MaxDecompressedSize (4 MiB)
	pBig                            // within the limit, costly to decode (issue 22's 4 MiB body)
)

// request is what a case asks a route to send.
type request struct {
	token    string // "" sends none
	unknown  bool   // call Nope.Nope instead of the route's Conf method
	payload  payloadKind
	mode     string // the handler's behaviour, for pValid
	deadline bool   // the call has confDeadline
	cancel   bool   // the caller cancels once the handler waits
}

// confDeadline is the deadline of the deadline case.
const confDeadline = 200 * time.Millisecond

// confCase is one row of the table.
type confCase struct {
	name  string
	opts  []server.Option                // beside WithAuth
	setup func(t *testing.T, e *confEnv) // before the call (and the heap's baseline)
	rq    request
	// want is the code the caller sees on every route (mapped per route).
	want fleet.Code
	// overBody: HTTP routes answer 413 (the body is over the limit).
	overBody bool
	// ran: the handler got the request.
	ran bool
	// heap bounds how far the heap may rise during the call, in bytes.
	heap int64
}

const (
	mib = 1 << 20
	// smallHeap bounds cases that carry a few bytes: what a call costs,
	// with the collector's slack.
	smallHeap = 8 * mib
	// bigHeap bounds cases that carry about 4 MiB: issue 22's bound for a
	// 4 MiB HTTP/JSON body without a token, 16 MiB.
	bigHeap = 16 * mib
	// bombHeap bounds compressed bombs: a refused bomb costs at most the
	// 4 MiB limit it is cut off at, plus the decoder's window and the
	// client's own compression of 8 MiB, within a quarter of the 64 MiB
	// per-connection budget.
	bombHeap = 32 * mib
)

// frameRoom lets a frame carry more than the 4 MiB payload limit, so that
// an oversized native payload meets the payload limit (a call's error)
// rather than the frame limit (a protocol error that closes the
// connection, docs/protocol.md "Errors").
var frameRoom = []server.Option{server.WithLimits(protocol.Limits{MaxFrameSize: 2 * limit})}

// blocker starts a call that holds a slot until the cell ends.
func blocker(t *testing.T, e *confEnv) {
	c := e.native(confToken)
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		var out msg
		c.Call(context.Background(), "Conf", "Echo", validMsg(modeBlock), &out)
	}()
	select {
	case <-e.svc.blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("the blocking call did not start")
	}
}

var confCases = []confCase{
	{name: "no token", rq: request{}, want: fleet.Unauthenticated, heap: smallHeap},
	{name: "wrong token", rq: request{token: "wrong"}, want: fleet.Unauthenticated, heap: smallHeap},
	{name: "unknown method without token", rq: request{unknown: true}, want: fleet.Unauthenticated, heap: smallHeap},
	{name: "4 MiB body without token", rq: request{payload: pBig}, want: fleet.Unauthenticated, heap: bigHeap},
	{name: "undecodable payload", rq: request{token: confToken, payload: pUndecodable}, want: fleet.InvalidArgument, heap: smallHeap},
	{name: "zstd bomb", rq: request{token: confToken, payload: pZstdBomb}, want: fleet.ResourceExhausted, heap: bombHeap},
	{name: "gzip bomb", rq: request{token: confToken, payload: pGzipBomb}, want: fleet.ResourceExhausted, heap: bombHeap},
	{name: "over the size limit", opts: frameRoom, rq: request{token: confToken, payload: pOverLimit}, want: fleet.ResourceExhausted, overBody: true, heap: bigHeap},
	{
		name: "over the rate limit",
		opts: []server.Option{server.WithRateLimit(1e-6, 1)},
		setup: func(t *testing.T, e *confEnv) { // spend the one token
			var out msg
			if err := e.native(confToken).Call(context.Background(), "Conf", "Echo", validMsg(modeEcho), &out); err != nil {
				t.Fatalf("first call: %v", err)
			}
		},
		rq:   request{token: confToken},
		want: fleet.ResourceExhausted, heap: smallHeap,
	},
	{
		name:  "over the adaptive limit",
		opts:  []server.Option{server.WithAdaptiveLimit(server.AdaptiveLimit{Initial: 1, Min: 1, Max: 1})},
		setup: blocker, // holds the one slot
		rq:    request{token: confToken},
		want:  fleet.ResourceExhausted, heap: smallHeap,
	},
	{name: "deadline", rq: request{token: confToken, mode: modeWait, deadline: true}, want: fleet.DeadlineExceeded, ran: true, heap: smallHeap},
	{name: "client cancel", rq: request{token: confToken, mode: modeWait, cancel: true}, want: fleet.Canceled, ran: true, heap: smallHeap},
	{name: "handler panic", rq: request{token: confToken, mode: modePanic}, want: fleet.Internal, ran: true, heap: smallHeap},
	{
		name: "during Shutdown",
		setup: func(t *testing.T, e *confEnv) {
			blocker(t, e) // keeps Shutdown draining
			e.startShutdown()
		},
		rq:   request{token: confToken},
		want: fleet.ShuttingDown, heap: smallHeap,
	},
}

// cellResult is one cell's line in the summary table.
type cellResult struct {
	cell, want, got, verdict string
	ran                      bool
	grew                     int64
}

func TestConformance(t *testing.T) {
	pl := buildPayloads(t)
	runGaps := os.Getenv("FLEET_CONFORMANCE_GAPS") != ""
	var mu sync.Mutex
	var results []cellResult
	for _, c := range confCases {
		t.Run(c.name, func(t *testing.T) {
			for i := range confRoutes {
				r := &confRoutes[i]
				if r.supports != nil && !r.supports(c.rq.payload) {
					continue // the route has no such payload (bombs over HTTP)
				}
				t.Run(r.name, func(t *testing.T) {
					key := c.name + "/" + r.name
					gap, isGap := knownGaps[key]
					if isGap && !runGaps {
						t.Skipf("known gap: %s", gap)
					}
					res := runCell(t, &c, r, pl)
					res.cell = key
					switch {
					case res.verdict == "PASS" && isGap:
						t.Logf("known gap %q meets the spec now: remove it from knownGaps", key)
					case res.verdict != "PASS" && isGap:
						res.verdict = "GAP"
						t.Logf("known gap (%s): %s", gap, res.got)
					case res.verdict != "PASS":
						t.Error(res.verdict)
					}
					mu.Lock()
					results = append(results, res)
					mu.Unlock()
				})
			}
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-58s %-8s %-36s %-36s %-5s %s\n", "case/route", "verdict", "want", "got", "ran", "heap+")
	for _, r := range results {
		v := r.verdict
		if v != "PASS" && v != "GAP" {
			v = "FAIL"
		}
		fmt.Fprintf(&b, "%-58s %-8s %-36s %-36s %-5v %.1f MiB\n", r.cell, v, r.want, r.got, r.ran, float64(r.grew)/mib)
	}
	t.Log("conformance table:\n" + b.String())
}

// runCell runs case c on route r against a server of its own and returns
// what it saw; verdict is "PASS" or what failed.
func runCell(t *testing.T, c *confCase, r *route, pl *payloads) cellResult {
	e := newConfEnv(t, c.opts, r.gwOpts...)
	defer e.close()
	e.inProcess = r.inProcess
	if r.warm != nil {
		r.warm(e, &c.rq)
	}
	if c.setup != nil {
		c.setup(t, e)
	}
	ran0, done0 := e.svc.ran.Load(), e.svc.done.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	callDone := make(chan struct{})
	if c.rq.cancel {
		cctx, ccancel := context.WithCancel(ctx)
		ctx = cctx
		go func() {
			select {
			case <-e.svc.waiting:
				ccancel()
			case <-callDone:
				ccancel()
			}
		}()
	}
	var got string
	grew := heapPeak(func() {
		got = r.call(ctx, e, &c.rq, pl)
		close(callDone)
	})
	ran := e.svc.ran.Load() > ran0
	res := cellResult{want: strings.Join(r.want(c), " | "), got: got, ran: ran, grew: grew}
	var problems []string
	if !slices.Contains(r.want(c), got) {
		problems = append(problems, fmt.Sprintf("caller saw %q, want %s", got, res.want))
	}
	if ran != c.ran {
		problems = append(problems, fmt.Sprintf("handler ran: %v, want %v", ran, c.ran))
	}
	if ran && (c.rq.cancel || c.rq.deadline) {
		// The end of the call reached the handler: it returned.
		deadline := time.Now().Add(10 * time.Second)
		ended := func() bool { return e.svc.done.Load()-done0 >= e.svc.ran.Load()-ran0 }
		for !ended() && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		if !ended() {
			problems = append(problems, "the handler's context did not end")
		}
	}
	bound := c.heap
	if c.heap > smallHeap && r.kind != kindHTTPJSON && r.kind != kindJSONRPC {
		// The caller runs in this process too: a native, gRPC or
		// connect-go client's copies of a 4 MiB payload (the frame it
		// builds, grpc-go's and connect-go's buffers) count in the heap
		// measured.
		bound += 8 * mib
	}
	if r.kind == kindConnect && (c.rq.payload == pGzipBomb || c.rq.payload == pZstdBomb) {
		// connect-go's client writes the whole uncompressed message
		// (8 MiB) into a buffer of its own before compressing it, a copy
		// in this process that grpc-go's client (given the bytes as they
		// are by rawCodec) does not make.
		bound += 2 * limit
	}
	if grew > bound {
		problems = append(problems, fmt.Sprintf("heap rose %.1f MiB, bound %.0f MiB", float64(grew)/mib, float64(bound)/mib))
	}
	res.verdict = "PASS"
	if len(problems) > 0 {
		res.verdict = strings.Join(problems, "; ")
		res.got = got + " (" + res.verdict + ")"
	}
	return res
}
