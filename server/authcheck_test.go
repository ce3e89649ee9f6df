package server_test

import (
	"context"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	if on, err := server.New().Authenticate(ctx, "S", "M", nil); on || err != nil {
		t.Fatalf("without auth: %v %v", on, err)
	}
	var seen struct{ Service, Method string }
	srv := server.New(server.WithAuth(func(_ context.Context, ci *fleet.CallInfo, token string) error {
		seen.Service, seen.Method = ci.Service, ci.Method
		if token != "ok" {
			return fleet.NewError(fleet.PermissionDenied, "no")
		}
		return nil
	}))
	on, err := srv.Authenticate(ctx, "S", "M", fleet.Metadata{fleet.AuthKey: "bad"})
	if !on || fleet.CodeOf(err) != fleet.PermissionDenied || seen.Service != "S" || seen.Method != "M" {
		t.Fatalf("bad token: %v %v %+v", on, err, seen)
	}
	if on, err := srv.Authenticate(ctx, "S", "M", fleet.Metadata{fleet.AuthKey: "ok"}); !on || err != nil {
		t.Fatalf("good token: %v %v", on, err)
	}
}
