package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/bench"
	"github.com/fleetrpc/fleet/bench/peers"
)

// BenchmarkStream runs scenario 6 (streams) as Go benchmarks:
//
//	go test -run XXX -bench BenchmarkStream -benchtime 100000x ./bench/
func BenchmarkStream(b *testing.B) {
	for _, sc := range bench.StreamCases() {
		b.Run(sc.Test+"/"+sc.Peer, sc.Bench)
	}
}

// TestStreamsScenario runs scenario 6 in tiny mode: every case yields a
// result without error, and the table has a row for each.
func TestStreamsScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout bytes.Buffer
	rep, err := bench.Run(ctx, bench.Options{
		Scenarios: []string{bench.ScenarioStreams},
		Peers:     []string{peers.Fleet, peers.GRPC},
		Mode:      bench.Tiny,
		Stdout:    &stdout,
		Stderr:    new(bytes.Buffer),
		Launch:    testLauncher,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Streams) != len(bench.StreamCases()) {
		t.Fatalf("%d stream results, want %d", len(rep.Streams), len(bench.StreamCases()))
	}
	for _, s := range rep.Streams {
		if s.Error != "" || s.Messages == 0 || (s.MsgsPerSec <= 0 && s.CallNs <= 0) {
			t.Errorf("%s %s: %+v", s.Peer, s.Test, s)
		}
	}
	if !strings.Contains(stdout.String(), "Scenario 6: streams") {
		t.Errorf("no streams table in:\n%s", stdout.String())
	}
}
