//go:build !linux || fleet_noraw

package transport

import "net"

// rawSupported reports whether Raw wraps connections on this build.
const rawSupported = false

// Raw returns c: reading and writing with raw system calls is for Linux
// (rawio_linux.go); the build tag fleet_noraw turns it off there too.
func Raw(c net.Conn) net.Conn { return c }

// SetSerial does nothing: Raw wraps nothing on this build.
func SetSerial(c net.Conn, on bool) {}
