package policy_test

import (
	"context"
	"fmt"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/policy"
)

func ExampleParse() {
	_, err := policy.Parse([]byte(`
version: "1"
service: Hello
subsets: [{name: v1, version: v1}, {name: v2, version: v2}]
routes:
  - destinations: [{subset: v1, weight: 90}, {subset: v3, weight: 5}]
    retry: {attempts: 3}
`))
	fmt.Println(fleet.CodeOf(err))
	fmt.Println(err)
	// Output:
	// invalid_argument
	// invalid_argument: invalid policy: routes[0].destinations[1].subset: unknown subset "v3"; routes[0].destinations: weights sum to 95, want 100; routes[0].retry.budget: missing: a retry policy needs a budget
}

func ExamplePolicy_Route() {
	p, err := policy.Parse([]byte(`{"version":"1","service":"Hello",
		"subsets":[{"name":"v2","tags":["v2"]}],
		"routes":[{"name":"canary","match":{"headers":[{"name":"x-env","exact":"canary"}]},
		           "destinations":[{"subset":"v2","weight":100}]},
		          {"name":"rest"}]}`))
	if err != nil {
		panic(err)
	}
	canary := fleet.AppendOutgoingMetadata(context.Background(), "x-env", "canary")
	fmt.Println(p.Route(canary, "Say"))
	fmt.Println(p.Route(context.Background(), "Say"))
	// Output:
	// canary
	// rest
}
