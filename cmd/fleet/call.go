package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server/reflection"
)

func init() {
	rootCmd.AddCommand(newCallCmd(), newListCmd(), newDescribeCmd())
}

const targetHelp = `TARGET is host:port, or a registry URL ending in a service name:
etcd://127.0.0.1:2379/Arith, zookeeper://..., redis://..., nats://...,
or static://host1:port1,host2:port2/Arith. With a registry the call goes
through an XClient (--selector, --failmode); reflection asks the first
instance listed.`

const exitHelp = `Exit status: 0 success; 1 other failure; 2 bad command line or input
(malformed TARGET, JSON, -d file; unknown or missing fields without --loose);
64+N the call failed with Fleet code N
(66 unknown, 67 invalid_argument, 68 deadline_exceeded, 69 not_found,
78 unavailable, 80 unauthenticated, ...). See docs/cli.md.`

// rangeArgs is cobra.RangeArgs with a usage error (exit status 2).
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("%s: want %s", cmd.Name(), cmd.Use)
		}
		return nil
	}
}

func flagError(_ *cobra.Command, err error) error { return &usageError{err} }

// commandContext bounds a command by --timeout.
func commandContext(cmd *cobra.Command, f *connFlags) (context.Context, context.CancelFunc, error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	md, err := f.metadata()
	if err != nil {
		return nil, nil, err
	}
	if md != nil {
		ctx = fleet.WithOutgoingMetadata(ctx, md)
	}
	if f.timeout > 0 {
		ctx, cancel := context.WithTimeout(ctx, f.timeout)
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return ctx, cancel, nil
}

type callFlags struct {
	connFlags
	data    string
	codec   string
	verbose bool
	loose   bool
}

func newCallCmd() *cobra.Command {
	var f callFlags
	cmd := &cobra.Command{
		Use:   "call TARGET Service.Method [JSON]",
		Short: "Call a method with a JSON argument and print the reply as JSON",
		Long: `call sends one call and prints the reply as JSON on stdout.

The argument is the JSON after the method, or -d: -d '{"A":1}', -d @file.json,
-d @- (stdin); without any, {}. With --codec auto (the default) call asks the
server's reflection service for the method's types: a protobuf method is
called with the protobuf codec, its JSON converted with protojson through the
reflected descriptors; any other method gets the JSON as is, with the JSON
codec. --codec json, msgpack or protobuf forces one (json and msgpack need no
reflection; with msgpack the JSON keys must be MessagePack's field names, the
Go field names unless msgpack tags say otherwise). JSON with fields the
method's argument type lacks, or without fields it has, is refused unless
--loose. -v prints the server, codec, types, status, elapsed time and
response metadata on stderr.

` + targetHelp + `

` + exitHelp,
		Example: `  fleet call 127.0.0.1:8972 Arith.Add '{"A":1,"B":2}'
  fleet call -v -H tenant:blue --timeout 2s etcd://127.0.0.1:2379/Arith Arith.Mul -d @args.json`,
		Args: rangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			data := f.data
			if len(args) == 3 {
				if data != "" {
					return usagef("call: give the argument either after the method or with -d, not both")
				}
				data = args[2]
			}
			return runCall(cmd, &f, args[0], args[1], data)
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVarP(&f.data, "data", "d", "", "the argument as JSON, @file or @- for stdin")
	fl.StringVar(&f.codec, "codec", "auto", "codec: auto, json, msgpack, protobuf")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print server, codec, response metadata and timing on stderr")
	fl.BoolVar(&f.loose, "loose", false, "send JSON with unknown or missing fields as it is (default: rejected for methods whose types reflection describes)")
	return cmd
}

// splitMethod splits "Service.Method" at its last dot, so service names
// may hold dots ("fleet.Reflection.List").
func splitMethod(s string) (service, method string, err error) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 {
		return "", "", usagef("%q: want Service.Method", s)
	}
	return s[:i], s[i+1:], nil
}

// readData resolves -d: literal JSON, @file or @- (stdin).
func readData(data string, stdin io.Reader) ([]byte, error) {
	switch {
	case data == "":
		return []byte("{}"), nil
	case data == "@-":
		b, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
		if err != nil {
			return nil, usagef("reading stdin: %v", err)
		}
		return b, nil
	case strings.HasPrefix(data, "@"):
		b, err := os.ReadFile(data[1:])
		if err != nil {
			return nil, usagef("-d %s: %v", data, err)
		}
		return b, nil
	}
	return []byte(data), nil
}

func runCall(cmd *cobra.Command, f *callFlags, rawTarget, fullMethod, data string) error {
	if _, _, err := splitMethod(fullMethod); err != nil {
		return err
	}
	in, err := readData(data, cmd.InOrStdin())
	if err != nil {
		return err
	}
	ctx, cancel, err := commandContext(cmd, &f.connFlags)
	if err != nil {
		return err
	}
	defer cancel()
	t, err := openTarget(rawTarget, &f.connFlags)
	if err != nil {
		return err
	}
	defer t.close()
	res, err := doCallChecked(ctx, t, f.codec, fullMethod, in, f.loose)
	if f.verbose && res != nil {
		w := cmd.ErrOrStderr()
		fmt.Fprintf(w, "server:   %s\n", res.where)
		fmt.Fprintf(w, "method:   %s (codec %s)\n", fullMethod, res.codec)
		if res.desc != nil {
			fmt.Fprintf(w, "types:    %s -> %s\n", typeName(res.desc.Args), typeName(res.desc.Reply))
		}
		fmt.Fprintf(w, "status:   %s\n", fleet.CodeOf(err))
		fmt.Fprintf(w, "elapsed:  %v\n", res.elapsed.Round(time.Microsecond))
		keys := make([]string, 0, len(res.md))
		for k := range res.md {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			fmt.Fprintln(w, "response metadata: none")
		} else {
			fmt.Fprintln(w, "response metadata:")
		}
		for _, k := range keys {
			fmt.Fprintf(w, "  %s: %s\n", k, res.md[k])
		}
	}
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	out.Write(res.reply)
	fmt.Fprintln(out)
	return nil
}

// callResult is what doCall reports besides its error.
type callResult struct {
	reply   []byte                 // the reply as indented JSON
	codec   string                 // the codec used
	desc    *reflection.MethodInfo // the reflected types; nil without reflection
	where   string                 // the server or registry called
	md      fleet.Metadata         // response metadata
	elapsed time.Duration          // the call alone, without reflection
}

// doCall calls fullMethod on t with the JSON argument in, as it is (no
// field checks: see doCallChecked). codecMode is auto, json, msgpack or
// protobuf (see fleet call --help). The result is nil when the call was
// not made; errors are usage or call errors.
func doCall(ctx context.Context, t *target, codecMode, fullMethod string, in []byte) (*callResult, error) {
	return doCallChecked(ctx, t, codecMode, fullMethod, in, true)
}

// doCallChecked is doCall with the field checks of fleet call: unless
// loose, JSON with fields the method's argument type lacks, or without
// fields it has, is refused before the call.
func doCallChecked(ctx context.Context, t *target, codecMode, fullMethod string, in []byte, loose bool) (*callResult, error) {
	service, method, err := splitMethod(fullMethod)
	if err != nil {
		return nil, err
	}
	if t.service != "" && t.service != service {
		return nil, usagef("target %q names service %q, but the call is for %q", t.raw, t.service, service)
	}

	// Choose the codec and build the argument and reply values.
	mode := codecMode
	var desc *reflection.MethodInfo
	switch mode {
	case "auto", "protobuf":
		var d reflection.DescribeReply
		err := t.reflect(ctx, "Describe", &reflection.DescribeRequest{Service: service, Method: method}, &d)
		switch {
		case err == nil && len(d.Methods) == 1:
			desc = &d.Methods[0]
		case err == nil:
			return nil, &callError{fullMethod, fleet.Errorf(fleet.Internal, "reflection described %d methods", len(d.Methods))}
		case mode == "auto" && fleet.CodeOf(err) == fleet.Unimplemented:
			mode = "json" // no reflection: send the JSON as is
		default:
			if ce, ok := err.(*callError); ok && fleet.CodeOf(err) == fleet.NotFound {
				ce.what = fullMethod
				return nil, t.withSuggestion(ctx, fullMethod, service, method, ce.err)
			}
			return nil, err
		}
		if mode == "auto" {
			mode = "json"
			if desc.Args.Protobuf != "" && desc.Reply.Protobuf != "" {
				mode = "protobuf"
			}
		}
	case "json", "msgpack":
	default:
		return nil, usagef("--codec %q: want auto, json, msgpack or protobuf", codecMode)
	}

	var args, reply any
	var cd codec.ID
	var render func() ([]byte, error)
	switch mode {
	case "json":
		if err := checkJSON(in); err != nil {
			return nil, err
		}
		if desc != nil && !loose {
			if err := checkFields(fullMethod, desc.Args.GoType, in, desc.Args.JSONSchema, desc.Args.Example); err != nil {
				return nil, err
			}
		}
		var out json.RawMessage
		args, reply, cd = json.RawMessage(in), &out, codec.JSON
		render = func() ([]byte, error) { return indentJSON(out) }
	case "msgpack":
		if err := checkJSON(in); err != nil {
			return nil, err
		}
		v, err := decodeLoose(in)
		if err != nil {
			return nil, usagef("argument is not valid JSON: %v", err)
		}
		var out any
		args, reply, cd = v, &out, codec.MsgPack
		render = func() ([]byte, error) { return json.MarshalIndent(jsonSafe(out), "", "  ") }
	case "protobuf":
		if desc.Args.Protobuf == "" || desc.Reply.Protobuf == "" {
			return nil, usagef("--codec protobuf: %s takes %s and returns %s, not protobuf messages", fullMethod, desc.Args.GoType, desc.Reply.GoType)
		}
		if t.flags.failMode == "failbackup" && t.disc != nil {
			return nil, usagef("--failmode failbackup is not supported for protobuf methods; use --codec json")
		}
		argMD, err := messageDescriptor(desc.Args)
		if err != nil {
			return nil, &callError{"reflection", fleet.WrapError(fleet.Internal, err)}
		}
		replyMD, err := messageDescriptor(desc.Reply)
		if err != nil {
			return nil, &callError{"reflection", fleet.WrapError(fleet.Internal, err)}
		}
		am := dynamicpb.NewMessage(argMD)
		if err := checkJSON(in); err != nil {
			return nil, err
		}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: loose, AllowPartial: loose}).Unmarshal(in, am); err != nil {
			return nil, usagef("argument does not fit %s: %v%s", argMD.FullName(), err, looseHint(loose))
		}
		out := dynamicpb.NewMessage(replyMD)
		args, reply, cd = am, out, codec.Protobuf
		render = func() ([]byte, error) {
			b, err := protojson.Marshal(out)
			if err != nil {
				return nil, err
			}
			return indentJSON(b) // protojson varies its spacing on purpose
		}
	}

	inv, err := t.invoker(ctx, service, client.WithCodec(cd))
	if err != nil {
		return nil, err
	}
	defer inv.close()
	res := &callResult{codec: codec.Get(cd).Name(), desc: desc, where: inv.where}
	cctx := fleet.WithResponseMetadata(ctx, &res.md)
	start := time.Now()
	err = inv.call(cctx, method, args, reply)
	res.elapsed = time.Since(start)
	if err != nil {
		if fleet.CodeOf(err) == fleet.NotFound && desc == nil {
			return res, t.withSuggestion(ctx, fullMethod, service, method, err)
		}
		if ce, ok := err.(*callError); ok {
			return res, ce // not a Fleet server
		}
		return res, t.diagnose(inv.where, &callError{fullMethod, err})
	}
	if res.reply, err = render(); err != nil {
		return res, &callError{fullMethod, fleet.Errorf(fleet.Internal, "printing the reply: %v", err)}
	}
	return res, nil
}

// looseHint names --loose after an error it would avoid.
func looseHint(loose bool) string {
	if loose {
		return ""
	}
	return " (--loose accepts unknown and missing fields)"
}

func typeName(t reflection.TypeInfo) string {
	if t.Protobuf != "" {
		return t.Protobuf + " (protobuf)"
	}
	return t.GoType
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// indentJSON returns b indented by two spaces, whatever spacing b had.
func indentJSON(b []byte) ([]byte, error) {
	var compact, buf bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, err
	}
	if err := json.Indent(&buf, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeLoose decodes JSON into plain values with integers kept as int64
// (so that MessagePack sends them as integers, which decode into Go int
// fields).
func decodeLoose(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = numbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = numbers(x[k])
		}
	}
	return v
}

// jsonSafe turns map[any]any values a MessagePack decoder may produce
// into map[string]any for encoding/json.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonSafe(e)
		}
		return m
	case map[string]any:
		for k := range x {
			x[k] = jsonSafe(x[k])
		}
	case []any:
		for i := range x {
			x[i] = jsonSafe(x[i])
		}
	}
	return v
}

// messageDescriptor builds the message descriptor of a reflected protobuf
// type from its FileDescriptorSet.
func messageDescriptor(t reflection.TypeInfo) (protoreflect.MessageDescriptor, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(t.FileDescriptorSet, &set); err != nil {
		return nil, fmt.Errorf("descriptor of %s: %w", t.Protobuf, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("descriptor of %s: %w", t.Protobuf, err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(t.Protobuf))
	if err != nil {
		return nil, fmt.Errorf("descriptor of %s: %w", t.Protobuf, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a message", t.Protobuf)
	}
	return md, nil
}
