package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/demo"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/admin"
)

// TestGatewayOpenAPI: the document lists POST /{Service}/{Method} for
// every method served over HTTP/JSON (fleet.Admin only with auth), with
// the strict request schema of a Go type, the protojson schema of a
// protobuf message, the error body for error statuses, and the plain-text
// answer with Accept-Post for 415.
func TestGatewayOpenAPI(t *testing.T) {
	srv := server.New(server.WithLogger(discard()))
	for _, r := range []any{demo.Arith{}, &demo.Hello{}} {
		if err := srv.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Register(srv, admin.Config{Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	g := gateway.New(srv, gateway.WithLogger(discard()))
	b, err := g.OpenAPI(gateway.OpenAPIConfig{Title: "T", ServerURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct{ Title string }
		Servers []struct{ URL string }
		Paths   map[string]struct {
			Post struct {
				RequestBody struct {
					Content map[string]struct {
						Schema map[string]any
					}
				}
				Responses map[string]map[string]any
			}
		}
		Components struct {
			Schemas map[string]map[string]any
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Title != "T" || len(doc.Servers) != 1 || doc.Servers[0].URL != "http://127.0.0.1:1" {
		t.Fatalf("head: %+v", doc)
	}
	for _, p := range []string{"/Arith/Add", "/Arith/Div", "/Arith/Mul", "/Hello/Say"} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("no path %s", p)
		}
	}
	for p := range doc.Paths {
		if len(p) > 13 && p[:13] == "/fleet.Admin/" {
			t.Errorf("%s documented, but fleet.Admin is not served over HTTP without auth", p)
		}
	}
	add := doc.Paths["/Arith/Add"].Post
	if ref := add.RequestBody.Content["application/json"].Schema["$ref"]; ref != "#/components/schemas/go.demo.Args" {
		t.Fatalf("Arith.Add request schema %v", ref)
	}
	args := doc.Components.Schemas["go.demo.Args"]
	if args["additionalProperties"] != false || len(args["required"].([]any)) != 2 {
		t.Fatalf("go.demo.Args: %v", args)
	}
	if add.Responses["404"]["$ref"] != "#/components/responses/Error" || add.Responses["200"] == nil ||
		add.Responses["415"]["$ref"] != "#/components/responses/UnsupportedMediaType" {
		t.Fatalf("responses: %v", add.Responses)
	}
	msg := doc.Components.Schemas["pb.BenchmarkMessage"]
	props, _ := msg["properties"].(map[string]any)
	if props["field1"] == nil || len(msg["required"].([]any)) == 0 {
		t.Fatalf("pb.BenchmarkMessage: %v", msg)
	}
	if doc.Components.Schemas["fleet.Error"] == nil {
		t.Fatal("no fleet.Error schema")
	}
}
