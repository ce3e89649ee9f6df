// Package transporttest is the conformance suite for Fleet transports
// (package transport): Run serves a real Fleet server over a network and
// calls it with a real client over the same network: every call style
// (Call, Go, Send), several codecs and compressors, a large payload,
// graceful shutdown, a server that is closed under a call, and an
// XClient whose registry entry names the network ("kcp@host:port").
// Relay is a UDP relay that drops and delays datagrams, for loss tests of
// the UDP transports.
//
// It imports package testing, so only _test files should import it.
package transporttest
