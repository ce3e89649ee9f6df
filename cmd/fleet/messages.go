package main

// This file words the errors a user of fleet call, list and describe
// meets most: a dial that failed, a peer that is not a Fleet server, a
// name that is nearly right, JSON that does not parse or does not fit the
// method's type. Each is covered by a row of TestCLIMessages.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/internal/jsonfields"
	"github.com/fleetrpc/fleet/server/reflection"
)

// probeTimeout bounds the look at a peer after a failure.
const probeTimeout = time.Second

// dialError words a failed client.Dial to addr: DeadlineExceeded when the
// command's --timeout ran out while connecting, else the network's own
// reason once ("connection refused"), not the dialler's nested
// "dial tcp ADDR: dial tcp ADDR: ..." form.
func (t *target) dialError(ctx context.Context, addr string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return &callError{"connect " + addr, fleet.Errorf(fleet.DeadlineExceeded, "--timeout %v ran out while connecting", t.flags.timeout)}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return &callError{"connect " + addr, fleet.NewError(fleet.Canceled, "canceled while connecting")}
	}
	code := fleet.CodeOf(err)
	if code == fleet.Unknown {
		code = fleet.Unavailable
	}
	return t.diagnose(addr, &callError{"connect " + addr, fleet.NewError(code, netReason(err))})
}

// netReason returns the innermost reason of a network error: "connection
// refused", "i/o timeout", "no such host", or err's message when it holds
// no *net.OpError.
func netReason(err error) string {
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Err == nil {
		var fe *fleet.Error
		if errors.As(err, &fe) {
			return fe.Message()
		}
		return err.Error()
	}
	var se *os.SyscallError
	if errors.As(oe.Err, &se) && se.Err != nil {
		return se.Err.Error()
	}
	var de *net.DNSError
	if errors.As(oe.Err, &de) {
		return de.Err + ": " + de.Name
	}
	return oe.Err.Error()
}

// diagnose returns ce with a clearer message when the failure came from a
// peer that is not a Fleet server (an HTTP, HTTPS or TLS server on a direct
// target): it looks at the peer on a new connection, at most probeTimeout.
// Failures that a Fleet server answered, and every other code, are
// returned as they are.
func (t *target) diagnose(addr string, ce *callError) error {
	if t.disc != nil || t.fleetPeer {
		return ce
	}
	switch fleet.CodeOf(ce.err) {
	case fleet.Unavailable, fleet.DeadlineExceeded, fleet.Internal, fleet.Unknown:
	default:
		return ce
	}
	msg := peerMessage(addr, probePeer(addr, t.tlsCfg != nil))
	if msg == "" {
		return ce
	}
	return &callError{"connect " + addr, fleet.NewError(fleet.Unavailable, msg)}
}

// peerMessage words what a probe found at addr, or "" when it found
// nothing to say.
func peerMessage(addr string, kind peerKind) string {
	switch kind {
	case peerHTTP:
		return fmt.Sprintf("%s answers HTTP, not Fleet's protocol: point fleet at a Fleet server's port (a Fleet gateway serves both on one port)", addr)
	case peerHTTPS:
		return fmt.Sprintf("%s answers HTTPS, not Fleet's protocol: point fleet at a Fleet server's port", addr)
	case peerTLS:
		return fmt.Sprintf("%s speaks TLS: add --tls (with --cacert FILE, or --insecure for a test server)", addr)
	case peerPlain:
		return fmt.Sprintf("%s does not speak TLS: drop --tls, --cacert and --insecure", addr)
	}
	return ""
}

// slowPeer is how long a first call waits for a server that has not
// answered Fleet's Hello before it looks at what listens there.
const slowPeer = time.Second

// callWatched runs call on c, a new connection to addr. A peer that has
// not answered Fleet's Hello when slowPeer has passed is probed; when it
// is an HTTP or TLS server, call is cancelled and that is the error, so a
// peer that never answers Fleet's protocol is named as such at once rather
// than at --timeout.
func (t *target) callWatched(ctx context.Context, c *client.Client, addr string, call func(context.Context) error) error {
	if t.disc != nil || t.fleetPeer {
		return call(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	timer := time.NewTimer(slowPeer)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	if c.Capabilities() == 0 {
		if msg := peerMessage(addr, probePeer(addr, t.tlsCfg != nil)); msg != "" {
			cancel()
			<-done
			return &callError{"connect " + addr, fleet.NewError(fleet.Unavailable, msg)}
		}
	}
	return <-done
}

type peerKind int

const (
	peerUnknown peerKind = iota
	peerHTTP             // an HTTP/1 server
	peerHTTPS            // an HTTPS server, spoken to in cleartext
	peerTLS              // a TLS server, spoken to in cleartext
	peerPlain            // not a TLS server, though --tls was given
)

// probePeer tells what listens at addr. Without TLS it sends an HTTP
// request line (a Fleet server reads its first four bytes as a frame
// length over the limit and closes the connection) and reads the first
// bytes of the answer; when that says nothing it tries a TLS handshake
// (certificate not verified: only whether the peer speaks TLS matters).
// With TLS (usingTLS) it checks whether the peer answers a handshake at
// all. Each attempt is bounded by probeTimeout.
func probePeer(addr string, usingTLS bool) peerKind {
	d := net.Dialer{Timeout: probeTimeout}
	if usingTLS {
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			return peerUnknown
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(probeTimeout))
		err = tls.Client(nc, &tls.Config{InsecureSkipVerify: true}).Handshake()
		var rhe tls.RecordHeaderError
		if errors.As(err, &rhe) {
			return peerPlain
		}
		return peerUnknown
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return peerUnknown
	}
	nc.SetDeadline(time.Now().Add(probeTimeout))
	_, err = nc.Write([]byte("HEAD / HTTP/1.0\r\n\r\n"))
	var buf [256]byte
	n := 0
	for err == nil && n < len(buf) {
		var m int
		m, err = nc.Read(buf[n:])
		n += m
	}
	nc.Close()
	if reply := buf[:n]; bytes.HasPrefix(reply, []byte("HTTP/")) {
		if bytes.Contains(reply, []byte("HTTPS")) {
			return peerHTTPS // Go's net/http: "Client sent an HTTP request to an HTTPS server."
		}
		return peerHTTP
	}
	nc, err = d.Dial("tcp", addr)
	if err != nil {
		return peerUnknown
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(probeTimeout))
	if tls.Client(nc, &tls.Config{InsecureSkipVerify: true}).Handshake() == nil {
		return peerTLS
	}
	return peerUnknown
}

// withSuggestion returns err with a hint appended to its message when it
// says a service or method is unknown: the nearest name the server has
// ("did you mean Arith.Add?"), or the names it has. It asks the server's
// reflection service; when that fails, err is returned as it is.
func (t *target) withSuggestion(ctx context.Context, fullMethod, service, method string, err error) error {
	if fleet.CodeOf(err) != fleet.NotFound {
		return err
	}
	var list reflection.ListReply
	if t.reflect(ctx, "List", &reflection.ListRequest{}, &list) != nil {
		return err
	}
	hint := suggest(list.Services, service, method)
	if hint == "" {
		return err
	}
	msg := err.Error()
	var fe *fleet.Error
	if errors.As(err, &fe) {
		msg = fe.Message()
	}
	return &callError{fullMethod, fleet.Errorf(fleet.NotFound, "%s; %s", msg, hint)}
}

// suggest words the hint for an unknown service.method among services.
func suggest(services []reflection.ServiceInfo, service, method string) string {
	var names []string
	byName := map[string]reflection.ServiceInfo{}
	for _, s := range services {
		byName[s.Name] = s
		if !strings.HasPrefix(s.Name, "fleet.") {
			names = append(names, s.Name)
		}
	}
	svc, ok := byName[service]
	if !ok {
		near := nearest(service, names)
		if near == "" {
			if len(names) == 0 {
				return ""
			}
			return "the server has " + strings.Join(names, ", ")
		}
		svc = byName[near]
	}
	if m := nearest(method, svc.Methods); m != "" {
		return fmt.Sprintf("did you mean %s.%s?", svc.Name, m)
	}
	if !ok {
		return fmt.Sprintf("did you mean service %s? It has %s", svc.Name, strings.Join(svc.Methods, ", "))
	}
	return fmt.Sprintf("%s has %s", svc.Name, strings.Join(svc.Methods, ", "))
}

// nearest returns the name in names closest to s (jsonfields.Nearest).
func nearest(s string, names []string) string { return jsonfields.Nearest(s, names) }

// editDistance is jsonfields.EditDistance.
func editDistance(a, b string) int { return jsonfields.EditDistance(a, b) }

// checkJSON checks that in is one JSON value, and words what is wrong
// with it with a line and a column (1-based; columns count bytes).
func checkJSON(in []byte) error {
	dec := json.NewDecoder(bytes.NewReader(in))
	var v any
	err := dec.Decode(&v)
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return usagef("argument is empty: want a JSON value such as {}")
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(in, len(in))
		return usagef("argument is not valid JSON: line %d, column %d: unexpected end of input", line, col)
	case errors.As(err, &se):
		line, col := position(in, int(se.Offset)-1) // Offset counts the bad byte
		return usagef("argument is not valid JSON: line %d, column %d: %v", line, col, err)
	case err != nil:
		return usagef("argument is not valid JSON: %v", err)
	}
	if dec.More() {
		off := int(dec.InputOffset())
		for off < len(in) && strings.ContainsRune(" \t\r\n", rune(in[off])) {
			off++
		}
		line, col := position(in, off)
		return usagef("argument is not valid JSON: line %d, column %d: data after the JSON value", line, col)
	}
	return nil
}

// position returns the line and column (1-based) of byte index i of b;
// i = len(b) is just past the end.
func position(b []byte, i int) (line, col int) {
	i = max(0, min(i, len(b)))
	head := b[:i]
	line = bytes.Count(head, []byte("\n")) + 1
	col = i - (bytes.LastIndexByte(head, '\n') + 1) + 1
	return line, col
}

// checkFields rejects, for a method of Go types, the object keys of in that
// the argument's type has no field for and the fields its zero value
// encodes that in lacks (internal/jsonfields, which the gateway's HTTP/JSON
// route shares). schema and example come from reflection
// (TypeInfo.JSONSchema, Example).
func checkFields(what, typ string, in []byte, schemaJSON, example json.RawMessage) error {
	fe := jsonfields.New(schemaJSON, example).Check(in)
	if fe == nil {
		return nil
	}
	where := fe.Path
	if where == "" {
		where = "the argument (" + typ + ")"
	}
	if fe.Missing {
		return usagef("missing field %q in %s of %s (give its zero value, %s, or --loose to leave it out)",
			fe.Field, where, what, fe.Zero)
	}
	hint := ""
	if fe.Near != "" {
		hint = fmt.Sprintf(`did you mean %q? `, fe.Near)
	}
	return usagef("unknown field %q in %s of %s (%sits fields: %s); --loose sends it anyway",
		fe.Field, where, what, hint, strings.Join(fe.Fields, ", "))
}

// protoTemplate returns a message of md with every field a template needs
// set to its zero value: scalars and enums present (so proto2 required
// fields are set and protojson prints them), nested messages filled the
// same way (a message type that contains itself is left empty the second
// time), one field of each oneof. Lists and maps stay empty; protojson
// with EmitUnpopulated prints them as [] and {}.
func protoTemplate(md protoreflect.MessageDescriptor) *dynamicpb.Message {
	return fillTemplate(md, map[protoreflect.FullName]bool{})
}

func fillTemplate(md protoreflect.MessageDescriptor, open map[protoreflect.FullName]bool) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	if open[md.FullName()] {
		return m
	}
	open[md.FullName()] = true
	defer delete(open, md.FullName())
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.IsList() || fd.IsMap() {
			continue
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && od.Fields().Get(0) != fd {
			continue
		}
		switch fd.Kind() {
		case protoreflect.MessageKind, protoreflect.GroupKind:
			m.Set(fd, protoreflect.ValueOfMessage(fillTemplate(fd.Message(), open)))
		case protoreflect.EnumKind:
			m.Set(fd, protoreflect.ValueOfEnum(fd.Enum().Values().Get(0).Number()))
		default:
			m.Set(fd, zeroScalar(fd))
		}
	}
	return m
}

// zeroScalar is the zero value of a scalar field's kind.
func zeroScalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(false)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(0)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(0)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(0)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(0)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(nil)
	}
	return fd.Default()
}
