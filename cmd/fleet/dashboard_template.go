package main

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fleetrpc/fleet/server/reflection"
)

// argsTemplate returns the JSON template of a method's argument type as
// fleet describe prints it, indented: for a protobuf message the protojson
// of protoTemplate (every field at its zero value, accepted as it is),
// for any other type reflection's zero-value Example, "{}" when it has
// none. It fails only when the reflected descriptor does not build.
func argsTemplate(t reflection.TypeInfo) (json.RawMessage, error) {
	var raw []byte
	if t.Protobuf != "" {
		md, err := messageDescriptor(t)
		if err != nil {
			return nil, err
		}
		if raw, err = (protojson.MarshalOptions{EmitUnpopulated: true}).Marshal(protoTemplate(md)); err != nil {
			return nil, err
		}
	} else {
		raw = t.Example
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
