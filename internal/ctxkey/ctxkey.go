package ctxkey

// CallInfo is the context key of a call's *fleet.CallInfo. A server's
// handler context answers Value(CallInfo{}) with the call's *fleet.CallInfo.
type CallInfo struct{}

// ResponseSink is the context key of the *fleet.Metadata into which a
// client stores the response metadata of the next call.
type ResponseSink struct{}
