package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/server/admin"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/static"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// adminGateway serves a gateway for a server WithAdmin that publishes
// Arith in an in-memory registry, with the given server options; it
// returns the address and the registry's record of Arith.
func adminGateway(t *testing.T, sopts ...server.Option) (string, func() registry.Instance) {
	t.Helper()
	srv := server.New(append([]server.Option{server.WithLogger(discard())}, sopts...)...)
	if err := admin.Register(srv, admin.Config{Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(demo.Arith{}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, gateway.WithLogger(discard()))
	addr := serveGateway(t, g)
	table, err := static.NewTable(static.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Publish(ctx, table.Registrar(), registry.Instance{Service: "Arith", Addr: addr}, server.PublishConfig{}); err != nil {
		t.Fatal(err)
	}
	record := func() registry.Instance {
		list, err := table.Discovery().Instances(ctx, "Arith")
		if err != nil || len(list) != 1 {
			t.Fatalf("registry: %v %v", list, err)
		}
		return list[0]
	}
	return addr, record
}

// TestBrowserRequestsRefused sends, on the native port, what a web page
// can make a browser send: the HTTP/JSON and JSON-RPC routes refuse them
// before any handler runs, and the registry record does not change.
func TestBrowserRequestsRefused(t *testing.T) {
	addr, record := adminGateway(t)
	before := record()
	steer := `{"service":"Arith","state":"draining"}`
	rpc := `{"jsonrpc":"2.0","id":1,"method":"fleet.Admin.Steer","params":{"service":"Arith","weight":7}}`
	evil := map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	for _, c := range []struct {
		name, path, body string
		hdr              map[string]string
		want             int
	}{
		{"text/plain", "/fleet.Admin/Steer", steer, with(evil, "Content-Type", "text/plain"), 415},
		{"form", "/fleet.Admin/Steer", steer, with(evil, "Content-Type", "application/x-www-form-urlencoded"), 415},
		{"multipart", "/fleet.Admin/Steer", steer, with(evil, "Content-Type", "multipart/form-data; boundary=x"), 415},
		{"no type", "/fleet.Admin/Steer", steer, with(evil, "Content-Type", ""), 415},
		{"json-rpc text/plain", "/", rpc, with(evil, "Content-Type", "text/plain"), 415},
		{"json-rpc at /jsonrpc", "/jsonrpc", rpc, with(evil, "Content-Type", "text/plain;charset=UTF-8"), 415},
		{"cross-site json", "/Arith/Add", `{"A":1,"B":2}`, with(evil, "Content-Type", "application/json"), 403},
		{"same-site json", "/Arith/Add", `{"A":1,"B":2}`, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}, 403},
		{"foreign origin json", "/Arith/Add", `{"A":1,"B":2}`, map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403},
		{"admin without server auth", "/fleet.Admin/Steer", steer, map[string]string{"Content-Type": "application/json"}, 404},
		{"non-browser json", "/Arith/Add", `{"A":1,"B":2}`, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.hdr {
				if v == "" {
					req.Header.Del(k)
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, c.want, b)
			}
			if c.want == http.StatusUnsupportedMediaType && (resp.Header.Get("Accept-Post") == "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain")) {
				t.Errorf("415 with Accept-Post %q, Content-Type %q, want a list and text/plain", resp.Header.Get("Accept-Post"), resp.Header.Get("Content-Type"))
			}
		})
	}
	// JSON-RPC with the right content type: fleet.Admin is not a method
	// over HTTP without server auth.
	resp, b := post(t, http.DefaultClient, "http://"+addr+"/", rpc, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"code":-32601`) {
		t.Errorf("JSON-RPC fleet.Admin.Steer: %d %s, want method not found", resp.StatusCode, b)
	}
	// The preflight a page needs for a JSON request fails: no CORS.
	req, _ := http.NewRequest(http.MethodOptions, "http://"+addr+"/fleet.Admin/Steer", nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight answered %d with Access-Control-Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	if after := record(); after.State != before.State || after.Weight != before.Weight {
		t.Errorf("registry record changed: %+v -> %+v", before, after)
	}
}

// TestAdminOverHTTPWithAuth: with an auth function, fleet.Admin is served
// over HTTP/JSON to a caller with the token, refused without it.
func TestAdminOverHTTPWithAuth(t *testing.T) {
	auth := server.WithAuth(func(_ context.Context, _ *fleet.CallInfo, token string) error {
		if token != "s3cret" {
			return errors.New("bad token")
		}
		return nil
	})
	addr, record := adminGateway(t, auth)
	steer := `{"service":"Arith","weight":7}`
	if resp, b := post(t, http.DefaultClient, "http://"+addr+"/fleet.Admin/Steer", steer, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without token: %d %s", resp.StatusCode, b)
	}
	if got := record().Weight; got == 7 {
		t.Fatal("steered without the token")
	}
	if resp, b := post(t, http.DefaultClient, "http://"+addr+"/fleet.Admin/Steer", steer, map[string]string{"Authorization": "s3cret"}); resp.StatusCode != 200 {
		t.Fatalf("with token: %d %s", resp.StatusCode, b)
	}
	if got := record().Weight; got != 7 {
		t.Errorf("weight %d after Steer, want 7", got)
	}
}

// TestIntrospectionUnderAuth: with an auth function, gRPC reflection and
// per-service health need the token; the whole server's liveness stays
// open unless WithOpenLiveness(false).
func TestIntrospectionUnderAuth(t *testing.T) {
	auth := server.WithAuth(func(_ context.Context, _ *fleet.CallInfo, token string) error {
		if token != "s3cret" {
			return errors.New("bad token")
		}
		return nil
	})
	for _, open := range []bool{true, false} {
		t.Run(fmt.Sprintf("open-liveness=%v", open), func(t *testing.T) {
			_, addr := start(t, []server.Option{auth}, gateway.WithOpenLiveness(open))
			cc := grpcConn(t, addr)
			hc := healthpb.NewHealthClient(cc)
			ctx := context.Background()
			authed := metadata.AppendToOutgoingContext(ctx, "authorization", "s3cret")

			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			if open && err != nil {
				t.Errorf("liveness without token: %v", err)
			}
			if !open && status.Code(err) != codes.Unauthenticated {
				t.Errorf("closed liveness without token: %v, want Unauthenticated", err)
			}
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "Arith"}); status.Code(err) != codes.Unauthenticated {
				t.Errorf("per-service health without token: %v, want Unauthenticated", err)
			}
			if r, err := hc.Check(authed, &healthpb.HealthCheckRequest{Service: "Arith"}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("per-service health with token: %v %v", r, err)
			}

			list := func(ctx context.Context) error {
				st, err := reflectv1.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
				if err != nil {
					return err
				}
				// A stream the server already ended gives io.EOF on
				// Send; its status comes with Recv.
				if err := st.Send(&reflectv1.ServerReflectionRequest{MessageRequest: &reflectv1.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
					return err
				}
				_, err = st.Recv()
				return err
			}
			if err := list(ctx); status.Code(err) != codes.Unauthenticated {
				t.Errorf("reflection without token: %v, want Unauthenticated", err)
			}
			if err := list(authed); err != nil {
				t.Errorf("reflection with token: %v", err)
			}
		})
	}
}

// TestSlowBodies opens 300 HTTP/1.1 connections that send complete
// headers announcing a 100-byte body, then one body byte every 200 ms:
// the body deadline (WithBodyTimeout, 1 s here; 20 s by default) closes
// every one, while a good client's calls succeed.
func TestSlowBodies(t *testing.T) {
	_, addr := start(t, nil, gateway.WithBodyTimeout(time.Second))
	const conns = 300
	var closed atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(30 * time.Second)
	for range conns {
		wg.Go(func() {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			fmt.Fprintf(nc, "POST /Arith/Add HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", addr)
			gone := make(chan struct{})
			go func() {
				defer close(gone)
				br := bufio.NewReader(nc)
				resp, err := http.ReadResponse(br, nil)
				if err == nil {
					resp.Body.Close()
					_, err = br.ReadByte() // then the connection is closed
				}
			}()
			for time.Now().Before(deadline) {
				select {
				case <-gone:
					closed.Add(1)
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := nc.Write([]byte{' '}); err != nil {
					<-gone
					closed.Add(1)
					return
				}
			}
		})
	}
	// A good client meanwhile.
	hc := &http.Client{Timeout: 20 * time.Second}
	for range 5 {
		if resp, b := post(t, hc, "http://"+addr+"/Arith/Add", `{"A":1,"B":2}`, nil); resp.StatusCode != 200 || string(b) != "3" {
			t.Errorf("good client: %d %s", resp.StatusCode, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	if closed.Load() != conns {
		t.Errorf("%d of %d slow-body connections closed within 30 s", closed.Load(), conns)
	}
}
