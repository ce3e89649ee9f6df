package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchSoak runs "fleet bench soak" for 3 s, once with --json (the
// result decodes and every kind of load ran) and once as text (the report
// names the four slopes).
func TestBenchSoak(t *testing.T) {
	out, errs, status := run(t, "", soakCommand, "--duration", "3s", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errs)
	}
	var res struct {
		Calls   int64 `json:"calls"`
		Oneway  int64 `json:"oneway"`
		Failed  int64 `json:"failed_expected"`
		Samples []struct {
			Goroutines int `json:"goroutines"`
		} `json:"samples"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Calls == 0 || res.Oneway == 0 || res.Failed == 0 || len(res.Samples) == 0 {
		t.Fatalf("result: %+v", res)
	}
	out, errs, status = run(t, "", soakCommand, "--duration", "2s", "--callers", "2")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errs)
	}
	for _, want := range []string{"rss", "heap", "goroutines", "open fds", "slopes over the second half"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
}
