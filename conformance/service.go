package conformance

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/fleetrpc/fleet"
	v1 "github.com/fleetrpc/fleet/conformance/internal/conformancev1"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Service is the gRPC name of the suite's service; the Fleet service is
// registered under it, so its paths are the suite's.
const Service = "connectrpc.conformance.v1.ConformanceService"

// Register registers the suite's ConformanceService on srv with
// server.Handle and its stream siblings, answering as the suite's
// reference server does (connectrpc.com/conformance, docs/testing_servers.md):
// the request echoed back in the payload, response data, delays and errors
// as each request's response definition asks. Response headers become
// the call's response metadata (fleet.AddResponseMetadata), response
// trailers its response trailer (fleet.AddResponseTrailer, or a stream's
// ResponseTrailer), a header of several values one combined value.
// Unimplemented is left unregistered, so it is unimplemented. It returns
// the first registration error.
func Register(srv *server.Server) error {
	return errors.Join(
		server.Handle(srv, Service, "Unary", func(ctx context.Context, req *v1.UnaryRequest, resp *v1.UnaryResponse) error {
			p, err := unary(ctx, req.GetResponseDefinition(), req)
			resp.Payload = p
			return err
		}),
		server.Handle(srv, Service, "IdempotentUnary", func(ctx context.Context, req *v1.IdempotentUnaryRequest, resp *v1.IdempotentUnaryResponse) error {
			p, err := unary(ctx, req.GetResponseDefinition(), req)
			resp.Payload = p
			return err
		}),
		server.HandleServerStream(srv, Service, "ServerStream", serverStream),
		server.HandleClientStream(srv, Service, "ClientStream", clientStream),
		server.HandleBidiStream(srv, Service, "BidiStream", bidiStream),
	)
}

// requestInfo is what the handler saw of the call: its metadata (the
// request headers the gateway passes on; a header sent several times is
// one value, its values joined with ", " by fleet.Metadata's rule, which
// the suite's checker splits again), its timeout, its requests.
func requestInfo(ctx context.Context, reqs ...proto.Message) *v1.ConformancePayload_RequestInfo {
	info := &v1.ConformancePayload_RequestInfo{}
	for k, v := range fleet.IncomingMetadata(ctx) {
		info.RequestHeaders = append(info.RequestHeaders, &v1.Header{Name: k, Value: []string{v}})
	}
	if d, ok := ctx.Deadline(); ok {
		ms := time.Until(d).Milliseconds()
		info.TimeoutMs = &ms
	}
	for _, r := range reqs {
		a, err := anypb.New(r)
		if err == nil {
			info.Requests = append(info.Requests, a)
		}
	}
	return info
}

// setHeaders puts a definition's response headers and trailers into the
// call's response metadata: each value added (fleet.Metadata.Add), so a
// header of three values goes out as one line "v1, v2, v3".
func setHeaders(ctx context.Context, set func(k, v string), hs ...[]*v1.Header) {
	for _, h := range hs {
		for _, kv := range h {
			for _, v := range kv.GetValue() {
				set(kv.GetName(), v)
			}
		}
	}
}

// asError is the suite's Error as a Fleet error (the same codes) whose
// details (gateway.ErrorDetailer) are the Error's and, when info is not
// nil, the request info, as the reference server sends them.
func asError(e *v1.Error, info *v1.ConformancePayload_RequestInfo) error {
	d := &detailError{msg: e.GetMessage(), details: e.GetDetails()}
	if info != nil {
		if a, err := anypb.New(info); err == nil {
			d.details = append(d.details, a)
		}
	}
	return fleet.WrapError(fleet.Code(e.GetCode()), d)
}

// detailError is an error with protobuf details, which the gateway sends
// with the error's code and message.
type detailError struct {
	msg     string
	details []*anypb.Any
}

func (e *detailError) Error() string { return e.msg }

// ErrorDetails implements gateway.ErrorDetailer.
func (e *detailError) ErrorDetails() []*anypb.Any { return e.details }

func sleep(ctx context.Context, ms uint32) error {
	if ms == 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fleet.FromContextError(ctx.Err())
	}
}

func unary(ctx context.Context, def *v1.UnaryResponseDefinition, reqs ...proto.Message) (*v1.ConformancePayload, error) {
	p := &v1.ConformancePayload{RequestInfo: requestInfo(ctx, reqs...)}
	if def == nil {
		return p, nil
	}
	setHeaders(ctx, func(k, v string) { fleet.AddResponseMetadata(ctx, k, v) }, def.GetResponseHeaders())
	setHeaders(ctx, func(k, v string) { fleet.AddResponseTrailer(ctx, k, v) }, def.GetResponseTrailers())
	if err := sleep(ctx, def.GetResponseDelayMs()); err != nil {
		return nil, err
	}
	if e := def.GetError(); e != nil {
		return nil, asError(e, p.RequestInfo)
	}
	p.Data = def.GetResponseData()
	return p, nil
}

func serverStream(ctx context.Context, req *v1.ServerStreamRequest, st *server.ServerStream[v1.ServerStreamResponse]) error {
	def := req.GetResponseDefinition()
	if def == nil {
		return nil
	}
	tr := st.ResponseTrailer()
	setHeaders(ctx, func(k, v string) { fleet.AddResponseMetadata(ctx, k, v) }, def.GetResponseHeaders())
	setHeaders(ctx, tr.Add, def.GetResponseTrailers())
	for i, data := range def.GetResponseData() {
		resp := &v1.ServerStreamResponse{Payload: &v1.ConformancePayload{Data: data}}
		if i == 0 {
			resp.Payload.RequestInfo = requestInfo(ctx, req)
		}
		if err := sleep(ctx, def.GetResponseDelayMs()); err != nil {
			return err
		}
		if err := st.Send(resp); err != nil {
			return err
		}
	}
	if e := def.GetError(); e != nil {
		var info *v1.ConformancePayload_RequestInfo
		if len(def.GetResponseData()) == 0 {
			info = requestInfo(ctx, req)
		}
		return asError(e, info)
	}
	return nil
}

func clientStream(ctx context.Context, st *server.ClientStream[v1.ClientStreamRequest]) (*v1.ClientStreamResponse, error) {
	var def *v1.UnaryResponseDefinition
	var reqs []proto.Message
	for st.Receive() {
		m := st.Msg()
		if len(reqs) == 0 {
			def = m.GetResponseDefinition()
		}
		reqs = append(reqs, proto.Clone(m))
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	p, err := unaryStream(ctx, st.ResponseTrailer(), def, reqs...)
	if err != nil {
		return nil, err
	}
	return &v1.ClientStreamResponse{Payload: p}, nil
}

// unaryStream is unary for a client stream: its response metadata goes
// out as headers with the response, its trailer as trailers.
func unaryStream(ctx context.Context, tr fleet.Metadata, def *v1.UnaryResponseDefinition, reqs ...proto.Message) (*v1.ConformancePayload, error) {
	p := &v1.ConformancePayload{RequestInfo: requestInfo(ctx, reqs...)}
	if def == nil {
		return p, nil
	}
	setHeaders(ctx, func(k, v string) { fleet.AddResponseMetadata(ctx, k, v) }, def.GetResponseHeaders())
	setHeaders(ctx, tr.Add, def.GetResponseTrailers())
	if err := sleep(ctx, def.GetResponseDelayMs()); err != nil {
		return nil, err
	}
	if e := def.GetError(); e != nil {
		return nil, asError(e, p.RequestInfo)
	}
	p.Data = def.GetResponseData()
	return p, nil
}

func bidiStream(ctx context.Context, st *server.BidiStream[v1.BidiStreamRequest, v1.BidiStreamResponse]) error {
	var def *v1.StreamResponseDefinition
	fullDuplex, first, n := false, true, 0
	var reqs []proto.Message
	send := func() error {
		resp := &v1.BidiStreamResponse{Payload: &v1.ConformancePayload{Data: def.GetResponseData()[n]}}
		if n == 0 {
			resp.Payload.RequestInfo = requestInfo(ctx, reqs...)
		} else if fullDuplex {
			resp.Payload.RequestInfo = requestInfo(ctx, reqs...)
			resp.Payload.RequestInfo.RequestHeaders, resp.Payload.RequestInfo.TimeoutMs = nil, nil
		}
		if err := sleep(ctx, def.GetResponseDelayMs()); err != nil {
			return err
		}
		n++
		return st.Send(resp)
	}
	for {
		req, err := st.Receive()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		reqs = append(reqs, req)
		if first {
			first = false
			def, fullDuplex = req.GetResponseDefinition(), req.GetFullDuplex()
			tr := st.ResponseTrailer()
			setHeaders(ctx, func(k, v string) { fleet.AddResponseMetadata(ctx, k, v) }, def.GetResponseHeaders())
			setHeaders(ctx, tr.Add, def.GetResponseTrailers())
		}
		if fullDuplex {
			if n >= len(def.GetResponseData()) {
				break
			}
			if err := send(); err != nil {
				return err
			}
			reqs = nil
		}
	}
	for n < len(def.GetResponseData()) {
		if err := send(); err != nil {
			return err
		}
	}
	if e := def.GetError(); e != nil {
		var info *v1.ConformancePayload_RequestInfo
		if n == 0 {
			info = requestInfo(ctx, reqs...)
		}
		return asError(e, info)
	}
	return nil
}
