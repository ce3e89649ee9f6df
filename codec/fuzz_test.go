package codec_test

import (
	"testing"

	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/internal/gencodemsg"
)

// FuzzUnmarshal feeds arbitrary payloads to every built-in codec: none may
// panic, hang or allocate without bound, and whatever decodes must encode
// again. The seed corpus is in testdata/fuzz/FuzzUnmarshal.
func FuzzUnmarshal(f *testing.F) {
	f.Add(byte(codec.MsgPack), []byte{0x80})
	f.Fuzz(func(t *testing.T, id byte, data []byte) {
		c := codec.Get(codec.ID(id % 6))
		var targets []any
		switch codec.ID(id % 6) {
		case codec.Raw:
			targets = []any{new([]byte)}
		case codec.Protobuf:
			targets = []any{new(benchpb.BenchmarkMessage)}
		case codec.Gencode:
			targets = []any{new(gencodemsg.BenchmarkMessage)}
		default:
			targets = []any{new(benchpb.Plain), new(any), new(map[string]any), new([]uint64)}
		}
		for _, v := range targets {
			if err := c.Unmarshal(data, v); err != nil {
				continue
			}
			if _, err := c.Marshal(v); err != nil && c.Name() != "gob" {
				// gob cannot encode some values it decodes (nil
				// interfaces); the others must.
				t.Fatalf("%s: Unmarshal(%x) into %T succeeded but Marshal failed: %v", c.Name(), data, v, err)
			}
		}
	})
}
