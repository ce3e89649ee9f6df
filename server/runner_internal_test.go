package server

import (
	"reflect"
	"testing"
)

// TestRunnerChosenAtNew: New picks the worker pool's runner with
// WithWorkerPool and the reused-goroutine runner (with inline runs)
// otherwise.
func TestRunnerChosenAtNew(t *testing.T) {
	fn := func(f runFunc) uintptr { return reflect.ValueOf(f).Pointer() }
	def := New()
	defer def.Close()
	pool := New(WithWorkerPool(2))
	defer pool.Close()
	if fn(def.run) != fn(def.runReused) {
		t.Fatal("default server does not run calls on reused goroutines")
	}
	if fn(pool.run) != fn(pool.runPooled) {
		t.Fatal("WithWorkerPool server does not run calls on its pool")
	}
}
