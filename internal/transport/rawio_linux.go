//go:build linux && !fleet_noraw

package transport

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// rawSupported reports whether Raw wraps connections on this build.
const rawSupported = true

// Raw returns a net.Conn whose Read and Write, while SetSerial has turned
// serial mode on, go to the socket of c, a *net.TCPConn or *net.UnixConn,
// with syscall.RawSyscall inside syscall.RawConn's Read and Write: the
// runtime's poller still waits for the socket (and enforces deadlines)
// exactly as for c.Read and c.Write, but the read and write system calls
// themselves do not go through the runtime's syscall entry. That entry
// wakes the runtime's monitor thread (sysmon) whenever it sleeps because
// every P was idle, which is the state of a process between the calls of
// a serial caller: one futex wake, two context switches and a nanosleep
// per call on each side. With many calls in flight the Ps are busy, sysmon
// is awake anyway, and the plain reads and writes measured faster (1
// connection x 1000 callers), so serial mode is off by default and the
// owner turns it on for a serial caller only. The socket is non-blocking,
// so a raw read or write returns at once (EAGAIN when it would block, and
// the poller then waits). Other connections (TLS, in-memory pipes,
// wrappers) are returned unchanged, as is c when its raw connection is not
// available. Every other method is c's.
//
// Read is for one goroutine at a time (as a connection's read loop
// uses it); Write and SetSerial are safe for concurrent use.
func Raw(c net.Conn) net.Conn {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return c
	}
	r := &rawConn{Conn: c, rc: rc}
	r.readFn, r.writeFn = r.readRaw, r.writeRaw
	return r
}

// ioSync tells the race detector, as package syscall's read and write do,
// that what one goroutine wrote to a socket happens before what another
// reads from it (in-process clients and servers synchronise through their
// sockets). Only touched in race-enabled builds.
var ioSync atomic.Uint64

type rawConn struct {
	net.Conn
	rc     syscall.RawConn
	serial atomic.Bool // read and write with raw system calls

	// The read in progress (one reader at a time).
	readFn func(fd uintptr) bool // r.readRaw, made once
	rbuf   []byte
	rn     int
	rerr   syscall.Errno

	// The write in progress, under wmu.
	wmu     sync.Mutex
	writeFn func(fd uintptr) bool // r.writeRaw, made once
	wbuf    []byte
	wn      int
	werr    syscall.Errno
}

func (r *rawConn) readRaw(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rbuf[0])), uintptr(len(r.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // the poller waits for data
		}
		r.rn, r.rerr = int(n), e
		return true
	}
}

// Read reads into b as net.Conn's Read does: io.EOF at the peer's end.
func (r *rawConn) Read(b []byte) (int, error) {
	if !r.serial.Load() || len(b) == 0 {
		n, err := r.Conn.Read(b)
		if raceEnabled {
			ioSync.Load()
		}
		return n, err
	}
	r.rbuf, r.rn, r.rerr = b, 0, 0
	err := r.rc.Read(r.readFn)
	n, e := r.rn, r.rerr
	r.rbuf = nil
	switch {
	case err != nil:
		return 0, r.opError("read", err)
	case e != 0:
		return 0, r.opError("read", os.NewSyscallError("read", e))
	case n == 0:
		return 0, io.EOF
	}
	if raceEnabled {
		ioSync.Load()
	}
	return n, nil
}

func (r *rawConn) writeRaw(fd uintptr) bool {
	for r.wn < len(r.wbuf) {
		rest := r.wbuf[r.wn:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			r.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // the poller waits for room
		default:
			r.werr = e
			return true
		}
	}
	return true
}

// Write writes all of b, as net.Conn's Write does.
func (r *rawConn) Write(b []byte) (int, error) {
	if !r.serial.Load() || len(b) == 0 {
		if raceEnabled {
			ioSync.Add(1)
		}
		return r.Conn.Write(b)
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if raceEnabled {
		ioSync.Add(1)
	}
	r.wbuf, r.wn, r.werr = b, 0, 0
	err := r.rc.Write(r.writeFn)
	n, e := r.wn, r.werr
	r.wbuf = nil
	switch {
	case err != nil:
		return n, r.opError("write", err)
	case e != 0:
		return n, r.opError("write", os.NewSyscallError("write", e))
	}
	return n, nil
}

// opError wraps err as net's own Read and Write do; an error that is
// already a *net.OpError (RawConn's, for a closed connection or a passed
// deadline) keeps its inner error, so errors.Is(err, net.ErrClosed) and
// os.ErrDeadlineExceeded hold as for the plain connection.
func (r *rawConn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: r.LocalAddr().Network(), Source: r.LocalAddr(), Addr: r.RemoteAddr(), Err: err}
}

// SetSerial turns serial mode (raw reads and writes, see Raw) on or off
// for c, a connection Raw returned; for any other connection it does
// nothing. It only writes when the mode changes, so calling it per call
// is cheap.
func SetSerial(c net.Conn, on bool) {
	if r, ok := c.(*rawConn); ok && r.serial.Load() != on {
		r.serial.Store(on)
	}
}
