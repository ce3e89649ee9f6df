package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"github.com/fleetrpc/fleet/server/admin"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server"
)

// tokenEnv is the environment variable that holds the auth token the
// commands send to servers when --token is not given; fleet demo --serve
// uses it as its admin token when it is set.
const tokenEnv = "FLEET_TOKEN"

// demoTokenPath is the file fleet demo --serve writes its admin token to
// (mode 0600) and the commands read it from: fleet/demo-token under the
// user's configuration directory ($XDG_CONFIG_HOME, else ~/.config); ""
// when there is none.
func demoTokenPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "fleet", "demo-token")
}

// authToken is the token the commands send to servers: --token, else
// $FLEET_TOKEN, else the contents of --token-file (by default the file
// fleet demo --serve writes, when it exists), else none.
func (f *connFlags) authToken() string {
	if f.token != "" {
		return f.token
	}
	if v := os.Getenv(tokenEnv); v != "" {
		return v
	}
	path := f.tokenFile
	if path == "" {
		path = demoTokenPath()
	}
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// newToken returns 128 random bits in hex.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// adminAuth is the demo servers' auth function: fleet.Admin (which moves
// traffic) needs token; every other service is open, as the demo's
// clients call them without one.
func adminAuth(token string) server.AuthFunc {
	want := []byte(token)
	return func(_ context.Context, info *fleet.CallInfo, got string) error {
		if info.Service != admin.Service {
			return nil
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			return fleet.NewError(fleet.Unauthenticated, "fleet.Admin needs the demo's admin token (fleet demo --serve prints it)")
		}
		return nil
	}
}

// writeTokenFile writes token to path (mode 0600, its directory 0700)
// and returns a function that removes it if it still holds token.
func writeTokenFile(path, token string) (remove func(), err error) {
	if path == "" {
		return func() {}, errors.New("no configuration directory")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return func() {}, err
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return func() {}, err
	}
	return func() {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == token {
			os.Remove(path)
		}
	}, nil
}
