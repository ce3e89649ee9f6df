package gateway

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/server/reflection"
)

// OpenAPIConfig names the document OpenAPI writes. The zero value works.
type OpenAPIConfig struct {
	// Title is info.title. Default "Fleet HTTP/JSON API".
	Title string
	// Version is info.version, the version of the API described.
	// Default "1".
	Version string
	// ServerURL, when set, is the document's one server
	// ("http://127.0.0.1:8972"). Default none: paths are relative to
	// wherever the document was fetched from.
	ServerURL string
}

// OpenAPI writes an OpenAPI 3.1 document (JSON) for the HTTP/JSON routes
// of methods (as fleet.Reflection.Describe gives them): for each method a
// path POST /{Service}/{Method} taking and returning application/json,
// with
//
//   - the request schema: for a Go type, the JSON Schema reflection
//     derives from it, with "required" and "additionalProperties": false
//     as the route's strict field check applies them (see
//     WithLooseJSON); for a protobuf message, its protojson form, built
//     from the reflected descriptors (lowerCamel names, 64-bit integers
//     as strings or numbers, enums by name, well-known types as protojson
//     writes them, proto2 required fields required);
//   - an example request: the zero value;
//   - the reply's schema for 200, for every error status the route
//     answers (400, 401, 403, 404, 405, 413, 429, 499, 500, 501, 503,
//     504) the error body {"code", "status", "message"} (component
//     "fleet.Error"), and for 415 (a body that is not application/json)
//     the Accept-Post header and a text/plain message (component
//     responses "UnsupportedMediaType");
//   - the headers the route reads: Fleet-Timeout-Ms, Authorization.
//
// Go types' $defs and protobuf messages become components.schemas. The
// document's paths and components are sorted, so equal input gives equal
// output. It fails for a protobuf type whose descriptors do not resolve.
func OpenAPI(methods []reflection.MethodInfo, cfg OpenAPIConfig) ([]byte, error) {
	if cfg.Title == "" {
		cfg.Title = "Fleet HTTP/JSON API"
	}
	if cfg.Version == "" {
		cfg.Version = "1"
	}
	b := &openapiBuilder{schemas: map[string]any{}, goNames: map[string]string{}}
	b.schemas["fleet.Error"] = errorSchema()
	paths := map[string]any{}
	for _, m := range methods {
		req, reqEx, err := b.typeSchema(m.Args, true)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", m.Service, m.Name, err)
		}
		rep, _, err := b.typeSchema(m.Reply, false)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", m.Service, m.Name, err)
		}
		errResp := map[string]any{"$ref": "#/components/responses/Error"}
		responses := map[string]any{
			"200": map[string]any{
				"description": "The method's reply.",
				"content":     map[string]any{"application/json": map[string]any{"schema": rep}},
			},
		}
		for _, st := range []string{"400", "401", "403", "404", "405", "413", "429", "499", "500", "501", "503", "504"} {
			responses[st] = errResp
		}
		responses["415"] = map[string]any{"$ref": "#/components/responses/UnsupportedMediaType"}
		media := map[string]any{"schema": req}
		if reqEx != nil {
			media["example"] = reqEx
		}
		paths["/"+m.Service+"/"+m.Name] = map[string]any{
			"post": map[string]any{
				"operationId": operationID(m.Service, m.Name),
				"summary":     m.Service + "." + m.Name,
				"tags":        []string{m.Service},
				"parameters": []any{
					map[string]any{"$ref": "#/components/parameters/Timeout"},
					map[string]any{"$ref": "#/components/parameters/Authorization"},
				},
				"requestBody": map[string]any{
					"description": "The arguments (" + typeLabel(m.Args) + "); an empty body is their zero value.",
					"required":    false,
					"content":     map[string]any{"application/json": media},
				},
				"responses": responses,
			},
		}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   cfg.Title,
			"version": cfg.Version,
			"description": "The HTTP/JSON route of a Fleet gateway: POST /{Service}/{Method} with the JSON " +
				"arguments as the body (Content-Type: application/json), answered with the JSON reply or " +
				"an error body. Request metadata goes in Fleet-Meta-{Key} headers.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": b.schemas,
			"responses": map[string]any{
				"UnsupportedMediaType": map[string]any{
					"description": "The body is not application/json (nor an RPC protocol's content type): Accept-Post lists what the path takes, and the body says why in plain text.",
					"headers": map[string]any{
						"Accept-Post": map[string]any{
							"description": "The content types the path accepts, comma-separated.",
							"schema":      map[string]any{"type": "string"},
						},
					},
					"content": map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}},
				},
				"Error": map[string]any{
					"description": "The call failed: the Fleet (= gRPC) code, its name and the handler's message. The HTTP status follows the code (gateway.HTTPStatus).",
					"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/fleet.Error"}}},
				},
			},
			"parameters": map[string]any{
				"Timeout": map[string]any{
					"name": TimeoutHeader, "in": "header", "required": false,
					"description": "The call's deadline in milliseconds.",
					"schema":      map[string]any{"type": "integer", "minimum": 1},
				},
				"Authorization": map[string]any{
					"name": "Authorization", "in": "header", "required": false,
					"description": "The token the server's auth function checks (metadata key \"authorization\").",
					"schema":      map[string]any{"type": "string"},
				},
			},
		},
	}
	if cfg.ServerURL != "" {
		doc["servers"] = []any{map[string]any{"url": cfg.ServerURL}}
	}
	return json.MarshalIndent(doc, "", "  ")
}

// errorSchema is the JSON body writeError writes.
func errorSchema() map[string]any {
	var names []any
	for c := fleet.Code(0); c <= fleet.ShuttingDown; c++ {
		names = append(names, c.String())
	}
	return map[string]any{
		"type":                 "object",
		"required":             []string{"code", "status", "message"},
		"additionalProperties": false,
		"properties": map[string]any{
			"code":    map[string]any{"type": "integer", "minimum": 0, "maximum": int(fleet.ShuttingDown), "description": "Fleet's numeric code, equal to gRPC's for 0-16."},
			"status":  map[string]any{"type": "string", "enum": names, "description": "The code's name."},
			"message": map[string]any{"type": "string", "description": "The handler's message, intact."},
		},
	}
}

var badComponentChars = regexp.MustCompile(`[^a-zA-Z0-9._-]`)

func operationID(service, method string) string {
	return badComponentChars.ReplaceAllString(service+"_"+method, "_")
}

func typeLabel(t reflection.TypeInfo) string {
	if t.Protobuf != "" {
		return "protobuf " + t.Protobuf
	}
	return "Go " + t.GoType
}

type openapiBuilder struct {
	schemas map[string]any
	goNames map[string]string // Go type string -> component name
}

// typeSchema returns the schema of t (a $ref to a component) and, for a
// request, an example (the zero value).
func (b *openapiBuilder) typeSchema(t reflection.TypeInfo, request bool) (schema, example any, err error) {
	if t.Protobuf != "" {
		var set descriptorpb.FileDescriptorSet
		if err := proto.Unmarshal(t.FileDescriptorSet, &set); err != nil {
			return nil, nil, err
		}
		files, err := protodesc.NewFiles(&set)
		if err != nil {
			return nil, nil, err
		}
		d, err := files.FindDescriptorByName(protoreflect.FullName(t.Protobuf))
		if err != nil {
			return nil, nil, err
		}
		md, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			return nil, nil, fmt.Errorf("%s is not a message", t.Protobuf)
		}
		s := b.protoMessage(md)
		if request {
			example = protoExample(md, map[protoreflect.FullName]bool{})
		}
		return s, example, nil
	}
	name, ok := b.goNames[t.GoType]
	if !ok {
		name = b.uniqueName("go." + badComponentChars.ReplaceAllString(t.GoType, "_"))
		b.goNames[t.GoType] = name
		var root map[string]any
		if len(t.JSONSchema) == 0 || json.Unmarshal(t.JSONSchema, &root) != nil {
			root = map[string]any{}
		}
		var zero any
		if len(t.Example) > 0 {
			_ = json.Unmarshal(t.Example, &zero)
		}
		delete(root, "$schema")
		defs, _ := root["$defs"].(map[string]any)
		delete(root, "$defs")
		refs := map[string]string{}
		for k := range defs {
			refs["#/$defs/"+k] = "#/components/schemas/" + b.uniqueName(name+"."+badComponentChars.ReplaceAllString(k, "_"))
		}
		for k, v := range defs {
			rewriteRefs(v, refs)
			strictObjects(v, nil)
			b.schemas[strings.TrimPrefix(refs["#/$defs/"+k], "#/components/schemas/")] = v
		}
		rewriteRefs(root, refs)
		strictObjects(root, zero)
		b.schemas[name] = root
	}
	if request && len(t.Example) > 0 {
		var ex any
		if json.Unmarshal(t.Example, &ex) == nil {
			example = ex
		}
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}, example, nil
}

func (b *openapiBuilder) uniqueName(base string) string {
	name := base
	for i := 2; b.schemas[name] != nil; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	b.schemas[name] = true // reserved until set
	return name
}

// rewriteRefs replaces "$ref" values found in refs, throughout v.
func rewriteRefs(v any, refs map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["$ref"].(string); ok && refs[r] != "" {
			x["$ref"] = refs[r]
		}
		for _, e := range x {
			rewriteRefs(e, refs)
		}
	case []any:
		for _, e := range x {
			rewriteRefs(e, refs)
		}
	}
}

// strictObjects adds to every object schema with properties what the
// strict field check enforces: no other properties, and "required" for
// the fields whose zero value (zero, the JSON of the type's zero value at
// this place, nil where unknown) is not null.
func strictObjects(v any, zero any) {
	switch x := v.(type) {
	case map[string]any:
		props, _ := x["properties"].(map[string]any)
		if props != nil {
			x["additionalProperties"] = false
			zobj, _ := zero.(map[string]any)
			var req []string
			for name, p := range props {
				var zf any
				if zobj != nil {
					zf = zobj[name]
					if zf != nil {
						req = append(req, name)
					}
				}
				strictObjects(p, zf)
			}
			if len(req) > 0 {
				sort.Strings(req)
				x["required"] = req
			}
			return
		}
		for k, e := range x {
			if k == "items" || k == "additionalProperties" {
				strictObjects(e, nil)
			}
		}
	}
}

// protoMessage returns a $ref to md's schema in protojson form, adding it
// (and the messages it uses) to the components.
func (b *openapiBuilder) protoMessage(md protoreflect.MessageDescriptor) map[string]any {
	name := string(md.FullName())
	ref := map[string]any{"$ref": "#/components/schemas/" + name}
	if wk := wellKnown(md); wk != nil {
		return wk
	}
	if b.schemas[name] != nil {
		return ref
	}
	s := map[string]any{"type": "object", "title": name}
	b.schemas[name] = s
	props := map[string]any{}
	var req []string
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		var fs map[string]any
		switch {
		case fd.IsMap():
			fs = map[string]any{"type": "object", "additionalProperties": b.protoField(fd.MapValue())}
		case fd.IsList():
			fs = map[string]any{"type": "array", "items": b.protoField(fd)}
		default:
			fs = b.protoField(fd)
		}
		props[fd.JSONName()] = fs
		if fd.Cardinality() == protoreflect.Required {
			req = append(req, fd.JSONName())
		}
	}
	s["properties"] = props
	if len(req) > 0 {
		sort.Strings(req)
		s["required"] = req
	}
	return ref
}

// protoField is the schema of one value of fd, as protojson writes it.
func (b *openapiBuilder) protoField(fd protoreflect.FieldDescriptor) map[string]any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return map[string]any{"type": "boolean"}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return map[string]any{"type": "integer", "format": "int32"}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return map[string]any{"type": "integer", "format": "uint32", "minimum": 0}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return map[string]any{"type": []string{"string", "integer"}, "format": "int64", "description": "a decimal string (protojson writes it so) or a number"}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return map[string]any{"type": []string{"string", "integer"}, "format": "uint64", "description": "a decimal string (protojson writes it so) or a number"}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return map[string]any{"type": []string{"number", "string"}, "description": "a number, or \"NaN\", \"Infinity\", \"-Infinity\""}
	case protoreflect.StringKind:
		return map[string]any{"type": "string"}
	case protoreflect.BytesKind:
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	case protoreflect.EnumKind:
		var names []any
		vals := fd.Enum().Values()
		for i := 0; i < vals.Len(); i++ {
			names = append(names, string(vals.Get(i).Name()))
		}
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return map[string]any{"type": "null"}
		}
		return map[string]any{"type": []string{"string", "integer"}, "enum": append(names, intEnumValues(fd.Enum())...)}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return b.protoMessage(fd.Message())
	}
	return map[string]any{}
}

func intEnumValues(ed protoreflect.EnumDescriptor) []any {
	var out []any
	vals := ed.Values()
	for i := 0; i < vals.Len(); i++ {
		out = append(out, int(vals.Get(i).Number()))
	}
	return out
}

// wellKnown is the schema of a well-known type with a special protojson
// form; nil for any other message.
func wellKnown(md protoreflect.MessageDescriptor) map[string]any {
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		return map[string]any{"type": "string", "format": "date-time"}
	case "google.protobuf.Duration":
		return map[string]any{"type": "string", "pattern": `^-?[0-9]+(\.[0-9]+)?s$`}
	case "google.protobuf.FieldMask":
		return map[string]any{"type": "string"}
	case "google.protobuf.Struct":
		return map[string]any{"type": "object"}
	case "google.protobuf.ListValue":
		return map[string]any{"type": "array"}
	case "google.protobuf.Value", "google.protobuf.Any":
		return map[string]any{}
	case "google.protobuf.Empty":
		return map[string]any{"type": "object", "additionalProperties": false}
	case "google.protobuf.BoolValue":
		return map[string]any{"type": "boolean"}
	case "google.protobuf.StringValue":
		return map[string]any{"type": "string"}
	case "google.protobuf.BytesValue":
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	case "google.protobuf.Int32Value", "google.protobuf.UInt32Value":
		return map[string]any{"type": "integer"}
	case "google.protobuf.Int64Value", "google.protobuf.UInt64Value":
		return map[string]any{"type": []string{"string", "integer"}}
	case "google.protobuf.FloatValue", "google.protobuf.DoubleValue":
		return map[string]any{"type": []string{"number", "string"}}
	}
	return nil
}

// protoExample is md's zero value in protojson form with every singular
// scalar field present (so proto2 required fields are set) and nested
// messages filled the same way once per path (recursion stops at a
// message already open).
func protoExample(md protoreflect.MessageDescriptor, open map[protoreflect.FullName]bool) map[string]any {
	out := map[string]any{}
	if open[md.FullName()] || wellKnown(md) != nil {
		return out
	}
	open[md.FullName()] = true
	defer delete(open, md.FullName())
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.IsList() || fd.IsMap() || fd.ContainingOneof() != nil && !fd.HasOptionalKeyword() {
			continue
		}
		switch fd.Kind() {
		case protoreflect.BoolKind:
			out[fd.JSONName()] = false
		case protoreflect.StringKind, protoreflect.BytesKind:
			out[fd.JSONName()] = ""
		case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			out[fd.JSONName()] = "0"
		case protoreflect.EnumKind:
			if fd.Enum().FullName() != "google.protobuf.NullValue" {
				out[fd.JSONName()] = string(fd.Enum().Values().Get(0).Name())
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			if wellKnown(fd.Message()) == nil && !open[fd.Message().FullName()] {
				out[fd.JSONName()] = protoExample(fd.Message(), open)
			}
		default:
			out[fd.JSONName()] = 0
		}
	}
	return out
}

// OpenAPI writes the document of OpenAPI for every unary method the
// gateway's server serves over HTTP/JSON now (fleet.Admin only when the
// server has an auth function), described as fleet.Reflection describes
// them (reflection.DescribeType), services and methods sorted by name.
// It reads the server's registrations on each call, so it may be served
// as it is (prometheus.AdminConfig.OpenAPI). Safe for concurrent use.
func (g *Gateway) OpenAPI(cfg OpenAPIConfig) ([]byte, error) {
	svcs := g.srv.Services()
	names := make([]string, 0, len(svcs))
	for n := range svcs {
		if !g.hiddenOverHTTP(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var methods []reflection.MethodInfo
	for _, svc := range names {
		ms := append([]string(nil), svcs[svc]...)
		sort.Strings(ms)
		for _, m := range ms {
			d, ok := g.srv.Method(svc, m)
			if !ok {
				continue
			}
			methods = append(methods, reflection.MethodInfo{
				Service: svc, Name: m,
				Args: reflection.DescribeType(d.ArgType), Reply: reflection.DescribeType(d.ReplyType),
			})
		}
	}
	return OpenAPI(methods, cfg)
}
