package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
)

const goodYAML = `
version: "7"
service: Echo
subsets:
  - {name: v1, version: v1}
  - {name: v2, tags: [v2]}
routes:
  - name: canary-header
    match:
      method: Do
      headers: [{name: x-env, exact: canary}]
    destinations: [{subset: v2, weight: 100}]
  - name: default
    timeout: 1s
    retry:
      attempts: 3
      retryOn: [unavailable, aborted]
      backoff: {base: 5ms, max: 50ms}
      budget: {percent: 20, window: 10s}
    fault:
      abort: {code: unavailable, percent: 10}
      delay: {duration: 20ms, percent: 5}
    breaker: {failures: 3, openFor: 30s, probes: 2, resetEvery: 1m}
    destinations: [{subset: v1, weight: 95}, {subset: v2, weight: 5}]
limits:
  - {method: Do, rate: 100, burst: 10, maxConcurrent: 4}
`

func TestParseYAMLAndJSON(t *testing.T) {
	p, err := policy.Parse([]byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	if p.Version() != "7" || p.Service() != "Echo" || p.Limits()["Do"].MaxConcurrent != 4 {
		t.Fatalf("parsed %+v", p.Document())
	}
	// JSON and YAML encodings of the document decode to the same document.
	j, err := p.Document().JSON()
	if err != nil {
		t.Fatal(err)
	}
	y, err := p.Document().YAML()
	if err != nil {
		t.Fatal(err)
	}
	pj, err := policy.Parse(j)
	if err != nil {
		t.Fatalf("JSON round trip: %v\n%s", err, j)
	}
	py, err := policy.Parse(y)
	if err != nil {
		t.Fatalf("YAML round trip: %v\n%s", err, y)
	}
	j2, _ := pj.Document().JSON()
	j3, _ := py.Document().JSON()
	if string(j) != string(j2) || string(j) != string(j3) {
		t.Fatalf("round trips differ:\n%s\n%s\n%s", j, j2, j3)
	}
	if !strings.Contains(string(j), `"timeout": "1s"`) {
		t.Fatalf("durations are not strings:\n%s", j)
	}
}

func TestValidation(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"empty", ``, "empty document"},
		{"unknown field", `{"version":"1","service":"Echo","rutes":[]}`, `unknown field "rutes"`},
		{"bad yaml", "version: [", "bad YAML"},
		{"no version", `{"service":"Echo"}`, "version: missing"},
		{"no service", `{"version":"1"}`, "service: missing"},
		{"api version", `{"apiVersion":"v9","version":"1","service":"Echo"}`, `apiVersion: unknown "v9"`},
		{"unknown subset", `{"version":"1","service":"Echo","routes":[{"destinations":[{"subset":"v3","weight":100}]}]}`,
			`routes[0].destinations[0].subset: unknown subset "v3"`},
		{"weights", `{"version":"1","service":"Echo","subsets":[{"name":"a"},{"name":"b"}],
			"routes":[{"destinations":[{"subset":"a","weight":60},{"subset":"b","weight":30}]}]}`,
			"routes[0].destinations: weights sum to 90, want 100"},
		{"negative weight", `{"version":"1","service":"Echo","subsets":[{"name":"a"}],
			"routes":[{"destinations":[{"subset":"a","weight":-5}]}]}`, "weight: -5 is outside 0–100"},
		{"match percent", `{"version":"1","service":"Echo","routes":[{"match":{"percent":101}}]}`,
			"routes[0].match.percent: 101 is outside 0–100"},
		{"fault percent", `{"version":"1","service":"Echo","routes":[{"fault":{"abort":{"code":"unavailable","percent":-1}}}]}`,
			"fault.abort.percent: -1 is outside 0–100"},
		{"fault code", `{"version":"1","service":"Echo","routes":[{"fault":{"abort":{"code":"teapot","percent":1}}}]}`,
			`fault.abort.code: unknown or OK code "teapot"`},
		{"regex", `{"version":"1","service":"Echo","routes":[{"match":{"headers":[{"name":"x","regex":"a("}]}}]}`,
			"routes[0].match.headers[0].regex: error parsing regexp"},
		{"two conditions", `{"version":"1","service":"Echo","routes":[{"match":{"headers":[{"name":"x","exact":"a","prefix":"b"}]}}]}`,
			"want exactly one of exact, prefix, regex, present; got 2"},
		{"retry without budget", `{"version":"1","service":"Echo","routes":[{"retry":{"attempts":3}}]}`,
			"routes[0].retry.budget: missing: a retry policy needs a budget"},
		{"retry code", `{"version":"1","service":"Echo","routes":[{"retry":{"attempts":2,"retryOn":["nope"],"budget":{"percent":10}}}]}`,
			`routes[0].retry.retryOn[0]: unknown or OK code "nope"`},
		{"retry and hedge", `{"version":"1","service":"Echo","routes":[{"name":"r","retry":{"attempts":1},"hedge":{"attempts":2,"delay":"10ms"}}]}`,
			"routes[0](r): retry and hedge are exclusive"},
		{"hedge", `{"version":"1","service":"Echo","routes":[{"hedge":{"attempts":9,"delay":"0s"}}]}`,
			"hedge.attempts: 9 is outside 2–5"},
		{"duplicate subset", `{"version":"1","service":"Echo","subsets":[{"name":"a"},{"name":"a"}]}`,
			`subsets[1].name: duplicate subset "a"`},
		{"negative limit", `{"version":"1","service":"Echo","limits":[{"method":"Do","rate":-1}]}`,
			"limits[0]: negative limit"},
		{"breaker failures", `{"version":"1","service":"Echo","routes":[{"breaker":{"failures":1001}}]}`,
			"routes[0].breaker.failures: 1001 is outside 0–1000"},
		{"breaker probes", `{"version":"1","service":"Echo","routes":[{"breaker":{"probes":-1}}]}`,
			"routes[0].breaker.probes: -1 is outside 0–100"},
		{"breaker openFor", `{"version":"1","service":"Echo","routes":[{"breaker":{"openFor":"2h"}}]}`,
			"routes[0].breaker.openFor: 2h0m0s is outside 0–1h"},
		{"breaker resetEvery", `{"version":"1","service":"Echo","routes":[{"breaker":{"resetEvery":"-1s"}}]}`,
			"routes[0].breaker.resetEvery: -1s is outside 0–1h"},
		{"breaker disabled with thresholds", `{"version":"1","service":"Echo","routes":[{"breaker":{"disabled":true,"failures":3}}]}`,
			"routes[0].breaker: disabled together with thresholds"},
		{"empty breaker", `{"version":"1","service":"Echo","routes":[{"breaker":{}}]}`,
			"routes[0].breaker: neither thresholds nor disabled"},
		{"bad duration", `{"version":"1","service":"Echo","routes":[{"timeout":"soon"}]}`, "duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.Parse([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted %s", c.doc)
			}
			if fleet.CodeOf(err) != fleet.InvalidArgument {
				t.Fatalf("code %v, want invalid_argument: %v", fleet.CodeOf(err), err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
	// Every problem is listed, not only the first.
	_, err := policy.Parse([]byte(`{"routes":[{"match":{"percent":-3}}]}`))
	var ve *policy.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
}
