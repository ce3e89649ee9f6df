// Package fleet holds the vocabulary every Fleet package shares: the error
// model (Code, *Error, CodeOf) and the metadata carried with each call
// (Metadata and its context helpers).
//
// # Owns and imports
//
// The root package owns the error model and the call metadata, nothing
// else. It must not import any other Fleet package except internal/ctxkey
// (context key types shared with server and client, no code), so servers,
// clients, codecs, selectors and registry backends can all depend on it.
// TestPackageImports checks this rule and the rule each package's doc.go
// states.
//
// Codes follow the numbering of gRPC's status codes (google.golang.org/grpc/codes)
// so they map one to one when Fleet is bridged to other languages; Fleet adds
// ShuttingDown, which such bridges report as Unavailable.
package fleet
