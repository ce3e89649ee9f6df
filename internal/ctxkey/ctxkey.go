// Package ctxkey holds the context keys that the root package shares with
// the server and client packages: the key under which a server stores a
// call's *fleet.CallInfo and the key under which a caller asks for the
// response metadata (*fleet.Metadata).
//
// The keys are unexported from the public API so that only Fleet itself
// can attach these values; users go through fleet.CallInfoFrom,
// fleet.WithResponseMetadata and the other helpers of the root package.
//
// This package owns nothing but the key types. It must not import any
// other package (not even the root package, which imports it).
package ctxkey

// CallInfo is the context key of a call's *fleet.CallInfo. A server's
// handler context answers Value(CallInfo{}) with the call's *fleet.CallInfo.
type CallInfo struct{}

// ResponseSink is the context key of the *fleet.Metadata into which a
// client stores the response metadata of the next call.
type ResponseSink struct{}
