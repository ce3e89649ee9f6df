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
