package server

import (
	"context"
	"time"

	"github.com/fleetrpc/fleet"
)

// The call pipeline. Every route into a server (native calls and streams,
// the gateway's protocols through Invoke and InvokeStream, the in-process
// client, which is a native connection) runs a call through the same
// stages, in this order, written once in this file and used by each:
//
//  1. auth: the token is checked (authorize) before anything about the
//     call is looked up, decompressed or decoded;
//  2. admission: shutdown, the connection caps (at accept), the rate
//     limits and the method's concurrency cap (admitLimits, by the names
//     the caller gave: the server's rate, the method's rate, the
//     method's cap, from the table SetMethodLimits keeps), the
//     per-connection concurrency cap (native), the adaptive limit
//     (admitAdaptive for native calls, awaitAdaptiveCtx for the others,
//     admitStreamAdaptive for stream opens),
//     the memory budget (the frame's bytes when read, the payload's for
//     Invoke);
//  3. lookup of the service and method (lookup);
//  4. decompression and decoding, within the room reserved for them
//     (Invoke charges a codec.BudgetUnmarshaler's decoded bytes to the
//     memory budget as it makes them: decodeCharge);
//  5. interceptors, then the handler;
//  6. encoding, within the reply limits.
//
// Each limiter reports its state through one shape (admissionStage,
// admission.go; Server.AdmissionStats), while the calls' admission uses
// its concrete methods, so the hot path makes no interface call. How an
// admitted native call's handler is run (pool, reused goroutine, inline on
// the read loop) is behind one seam chosen at New (runFunc, runner.go).
//
// A refusal before the handler runs is reported to the CallRefused hooks
// (noteRefused) and carries the same fleet.Code on every route; the
// gateway maps it to gRPC, HTTP and JSON-RPC codes as docs/gateway.md
// states.

// authorize runs the server's auth function on a call or stream whose
// info holds the caller's names and metadata; nil without auth. Its error
// keeps its code, Unauthenticated when it has none.
func (s *Server) authorize(ctx context.Context, info *fleet.CallInfo) error {
	if s.opts.auth == nil {
		return nil
	}
	if err := s.opts.auth(ctx, info, authToken(info)); err != nil {
		return asCode(err, fleet.Unauthenticated)
	}
	return nil
}

// lookup returns the registered unary method service.method, or NotFound.
// The conversions to string do not allocate (map index).
func (s *Server) lookup(service, method []byte) (*methodType, error) {
	svc := (*s.services.Load())[string(service)]
	if svc == nil {
		return nil, unknown(service, method, false)
	}
	m := svc.methods[string(method)]
	if m == nil {
		return nil, unknown(service, method, true)
	}
	return m, nil
}

// noteRefused tells the CallRefused hooks that a call of service.method
// (as the caller named it) was answered with err without running.
func (s *Server) noteRefused(service, method []byte, err error) {
	if len(s.hooks.refused) == 0 {
		return
	}
	fe, ok := err.(*fleet.Error)
	if !ok {
		fe = fleet.WrapError(fleet.CodeOf(err), err)
	}
	for _, h := range s.hooks.refused {
		h.OnCallRefused(string(service), string(method), fe)
	}
}

// awaitAdaptiveCtx applies the adaptive limit to a call that is not on a
// native connection's read loop (Invoke, InvokeStream): under the limit
// the call holds a slot at once; over it, it waits in the backlog as a
// native call does, bounded by the backlog's wait and ctx. It returns when
// the slot was taken (zero without a limit), or the call's answer:
// ResourceExhausted with the retry-after metadata when shed,
// DeadlineExceeded or Canceled when ctx ended first, ShuttingDown on
// Shutdown.
func (s *Server) awaitAdaptiveCtx(ctx context.Context) (since time.Time, md fleet.Metadata, err error) {
	l := s.adaptive
	if l == nil {
		return time.Time{}, nil, nil
	}
	ok, w, wait := l.admit()
	if ok {
		return time.Now(), nil, nil
	}
	if w == nil {
		md, err = l.shedAnswer()
		return time.Time{}, md, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var timedOut, done bool
	select {
	case <-w.ch:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		done = true
	}
	switch l.await(w, timedOut || done, timedOut) {
	case granted:
		return time.Now(), nil, nil
	case released:
		return time.Time{}, nil, errShuttingDown
	}
	if done {
		return time.Time{}, nil, fleet.FromContextError(ctx.Err())
	}
	md, err = l.shedAnswer()
	return time.Time{}, md, err
}

// admitStreamAdaptive applies the adaptive limit to a stream's open: a
// stream holds no slot (its lifetime is the client's to choose, not a
// latency sample), but while the limit is reached (as many calls in flight
// as it allows, or calls waiting in its backlog) new streams are shed
// like calls, with ResourceExhausted and the retry-after metadata.
func (s *Server) admitStreamAdaptive() (fleet.Metadata, error) {
	l := s.adaptive
	if l == nil || !l.shedIfFull() {
		return nil, nil
	}
	return l.shedAnswer()
}

// endAdaptive gives back the adaptive-limit slot taken at since (zero:
// none), sampling the latency when the call ran (ran) and counting
// DeadlineExceeded as a drop.
func (s *Server) endAdaptive(since time.Time, ran bool, err error) {
	if since.IsZero() {
		return
	}
	if !ran {
		s.adaptive.release(0, false)
		return
	}
	s.adaptive.release(time.Since(since), fleet.CodeOf(err) == fleet.DeadlineExceeded)
}
