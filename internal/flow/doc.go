// Package flow holds the per-stream credit-window flow control shared by
// Fleet's server and client: Credit on the sending side, Inbox on the
// receiving side. The scheme is HTTP/2's (RFC 9113 §5.2) counted in bytes
// of message payload, with one difference: a message larger than the
// whole window may be sent when no byte is outstanding, so a window
// smaller than a message cannot deadlock a stream.
package flow
