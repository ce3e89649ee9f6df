package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
)

// events records an XClient's governance events.
type events struct {
	mu       sync.Mutex
	servers  []string
	picks    map[string]int
	retries  int
	backups  int
	breakers []string
}

func (e *events) OnServers(_ string, s []string) {
	e.mu.Lock()
	e.servers = append([]string(nil), s...)
	e.mu.Unlock()
}
func (e *events) OnPick(_, server string) { e.mu.Lock(); e.picks[server]++; e.mu.Unlock() }
func (e *events) OnRetry(_, _ string)     { e.mu.Lock(); e.retries++; e.mu.Unlock() }
func (e *events) OnBackup(_, _ string)    { e.mu.Lock(); e.backups++; e.mu.Unlock() }
func (e *events) OnBreakerState(_, server string, from, to client.BreakerState) {
	e.mu.Lock()
	e.breakers = append(e.breakers, from.String()+">"+to.String())
	e.mu.Unlock()
}

// TestObserverFailover: one call whose first attempt fails with
// Unavailable reports both servers, two picks of different servers, one
// retry, and (with a breaker that trips on one failure) closed>open for
// the failing server.
func TestObserverFailover(t *testing.T) {
	var calls atomic.Int64
	fail := func(n *node, ctx context.Context) error {
		if calls.Add(1) == 1 {
			return fleet.NewError(fleet.Unavailable, "busy")
		}
		return nil
	}
	a, b := startNode(t, "a", fail), startNode(t, "b", fail)
	tab, _ := newTable(t, a, b)
	ev := &events{picks: map[string]int{}}
	x := newX(t, tab, client.XOptions(client.WithObserver(ev), client.WithFailMode(client.Failover), client.WithBreaker(client.BreakerSettings{
		Failures: 1, OpenFor: time.Minute, Probes: 1,
	})))
	var rep Rep
	if err := x.Call(context.Background(), "Do", &Req{}, &rep); err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.servers) != 2 {
		t.Errorf("OnServers: %v, want 2 servers", ev.servers)
	}
	if len(ev.picks) != 2 || ev.picks[ev.servers[0]] != 1 || ev.picks[ev.servers[1]] != 1 {
		t.Errorf("picks %v, want one each", ev.picks)
	}
	if ev.retries != 1 || ev.backups != 0 {
		t.Errorf("retries %d backups %d, want 1 and 0", ev.retries, ev.backups)
	}
	if len(ev.breakers) != 1 || ev.breakers[0] != "closed>open" {
		t.Errorf("breaker changes %v, want [closed>open]", ev.breakers)
	}
}

// TestObserverBackup: a Failbackup call whose first server is slow sends
// a backup request, reported once.
func TestObserverBackup(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	slowFirst := func(n *node, ctx context.Context) error {
		if calls.Add(1) == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	defer close(release)
	a, b := startNode(t, "a", slowFirst), startNode(t, "b", slowFirst)
	tab, _ := newTable(t, a, b)
	ev := &events{picks: map[string]int{}}
	x := newX(t, tab, client.WithObserver(ev), client.WithFailMode(client.Failbackup), client.WithBackupDelay(time.Millisecond))
	var rep Rep
	if err := x.Call(context.Background(), "Do", &Req{}, &rep); err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.backups != 1 || ev.retries != 0 {
		t.Errorf("backups %d retries %d, want 1 and 0", ev.backups, ev.retries)
	}
}
