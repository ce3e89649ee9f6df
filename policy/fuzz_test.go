package policy_test

import (
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
)

// FuzzParse: Parse never panics, fails only with InvalidArgument, and a
// document it accepts encodes to JSON and YAML that parse to the same
// document. Seeds in testdata/fuzz/FuzzParse and below.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodYAML))
	f.Add([]byte(`{"version":"1","service":"Echo","routes":[{"match":{"headers":[{"name":"x","regex":"a+"}]}}]}`))
	f.Add([]byte("version: 1\nservice: Echo\nroutes: [{timeout: 1s}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Parse(data)
		if err != nil {
			if fleet.CodeOf(err) != fleet.InvalidArgument {
				t.Fatalf("error with code %v: %v", fleet.CodeOf(err), err)
			}
			return
		}
		j, err := p.Document().JSON()
		if err != nil {
			t.Fatal(err)
		}
		y, err := p.Document().YAML()
		if err != nil {
			t.Fatal(err)
		}
		for _, enc := range [][]byte{j, y} {
			q, err := policy.Parse(enc)
			if err != nil {
				t.Fatalf("re-parsing %s: %v", enc, err)
			}
			j2, _ := q.Document().JSON()
			if string(j2) != string(j) {
				t.Fatalf("round trip changed the document:\n%s\n%s", j, j2)
			}
		}
	})
}
