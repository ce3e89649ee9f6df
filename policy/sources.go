package policy

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
)

// Memory is a Store held in memory, for tests and for programs that set
// their policy themselves. The zero value is empty and ready. Safe for
// concurrent use.
type Memory struct {
	mu       sync.Mutex
	docs     map[string][]byte
	watchers map[string][]chan struct{}
}

// Get returns service's document, or ErrNoPolicy.
func (m *Memory) Get(_ context.Context, service string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.docs[service]
	if !ok {
		return nil, ErrNoPolicy
	}
	return bytes.Clone(d), nil
}

// Put replaces service's document (nil deletes it) and wakes its watches.
func (m *Memory) Put(_ context.Context, service string, doc []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.docs == nil {
		m.docs = map[string][]byte{}
	}
	if doc == nil {
		delete(m.docs, service)
	} else {
		m.docs[service] = bytes.Clone(doc)
	}
	for _, ch := range m.watchers[service] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// Watch delivers service's document now and after each Put.
func (m *Memory) Watch(ctx context.Context, service string) (<-chan []byte, error) {
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	m.mu.Lock()
	if m.watchers == nil {
		m.watchers = map[string][]chan struct{}{}
	}
	m.watchers[service] = append(m.watchers[service], wake)
	m.mu.Unlock()
	out := make(chan []byte)
	go func() {
		defer close(out)
		defer func() {
			m.mu.Lock()
			ws := m.watchers[service]
			for i, ch := range ws {
				if ch == wake {
					m.watchers[service] = append(ws[:i:i], ws[i+1:]...)
					break
				}
			}
			m.mu.Unlock()
		}()
		for {
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
			d, _ := m.Get(ctx, service)
			select {
			case out <- d:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// File is a Store over one file holding one service's policy document
// (JSON or YAML), watched by polling its content: a change is delivered
// within Interval. A missing or unreadable file delivers nothing (the
// watcher keeps its last good policy), so an editor replacing the file
// does not remove the policy; delete the policy by writing an empty file.
// Put writes a temporary file and renames it over Path, so a watcher
// never reads half a document.
type File struct {
	// Path is the file's path.
	Path string
	// Interval is how often the file is read. Default 1s.
	Interval time.Duration
}

// Get returns the file's content, or ErrNoPolicy when it is missing or
// empty. The service is not checked here; the Watcher checks it.
func (f File) Get(_ context.Context, _ string) ([]byte, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(bytes.TrimSpace(b)) == 0) {
		return nil, ErrNoPolicy
	}
	if err != nil {
		return nil, fleet.Errorf(fleet.Unavailable, "policy: read %s: %w", f.Path, err)
	}
	return b, nil
}

// Put writes doc to the file atomically (nil writes an empty file).
func (f File) Put(_ context.Context, _ string, doc []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".policy-*")
	if err != nil {
		return fleet.Errorf(fleet.Unavailable, "policy: write %s: %w", f.Path, err)
	}
	_, werr := tmp.Write(doc)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fleet.Errorf(fleet.Unavailable, "policy: write %s: %w", f.Path, err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		os.Remove(tmp.Name())
		return fleet.Errorf(fleet.Unavailable, "policy: write %s: %w", f.Path, err)
	}
	return nil
}

// Watch delivers the file's content now (when readable) and each time it
// changes.
func (f File) Watch(ctx context.Context, _ string) (<-chan []byte, error) {
	every := f.Interval
	if every <= 0 {
		every = time.Second
	}
	out := make(chan []byte)
	go func() {
		defer close(out)
		var last []byte
		first := true
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			b, err := os.ReadFile(f.Path)
			if err == nil && (first || !bytes.Equal(b, last)) {
				first, last = false, b
				select {
				case out <- bytes.TrimSpace(b):
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
