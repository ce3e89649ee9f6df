package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetrpc/fleet/bench/peers"
)

// Child subcommand names, the first argument of ChildMain.
const (
	ServerCommand = "bench-server"
	ClientCommand = "bench-client"
)

// ChildMain runs a child process of the benchmark: args[0] is
// ServerCommand, ClientCommand or OverloadCommand, the rest are its flags.
// It returns when the child's work is done; stdin and stdout carry the line
// protocol the parent speaks.
func ChildMain(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("bench: missing child command")
	}
	switch args[0] {
	case ServerCommand:
		return serverMain(args[1:], stdin, stdout)
	case ClientCommand:
		return clientMain(args[1:], stdin, stdout)
	case OverloadCommand:
		return overloadMain(args[1:], stdin, stdout)
	}
	return fmt.Errorf("bench: unknown child command %q", args[0])
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func peerByName(name string) (*peers.Peer, error) {
	p := peers.Get(name)
	if p == nil {
		return nil, fmt.Errorf("bench: unknown peer %q (have %s)", name, strings.Join(peers.Names(), ", "))
	}
	return p, nil
}

// serverMain serves one peer. Protocol: it prints "addr HOST:PORT", then
// answers each "stats" line on stdin with "stats CPU_NS RECEIVED"; it shuts
// down when stdin closes, and exits by itself after --max-time.
func serverMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet(ServerCommand, flag.ContinueOnError)
	peer := fs.String("peer", "", "peer to serve")
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	sleep := fs.Duration("sleep", 0, "echo handler sleep")
	maxTime := fs.Duration("max-time", 30*time.Minute, "hard time limit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, err := peerByName(*peer)
	if err != nil {
		return err
	}
	srv, err := p.NewServer(peers.ServerOptions{Sleep: *sleep})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	hard := time.AfterFunc(*maxTime, func() {
		fmt.Fprintf(os.Stderr, "bench-server %s: hard time limit %v reached\n", *peer, *maxTime)
		os.Exit(3)
	})
	defer hard.Stop()

	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "addr %s\n", lis.Addr())
	w.Flush()

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				srv.Close()
				return nil
			}
			switch strings.TrimSpace(line) {
			case "stats":
				fmt.Fprintf(w, "stats %d %d\n", cpuTime(), srv.Received())
				w.Flush()
			case "":
			default:
				fmt.Fprintf(w, "error unknown command %q\n", line)
				w.Flush()
			}
		case err := <-serveErr:
			if err == nil {
				err = errors.New("server stopped")
			}
			return fmt.Errorf("bench-server %s: %w", *peer, err)
		}
	}
}

// clientMain makes --calls sequential Add calls on one long connection
// (scenario 2's client processes). Protocol: after connecting and warming
// up it prints "ready", waits for a "go" line, runs, and prints
// "done CALLS ERRORS WALL_NS CPU_NS FIRST_ERROR".
func clientMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet(ClientCommand, flag.ContinueOnError)
	peer := fs.String("peer", "", "peer to call")
	addr := fs.String("addr", "", "server address")
	calls := fs.Int("calls", 100000, "number of calls")
	warm := fs.Int("warmup", 1000, "warm-up calls")
	limit := fs.Duration("limit", time.Minute, "stop issuing calls after this long")
	maxTime := fs.Duration("max-time", 10*time.Minute, "hard time limit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, err := peerByName(*peer)
	if err != nil {
		return err
	}
	hard := time.AfterFunc(*maxTime, func() {
		fmt.Fprintf(os.Stderr, "bench-client %s: hard time limit %v reached\n", *peer, *maxTime)
		os.Exit(3)
	})
	defer hard.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), *maxTime)
	defer cancel()
	c, err := p.Dial(ctx, *addr, peers.ClientOptions{Conns: 1})
	if err != nil {
		return err
	}
	defer c.Close()
	for i := range *warm {
		if _, err := c.Add(ctx, int32(i), 1); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	w := bufio.NewWriter(stdout)
	fmt.Fprintln(w, "ready")
	w.Flush()
	sc := bufio.NewScanner(stdin)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "go" {
		return errors.New("bench-client: no go")
	}
	cpu0, t0 := cpuTime(), time.Now()
	stop := t0.Add(*limit)
	var n, errs int64
	var first error
	for i := range *calls {
		if i&255 == 0 && time.Now().After(stop) {
			break
		}
		a := int32(i)
		x, err := c.Add(ctx, a, 1)
		if err == nil && x != a+1 {
			err = fmt.Errorf("Add(%d, 1) = %d", a, x)
		}
		if err != nil {
			errs++
			if first == nil {
				first = err
			}
		}
		n++
	}
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	fe := ""
	if first != nil {
		fe = first.Error()
	}
	fmt.Fprintf(w, "done %d %d %d %d %s\n", n, errs, wall.Nanoseconds(), cpu.Nanoseconds(), strconv.Quote(fe))
	return w.Flush()
}

// Launcher starts child processes of the benchmark: it returns a command
// that runs ChildMain with args. The default re-executes os.Executable().
type Launcher func(args ...string) (*exec.Cmd, error)

// SelfLauncher re-executes the running binary; the binary must dispatch its
// ServerCommand, ClientCommand and OverloadCommand subcommands to
// ChildMain.
func SelfLauncher(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, args...), nil
}

// TailBuffer is an io.Writer that keeps the last 4 to 8 KiB written to it
// (a child process's stderr, to quote when the child fails). Its zero value
// is ready to use; it is safe for concurrent use.
type TailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// Write appends p, dropping the oldest bytes past 8 KiB; it never fails.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8192 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-4096:]...)
	}
	return len(p), nil
}

// String returns what is kept, without leading and trailing white space.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// child is a running child process and its line protocol.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *TailBuffer
	waited chan struct{}
	err    error
}

func startChild(launch Launcher, name string, args ...string) (*child, error) {
	cmd, err := launch(args...)
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, stderr: &TailBuffer{}, lines: make(chan string, 16), waited: make(chan struct{})}
	cmd.Stderr = c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.err = cmd.Wait()
		close(c.waited)
	}()
	return c, nil
}

// readLine returns the child's next stdout line, waiting at most d.
func (c *child) readLine(d time.Duration) (string, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.waited
			return "", c.failure("exited")
		}
		return line, nil
	case <-t.C:
		return "", c.failure(fmt.Sprintf("no answer within %v", d))
	}
}

func (c *child) failure(what string) error {
	msg := fmt.Sprintf("%s: %s", c.name, what)
	if c.err != nil {
		msg += " (" + c.err.Error() + ")"
	}
	if s := c.stderr.String(); s != "" {
		msg += ": " + s
	}
	return errors.New(msg)
}

func (c *child) send(line string) error {
	_, err := io.WriteString(c.stdin, line+"\n")
	return err
}

// stop closes the child's stdin and waits for it to exit, killing it after
// a grace period.
func (c *child) stop() {
	c.stdin.Close()
	select {
	case <-c.waited:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.waited
	}
}

// serverProc is a bench-server child.
type serverProc struct {
	*child
	addr string
}

func startServer(launch Launcher, peer string, sleep, maxTime time.Duration) (*serverProc, error) {
	c, addr, err := startListener(launch, "bench-server "+peer, ServerCommand,
		"--peer", peer, "--listen", "127.0.0.1:0", "--sleep", sleep.String(), "--max-time", maxTime.String())
	if err != nil {
		return nil, err
	}
	return &serverProc{child: c, addr: addr}, nil
}

// startListener starts a child that serves, and returns it with the
// address its first line ("addr HOST:PORT") gives.
func startListener(launch Launcher, name string, args ...string) (*child, string, error) {
	c, err := startChild(launch, name, args...)
	if err != nil {
		return nil, "", err
	}
	line, err := c.readLine(30 * time.Second)
	if err != nil {
		c.stop()
		return nil, "", err
	}
	addr, ok := strings.CutPrefix(line, "addr ")
	if !ok {
		c.stop()
		return nil, "", c.failure("unexpected first line " + strconv.Quote(line))
	}
	return c, addr, nil
}

// stats returns the server's CPU time and received log entries so far.
func (s *serverProc) stats() (cpu time.Duration, received int64, err error) {
	if err := s.send("stats"); err != nil {
		return 0, 0, s.failure("stats: " + err.Error())
	}
	line, err := s.readLine(10 * time.Second)
	if err != nil {
		return 0, 0, err
	}
	var ns int64
	if _, err := fmt.Sscanf(line, "stats %d %d", &ns, &received); err != nil {
		return 0, 0, s.failure("bad stats line " + strconv.Quote(line))
	}
	return time.Duration(ns), received, nil
}
