package chaos_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when any test leaves a goroutine of Fleet (or of
// the standard library on its behalf) behind: clients and servers must all
// have stopped. The goroutines of toxiproxy's own links are ignored: when
// a proxy stops while a toxic holds data (bandwidth, latency) or while a
// toxic is being removed, toxiproxy v2.5.0 leaves the link's reader and
// toxic goroutines blocked on channels nobody reads; that is the test
// tool's leak, not Fleet's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	)
}
