package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet/registry/etcd/embedded"
)

// runPolicyCmd runs `fleet policy args...` and returns its output and
// exit status.
func runPolicyCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&out)
	cmd, _, err := rootCmd.Find([]string{"policy"})
	if err != nil {
		t.Fatal(err)
	}
	for name, def := range map[string]string{"yaml": "false", "file": ""} {
		if err := cmd.PersistentFlags().Set(name, def); err != nil {
			t.Fatal(err)
		}
	}
	rootCmd.SetArgs(append([]string{"policy"}, args...))
	defer rootCmd.SetArgs(nil)
	err = rootCmd.ExecuteContext(context.Background())
	if err != nil {
		out.WriteString(err.Error())
	}
	return out.String(), exitStatus(err)
}

func TestPolicyCommand(t *testing.T) {
	es, err := embedded.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	reg := "--registry=etcd://" + es.Addr()
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := write("v1.yaml", "version: \"1\"\nservice: Hello\nsubsets: [{name: a, version: v1}]\nroutes: [{destinations: [{subset: a, weight: 100}]}]\n")
	v2 := write("v2.json", `{"version":"2","service":"Hello","subsets":[{"name":"a","version":"v1"}],"routes":[{"timeout":"2s","destinations":[{"subset":"a","weight":100}]}]}`)
	bad := write("bad.json", `{"version":"3","service":"Hello","routes":[{"destinations":[{"subset":"nope","weight":90}]}]}`)
	other := write("other.json", `{"version":"1","service":"Other"}`)

	steps := []struct {
		args   []string
		status int
		want   []string
	}{
		{[]string{"validate", v1, v2}, 0, []string{"v1.yaml: ok: service Hello, version 1, 1 subsets, 1 routes"}},
		{[]string{"validate", v1, bad}, 2, []string{`unknown subset "nope"`, "weights sum to 90, want 100", "1 of 2 documents are invalid"}},
		{[]string{"get", "Hello", reg}, 1, []string{"no policy document"}},
		{[]string{"set", "Hello", bad, reg}, 2, []string{"weights sum to 90"}},
		{[]string{"set", "Hello", other, reg}, 2, []string{`policy for service "Other", not "Hello"`}},
		{[]string{"set", "Hello", v1, reg}, 0, []string{"set the policy of Hello to version 1"}},
		{[]string{"get", "Hello", reg, "--yaml"}, 0, []string{"version: \"1\"", "service: Hello"}},
		{[]string{"diff", "Hello", v1, reg}, 0, []string{"no difference"}},
		{[]string{"diff", "Hello", v2, reg}, 1, []string{`-  "version": "1"`, `+  "version": "2"`, `+      "timeout": "2s"`}},
		{[]string{"set", "Hello", v2, reg}, 0, []string{"version 2"}},
		{[]string{"get", "Hello", reg}, 0, []string{`"timeout": "2s"`}},
		{[]string{"set", "Hello", v1, "--file", filepath.Join(dir, "held.yaml")}, 0, []string{"version 1"}},
		{[]string{"get", "Hello", "--file", filepath.Join(dir, "held.yaml")}, 0, []string{`"version": "1"`}},
	}
	for _, st := range steps {
		out, status := runPolicyCmd(t, st.args...)
		if status != st.status {
			t.Fatalf("fleet policy %s: exit %d, want %d\n%s", strings.Join(st.args, " "), status, st.status, out)
		}
		for _, w := range st.want {
			if !strings.Contains(out, w) {
				t.Fatalf("fleet policy %s: output lacks %q:\n%s", strings.Join(st.args, " "), w, out)
			}
		}
	}
}
