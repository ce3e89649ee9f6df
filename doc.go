// Package fleet holds the vocabulary every Fleet package shares: the error
// model (Code, *Error, CodeOf) and the metadata carried with each call
// (Metadata and its context helpers).
//
// The root package imports no other Fleet package, so servers, clients,
// codecs, selectors and registry backends can all depend on it.
//
// Codes follow the numbering of gRPC's status codes (google.golang.org/grpc/codes)
// so they map one to one when Fleet is bridged to other languages; Fleet adds
// ShuttingDown, which such bridges report as Unavailable.
package fleet
