package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

// The JSON-RPC 2.0 error codes (https://www.jsonrpc.org/specification,
// section 5.1). ServerError is the first of the range the specification
// leaves to implementations (-32000 to -32099); Fleet errors without a
// specific JSON-RPC code use it, with the Fleet code in the error's data.
const (
	ParseError     = -32700
	InvalidRequest = -32600
	MethodNotFound = -32601
	InvalidParams  = -32602
	InternalError  = -32603
	ServerError    = -32000
)

// rpcRequest is one request object; RawMessage fields tell an absent
// member from a null one.
type rpcRequest struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	ID      json.RawMessage `json:"id"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
	ID      json.RawMessage `json:"id"`
}

type rpcError struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Data    *errorData `json:"data,omitempty"`
}

// errorData carries the Fleet code of an error raised by a call.
type errorData struct {
	Code   fleet.Code `json:"code"`
	Status string     `json:"status"`
}

var null = json.RawMessage("null")

// serveJSONRPC answers a JSON-RPC 2.0 request or batch.
func (g *Gateway) serveJSONRPC(w http.ResponseWriter, r *http.Request) {
	body, status, err := g.readBody(w, r)
	if err != nil {
		writeRPC(w, status, rpcResponse{JSONRPC: "2.0", ID: null, Error: &rpcError{Code: InvalidRequest, Message: fleetMessage(err), Data: dataOf(err)}})
		return
	}
	if err := checkDepth(body, g.opts.maxDepth); err != nil {
		writeRPC(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: null, Error: &rpcError{Code: InvalidRequest, Message: fleetMessage(err)}})
		return
	}
	if !json.Valid(body) {
		writeRPC(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: null, Error: &rpcError{Code: ParseError, Message: "parse error: the body is not valid JSON"}})
		return
	}
	ctx, cancel, err := callContext(r)
	if err != nil {
		writeRPC(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: null, Error: &rpcError{Code: InvalidRequest, Message: fleetMessage(err)}})
		return
	}
	defer cancel()
	base := server.Call{Route: fleet.RouteJSONRPC, Codec: jsonCodec{}, Metadata: requestMetadata(r.Header), RemoteAddr: remoteAddr(r.RemoteAddr), LocalAddr: localAddr(r)}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if trimmed[0] != '[' {
		resp, ok := g.runRPC(ctx, base, body, w.Header())
		if !ok {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeRPC(w, http.StatusOK, resp)
		return
	}
	entries, err := splitBatch(body, g.opts.maxBatch)
	if err != nil {
		writeRPC(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: null, Error: &rpcError{Code: InvalidRequest, Message: fleetMessage(err)}})
		return
	}
	if len(entries) == 0 {
		writeRPC(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: null, Error: &rpcError{Code: InvalidRequest, Message: "invalid request: empty batch"}})
		return
	}
	out := g.runBatch(ctx, base, entries, w.Header())
	if len(out) == 0 {
		w.WriteHeader(http.StatusNoContent) // only notifications
		return
	}
	writeRPC(w, http.StatusOK, out)
}

// splitBatch returns the entries of a JSON array (already known valid),
// failing once there are more than max, before decoding the rest.
func splitBatch(body []byte, max int) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // '['
		return nil, fleet.Errorf(fleet.InvalidArgument, "invalid request: %v", err)
	}
	var entries []json.RawMessage
	for dec.More() {
		if len(entries) == max {
			return nil, fleet.Errorf(fleet.ResourceExhausted, "invalid request: batch has more than %d entries", max)
		}
		var e json.RawMessage
		if err := dec.Decode(&e); err != nil {
			return nil, fleet.Errorf(fleet.InvalidArgument, "invalid request: %v", err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// runRPC runs one request object. It reports false for a notification,
// which gets no response.
func (g *Gateway) runRPC(ctx context.Context, base server.Call, raw []byte, h http.Header) (rpcResponse, bool) {
	resp := rpcResponse{JSONRPC: "2.0", ID: null}
	fail := func(code int, msg string, err error) (rpcResponse, bool) {
		resp.Error = &rpcError{Code: code, Message: msg, Data: dataOf(err)}
		return resp, true
	}
	var req rpcRequest
	if err := parseRequest(raw, &req); err != nil {
		return fail(InvalidRequest, "invalid request: not an object", nil)
	}
	notification := req.ID == nil
	if !notification {
		if !validID(req.ID) {
			return fail(InvalidRequest, "invalid request: id must be a string, a number or null", nil)
		}
		resp.ID = req.ID
	}
	var version, method string
	if json.Unmarshal(req.JSONRPC, &version) != nil || version != "2.0" {
		return fail(InvalidRequest, `invalid request: "jsonrpc" must be "2.0"`, nil)
	}
	if json.Unmarshal(req.Method, &method) != nil || method == "" {
		return fail(InvalidRequest, `invalid request: "method" must be a non-empty string`, nil)
	}
	params, perr := paramsPayload(req.Params)
	i := strings.LastIndexByte(method, '.')
	if i <= 0 || i == len(method)-1 {
		if notification {
			return resp, false
		}
		return fail(MethodNotFound, "method not found: "+strconv.Quote(method)+" is not Service.Method", nil)
	}
	call := base
	call.Service, call.Method = method[:i], method[i+1:]
	// The method is looked up by Invoke, after the caller's token is
	// checked; fleet.Admin is not served over HTTP without auth.
	if g.hiddenOverHTTP(call.Service) {
		if notification {
			return resp, false
		}
		return fail(MethodNotFound, "method not found: "+method, fleet.NewError(fleet.NotFound, ""))
	}
	if perr != nil {
		if notification {
			return resp, false
		}
		return fail(InvalidParams, "invalid params: "+perr.Error(), nil)
	}
	call.Payload = params
	call.Oneway = notification
	reply, rmd, err := g.srv.Invoke(ctx, &call)
	setResponseMetadata(h, rmd)
	setResponseMetadata(h, call.Trailer) // JSON-RPC over HTTP has headers only
	if notification {
		return resp, false
	}
	if err != nil {
		code := fleet.CodeOf(err)
		switch code {
		case fleet.InvalidArgument:
			return fail(InvalidParams, fleetMessage(err), err)
		case fleet.Internal:
			return fail(InternalError, fleetMessage(err), err)
		case fleet.NotFound:
			if _, ok := g.srv.Method(call.Service, call.Method); !ok {
				return fail(MethodNotFound, fleetMessage(err), err)
			}
		}
		return fail(ServerError, fleetMessage(err), err)
	}
	resp.Result = reply
	return resp, true
}

// parseRequest fills req from raw, a valid JSON value (the body was
// checked), as json.Unmarshal would (keys matched without regard to case,
// the last of repeated keys counting), except that the fields are slices
// of raw: nothing of the request is copied before the caller is
// authenticated. It fails when raw is not an object.
func parseRequest(raw []byte, req *rpcRequest) error {
	t := bytes.TrimSpace(raw)
	if len(t) < 2 || t[0] != '{' {
		return errors.New("not an object")
	}
	space := func(i int) int {
		for i < len(t) && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n') {
			i++
		}
		return i
	}
	i := space(1)
	for i < len(t) && t[i] == '"' {
		n := jsonValueLen(t[i:])
		key := t[i : i+n]
		i = space(space(i+n) + 1) // past ':'
		n = jsonValueLen(t[i:])
		val := t[i : i+n]
		i = space(i + n)
		var k string
		if bytes.IndexByte(key, '\\') >= 0 {
			if err := json.Unmarshal(key, &k); err != nil {
				return err
			}
		} else {
			k = string(key[1 : len(key)-1])
		}
		switch {
		case strings.EqualFold(k, "jsonrpc"):
			req.JSONRPC = val
		case strings.EqualFold(k, "method"):
			req.Method = val
		case strings.EqualFold(k, "params"):
			req.Params = val
		case strings.EqualFold(k, "id"):
			req.ID = val
		}
		if i < len(t) && t[i] == ',' {
			i = space(i + 1)
		}
	}
	return nil
}

// jsonValueLen returns the length of the JSON value at the start of b,
// which must be valid JSON (a value followed by more text).
func jsonValueLen(b []byte) int {
	depth := 0
	inStr, esc := false, false
	for i, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 0 {
					return i + 1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return i // the end of a scalar
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i
			}
		}
	}
	return len(b)
}

// paramsPayload returns the Fleet arguments of a request's params: an
// object is the arguments; an array must hold at most one element, the
// arguments (net/rpc's JSON-RPC convention); absent params mean zero
// arguments.
func paramsPayload(p json.RawMessage) ([]byte, error) {
	t := bytes.TrimSpace(p)
	if len(t) == 0 {
		return nil, nil
	}
	switch t[0] {
	case '{':
		return t, nil
	case '[':
		// A one-element array's element is returned as a slice of p,
		// found by scanning (p is valid JSON: the body was checked): an
		// array of a million elements costs nothing (the caller has not
		// been authenticated yet).
		rest := bytes.TrimLeft(t[1:], " \t\r\n")
		if rest[0] == ']' {
			return nil, nil
		}
		n := jsonValueLen(rest)
		if after := bytes.TrimLeft(rest[n:], " \t\r\n"); len(after) == 0 || after[0] != ']' {
			return nil, errors.New("a Fleet method takes one argument: params must be an object or an array of one element")
		}
		return rest[:n], nil
	}
	return nil, errors.New("params must be an object or an array")
}

// validID reports whether id is a string, a number or null.
func validID(id json.RawMessage) bool {
	t := bytes.TrimSpace(id)
	if len(t) == 0 {
		return false
	}
	switch c := t[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	}
	return bytes.Equal(t, null)
}

func fleetMessage(err error) string {
	var fe *fleet.Error
	if errors.As(err, &fe) {
		return fe.Message()
	}
	return err.Error()
}

func dataOf(err error) *errorData {
	if err == nil {
		return nil
	}
	c := fleet.CodeOf(err)
	return &errorData{Code: c, Status: c.String()}
}

func writeRPC(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // a result that is not valid JSON cannot happen: the codec made it
		b = []byte(`{"jsonrpc":"2.0","error":{"code":-32603,"message":"internal error: encode response"},"id":null}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// runBatch runs a batch's entries, up to WithBatchConcurrency at a time,
// and returns their responses in the batch's order (notifications left
// out). The results together are bounded by MaxFrameSize: an entry that
// starts once they passed it is not run and is answered with a
// resource_exhausted server error (notifications still run: they add
// nothing to the answer); entries already running may each add up to
// MaxFrameSize more.
func (g *Gateway) runBatch(ctx context.Context, base server.Call, entries []json.RawMessage, h http.Header) []rpcResponse {
	var budget atomic.Int64
	budget.Store(int64(g.srv.Limits().MaxFrameSize))
	resps := make([]rpcResponse, len(entries))
	has := make([]bool, len(entries))
	var hmu sync.Mutex // guards h: entries set response metadata concurrently
	run := func(i int) {
		if budget.Load() < 0 {
			if resp, ok := overBudget(entries[i]); ok {
				resps[i], has[i] = resp, true
				return
			}
		}
		hdr := http.Header{}
		resp, ok := g.runRPC(ctx, base, entries[i], hdr)
		if len(hdr) > 0 {
			hmu.Lock()
			for k, v := range hdr {
				h[k] = v
			}
			hmu.Unlock()
		}
		if ok {
			budget.Add(-int64(len(resp.Result)))
			resps[i], has[i] = resp, true
		}
	}
	n := min(g.opts.batchConc, len(entries))
	if n <= 1 {
		for i := range entries {
			run(i)
		}
	} else {
		next := atomic.Int64{}
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= len(entries) {
						return
					}
					run(i)
				}
			}()
		}
		wg.Wait()
	}
	out := make([]rpcResponse, 0, len(entries))
	for i, r := range resps {
		if has[i] {
			out = append(out, r)
		}
	}
	return out
}

// overBudget answers a batch entry that comes after the batch's results
// passed their bound; false for a notification, which is to be run.
func overBudget(raw []byte) (rpcResponse, bool) {
	var req rpcRequest
	if json.Unmarshal(raw, &req) != nil || req.ID == nil || !validID(req.ID) {
		return rpcResponse{}, false // a notification, or invalid: runRPC answers it
	}
	err := fleet.NewError(fleet.ResourceExhausted, "the batch's results exceed the reply size limit; this request was not run")
	return rpcResponse{JSONRPC: "2.0", ID: req.ID, Error: &rpcError{Code: ServerError, Message: fleetMessage(err), Data: dataOf(err)}}, true
}
