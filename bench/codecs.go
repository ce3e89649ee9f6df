package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers gRPC's "proto" codec
	"google.golang.org/grpc/mem"

	"github.com/fleetrpc/fleet/bench/peers"
	"github.com/fleetrpc/fleet/bench/thriftbench"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/gencodemsg"
)

// CodecResult is one row of scenario 5: marshal and unmarshal of the
// benchmark message by one codec, measured with testing.Benchmark.
type CodecResult struct {
	Owner string `json:"owner"` // "fleet" or the peer whose encoding it is
	Codec string `json:"codec"`
	Value string `json:"value"` // the Go type encoded
	Size  int    `json:"size_bytes"`

	MarshalNs       float64 `json:"marshal_ns_per_op"`
	MarshalBytes    int64   `json:"marshal_bytes_per_op"`
	MarshalAllocs   int64   `json:"marshal_allocs_per_op"`
	UnmarshalNs     float64 `json:"unmarshal_ns_per_op"`
	UnmarshalBytes  int64   `json:"unmarshal_bytes_per_op"`
	UnmarshalAllocs int64   `json:"unmarshal_allocs_per_op"`
	Error           string  `json:"error,omitempty"`
}

// codecCase is an encoding under test: marshal returns the encoding,
// unmarshal decodes it into a fresh value and reports a wrong result.
type codecCase struct {
	owner, name, value string
	marshal            func() ([]byte, error)
	unmarshal          func([]byte) error
	// marshalOnly, if set, is what the marshal benchmark runs instead of
	// marshal.
	marshalOnly func() error
}

var testingInit sync.Once

// setBenchtime sets testing.Benchmark's run time.
func setBenchtime(s Settings) {
	testingInit.Do(func() {
		if flag.Lookup("test.benchtime") == nil {
			testing.Init()
		}
	})
	flag.Set("test.benchtime", s.CodecTime.String())
}

func (r *runner) codecs(ctx context.Context) error {
	setBenchtime(r.set)
	for _, cc := range codecCases() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.prog.note(fmt.Sprintf("codecs %s %s", cc.owner, cc.name))
		res := CodecResult{Owner: cc.owner, Codec: cc.name, Value: cc.value}
		data, err := cc.marshal()
		if err == nil {
			data = append([]byte(nil), data...)
			err = cc.unmarshal(data)
		}
		if err != nil {
			res.Error = err.Error()
			r.rep.Codecs = append(r.rep.Codecs, res)
			continue
		}
		res.Size = len(data)
		marshalOnly := cc.marshalOnly
		if marshalOnly == nil {
			marshalOnly = func() error { _, err := cc.marshal(); return err }
		}
		m := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := marshalOnly(); err != nil {
					b.Fatal(err)
				}
			}
		})
		u := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := cc.unmarshal(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		res.MarshalNs, res.MarshalBytes, res.MarshalAllocs = nsPerOp(m), m.AllocedBytesPerOp(), m.AllocsPerOp()
		res.UnmarshalNs, res.UnmarshalBytes, res.UnmarshalAllocs = nsPerOp(u), u.AllocedBytesPerOp(), u.AllocsPerOp()
		r.rep.Codecs = append(r.rep.Codecs, res)
	}
	return nil
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	if r.N == 0 {
		return 0
	}
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

func checkProto(m *benchpb.BenchmarkMessage) error {
	if m.GetField1() != benchpb.Text || m.GetField3() != benchpb.Number || !m.GetField81() {
		return fmt.Errorf("decoded message differs: field1=%q field3=%d", m.GetField1(), m.GetField3())
	}
	return nil
}

func checkPlain(p *benchpb.Plain) error {
	if p.Field1 != benchpb.Text || p.Field3 != benchpb.Number || !p.Field81 {
		return fmt.Errorf("decoded message differs: field1=%q field3=%d", p.Field1, p.Field3)
	}
	return nil
}

// codecCases lists Fleet's registered codecs (each on benchpb.BenchmarkMessage
// if it encodes protobuf messages, gencode on gencodemsg.BenchmarkMessage,
// the others on benchpb.Plain), then the
// encodings the peers use.
func codecCases() []codecCase {
	var cases []codecCase
	for id := 1; id < 32; id++ {
		c := codec.Get(codec.ID(id))
		if c == nil {
			continue
		}
		name := fmt.Sprintf("%s (id %d)", c.Name(), id)
		var buf []byte
		marshal := func(v any) func() ([]byte, error) {
			if _, ok := c.(codec.Appender); ok {
				// Fleet's hot path appends into a reused buffer.
				return func() ([]byte, error) {
					var err error
					buf, err = codec.MarshalAppend(c, buf[:0], v)
					return buf, err
				}
			}
			return func() ([]byte, error) { return c.Marshal(v) }
		}
		if c.Name() == "protobuf" || codec.ID(id) == codec.Protobuf {
			cases = append(cases, codecCase{
				owner: peers.Fleet, name: name, value: "benchpb.BenchmarkMessage",
				marshal: marshal(benchpb.New()),
				unmarshal: func(data []byte) error {
					m := new(benchpb.BenchmarkMessage)
					if err := c.Unmarshal(data, m); err != nil {
						return err
					}
					return checkProto(m)
				},
			})
			continue
		}
		if codec.ID(id) == codec.Gencode {
			cases = append(cases, codecCase{
				owner: peers.Fleet, name: name, value: "gencodemsg.BenchmarkMessage",
				marshal: marshal(gencodemsg.New()),
				unmarshal: func(data []byte) error {
					m := new(gencodemsg.BenchmarkMessage)
					if err := c.Unmarshal(data, m); err != nil {
						return err
					}
					if m.Field1 != benchpb.Text || m.Field3 != benchpb.Number || !m.Field81 {
						return fmt.Errorf("decoded message differs: field1=%q field3=%d", m.Field1, m.Field3)
					}
					return nil
				},
			})
			continue
		}
		cases = append(cases, codecCase{
			owner: peers.Fleet, name: name, value: "benchpb.Plain",
			marshal: marshal(benchpb.NewPlain()),
			unmarshal: func(data []byte) error {
				p := new(benchpb.Plain)
				if err := c.Unmarshal(data, p); err != nil {
					return err
				}
				return checkPlain(p)
			},
		})
	}

	// gRPC's codec, with its pooled buffers freed as gRPC frees them.
	gc := encoding.GetCodecV2("proto")
	msg := benchpb.New()
	cases = append(cases, codecCase{
		owner: peers.GRPC, name: "grpc encoding/proto", value: "benchpb.BenchmarkMessage",
		marshal: func() ([]byte, error) {
			out, err := gc.Marshal(msg)
			if err != nil {
				return nil, err
			}
			b := out.Materialize()
			out.Free()
			return b, nil
		},
		unmarshal: func(data []byte) error {
			m := new(benchpb.BenchmarkMessage)
			if err := gc.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m); err != nil {
				return err
			}
			return checkProto(m)
		},
	})
	// The transport writes gRPC's buffers directly: measure Marshal and
	// Free, without Materialize's copy.
	cases[len(cases)-1].marshalOnly = func() error {
		out, err := gc.Marshal(msg)
		out.Free()
		return err
	}

	// Thrift's binary protocol through TSerializer / TDeserializer.
	ser, des := thrift.NewTSerializer(), thrift.NewTDeserializer()
	tmsg := peers.NewThriftMessage()
	cases = append(cases, codecCase{
		owner: peers.Thrift, name: "thrift binary", value: "thriftbench.BenchmarkMessage",
		marshal: func() ([]byte, error) { return ser.Write(context.Background(), tmsg) },
		unmarshal: func(data []byte) error {
			m := thriftbench.NewBenchmarkMessage()
			if err := des.Read(context.Background(), m, data); err != nil {
				return err
			}
			if m.Field1 != benchpb.Text || m.Field3 != benchpb.Number {
				return fmt.Errorf("decoded message differs: field1=%q", m.Field1)
			}
			return nil
		},
	})

	// net/rpc/jsonrpc encodes params with encoding/json.
	plain := benchpb.NewPlain()
	cases = append(cases, codecCase{
		owner: peers.JSONRPC, name: "encoding/json", value: "benchpb.Plain",
		marshal: func() ([]byte, error) { return json.Marshal(plain) },
		unmarshal: func(data []byte) error {
			p := new(benchpb.Plain)
			if err := json.Unmarshal(data, p); err != nil {
				return err
			}
			return checkPlain(p)
		},
	})
	return cases
}
