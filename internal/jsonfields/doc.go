// Package jsonfields checks the fields of a JSON argument against the Go
// type it is decoded into, as described by package server/reflection (a
// JSON Schema and the JSON of the type's zero value): an object key the
// type has no field for is unknown, and a field that the zero value
// encodes (so neither an omitempty field nor a pointer) but the JSON
// leaves out is missing. Keys match field names as encoding/json matches
// them: exactly, else ignoring case.
//
// `fleet call` (strict unless --loose) and the gateway's HTTP/JSON route
// use it, so both refuse the same JSON with the same field named.
//
// It imports no Fleet package.
package jsonfields
