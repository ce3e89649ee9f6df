package codec

// BudgetUnmarshaler is implemented by codecs that can charge the memory
// decoding makes to a budget as they make it. Server.Invoke (the gateway's
// gRPC, HTTP/JSON and JSON-RPC 2.0 routes) uses it when the call's codec
// has it, with charge reserving from the server's memory budget
// (server.WithMaxPendingBytes) until the call ends; other callers may use
// Unmarshal.
type BudgetUnmarshaler interface {
	// UnmarshalBudget decodes data into v as Unmarshal does, first
	// calling charge with the bytes it is about to allocate, in bytes
	// (before it allocates them; one call may cover several allocations,
	// and a codec that cannot count its allocations charges an estimate
	// up front, which its doc states). When charge returns an error,
	// UnmarshalBudget stops at once and returns that error unchanged
	// (callers compare it, and it carries the refusal's fleet.Code);
	// v may then be partly filled. It must not retain data or charge.
	UnmarshalBudget(data []byte, v any, charge func(n int64) error) error
}
