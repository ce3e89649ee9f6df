package gateway

import (
	"reflect"
	"strings"
	"testing"
)

// TestGoTypesJSONNames: a json tag name encoding/json rejects (here with a
// quote) names the field as encoding/json does, by its Go name, so a
// field that encoding/json would drop in favour of another of the same
// name makes the type refused rather than losing its value on the way to
// the handler.
func TestGoTypesJSONNames(t *testing.T) {
	type clash struct {
		F0 int `json:"a\"b"`
		F1 int `json:"F0"`
	}
	if _, err := goMessageOf(reflect.TypeFor[clash]()); err == nil || !strings.Contains(err.Error(), "F0") {
		t.Fatalf("clash: %v", err)
	}
	type odd struct {
		F0 int `json:"a\\b,omitempty"`
		F1 int `json:"ok.name"`
	}
	m, err := goMessageOf(reflect.TypeFor[odd]())
	if err != nil {
		t.Fatal(err)
	}
	f := m.md.Fields()
	if f.Get(0).Name() != "F0" || f.Get(0).JSONName() != "F0" || f.Get(1).Name() != "ok_name" || f.Get(1).JSONName() != "ok.name" {
		t.Fatalf("fields %v %v", f.Get(0), f.Get(1))
	}
}
