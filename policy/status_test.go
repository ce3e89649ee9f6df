package policy_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/policy"
)

// TestWatcherStatus: PolicyStatus and the JSON form follow a document
// delivered, one refused (the last good kept, its reason reported) and a
// deletion.
func TestWatcherStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The document is in the store before the watcher starts, so the
	// watcher's first delivery is it.
	store := &policy.Memory{}
	if err := store.Put(ctx, "Hello", []byte(`{"version":"7","service":"Hello","subsets":[{"name":"v2","tags":["v2"]}]}`)); err != nil {
		t.Fatal(err)
	}
	w, err := policy.NewWatcher(store, "Hello", policy.WatcherConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	type status struct {
		Service   string           `json:"service"`
		Version   string           `json:"version"`
		Applied   int64            `json:"applied"`
		Refused   int64            `json:"refused"`
		LastError string           `json:"lastError"`
		Policy    *policy.Document `json:"policy"`
	}
	read := func() status {
		t.Helper()
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var s status
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%v in %s", err, b)
		}
		return s
	}

	if err := w.Wait(ctx, "7"); err != nil {
		t.Fatal(err)
	}
	if err := w.Apply([]byte(`{"version":"8","service":"Hello","routes":[{"destinations":[{"subset":"nope","weight":100}]}]}`)); err == nil {
		t.Fatal("a document naming an unknown subset was applied")
	}
	svc, ver, applied, refused := w.PolicyStatus()
	if svc != "Hello" || ver != "7" || applied != 1 || refused != 1 {
		t.Fatalf("PolicyStatus = %q %q %d %d, want Hello 7 1 1", svc, ver, applied, refused)
	}
	s := read()
	if s.Service != "Hello" || s.Version != "7" || s.Applied != 1 || s.Refused != 1 || s.LastError == "" {
		t.Fatalf("JSON status = %+v", s)
	}
	if s.Policy == nil || s.Policy.Version != "7" || len(s.Policy.Subsets) != 1 || s.Policy.Subsets[0].Name != "v2" {
		t.Fatalf("JSON policy = %+v, want the document of version 7", s.Policy)
	}

	if err := store.Put(ctx, "Hello", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if s := read(); s.Version != "" || s.Policy != nil || s.Applied != 2 {
		t.Fatalf("after deletion: %+v, want no version, no policy, 2 applied", s)
	}
}
