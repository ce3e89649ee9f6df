package regutil

import (
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/fleetrpc/fleet/registry"
)

// Sorted is the watched state of one service for backends whose watch
// reports one record at a time (etcd): its instances sorted by Key (ties
// by record key), each read from a record key such as an etcd key. Put and
// Delete cost O(log n) to find the record and one copy of the list to
// change it, instead of collecting and sorting every instance again.
//
// Each change builds a new list and leaves the previous one untouched, so
// a list from List stays valid and unchanged after later changes: it may
// be kept (Cache.Share) and copied for delivery without copying Tags or
// Meta, which the lists share. The zero value is empty and ready. Not safe
// for concurrent use.
type Sorted struct {
	list []registry.Instance // never modified in place
	keys []string            // keys[i] is list[i].Key()
	recs []string            // recs[i] is the record key list[i] was read from
	at   map[string]string   // record key -> the Key of its instance
}

// NewSorted returns the state holding ins[i] read from recs[i], each
// record key once; it sorts once, in O(n log n).
func NewSorted(recs []string, ins []registry.Instance) *Sorted {
	n := len(ins)
	idx := make([]int, n)
	keys := make([]string, n)
	for i := range idx {
		idx[i] = i
		keys[i] = ins[i].Key()
	}
	sort.Slice(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if c := strings.Compare(keys[i], keys[j]); c != 0 {
			return c < 0
		}
		return recs[i] < recs[j]
	})
	s := &Sorted{list: make([]registry.Instance, n), keys: make([]string, n), recs: make([]string, n), at: make(map[string]string, n)}
	for k, i := range idx {
		s.list[k], s.keys[k], s.recs[k] = ins[i], keys[i], recs[i]
		s.at[recs[i]] = keys[i]
	}
	return s
}

// List returns the instances sorted by Key. The caller must not modify
// the list or its instances' Tags and Meta; copy the slice to hand it out.
// It is never nil.
func (s *Sorted) List() []registry.Instance {
	if s.list == nil {
		return []registry.Instance{}
	}
	return s.list
}

// Len returns the number of instances.
func (s *Sorted) Len() int { return len(s.list) }

// search returns the position of (key, rec) or where it would go.
func (s *Sorted) search(key, rec string) int {
	return sort.Search(len(s.keys), func(i int) bool {
		if c := strings.Compare(s.keys[i], key); c != 0 {
			return c > 0
		}
		return s.recs[i] >= rec
	})
}

// Put records in as read from record key rec, replacing what rec held. It
// reports whether the list changed: putting an instance equal to the one
// rec holds changes nothing. Put takes ownership of in's Tags and Meta.
func (s *Sorted) Put(rec string, in registry.Instance) bool {
	key := in.Key()
	if old, ok := s.at[rec]; ok {
		i := s.search(old, rec)
		if old == key {
			if reflect.DeepEqual(s.list[i], in) {
				return false
			}
			next := slices.Clone(s.list)
			next[i] = in
			s.list = next
			return true
		}
		s.remove(i)
	}
	if s.at == nil {
		s.at = map[string]string{}
	}
	s.at[rec] = key
	i := s.search(key, rec)
	next := make([]registry.Instance, len(s.list)+1)
	copy(next, s.list[:i])
	next[i] = in
	copy(next[i+1:], s.list[i:])
	s.list = next
	s.keys = slices.Insert(s.keys, i, key)
	s.recs = slices.Insert(s.recs, i, rec)
	return true
}

// Delete removes what record key rec held, and reports whether it held
// anything.
func (s *Sorted) Delete(rec string) bool {
	old, ok := s.at[rec]
	if !ok {
		return false
	}
	s.remove(s.search(old, rec))
	return true
}

// remove drops the entry at i.
func (s *Sorted) remove(i int) {
	delete(s.at, s.recs[i])
	next := make([]registry.Instance, len(s.list)-1)
	copy(next, s.list[:i])
	copy(next[i:], s.list[i+1:])
	s.list = next
	s.keys = slices.Delete(s.keys, i, i+1)
	s.recs = slices.Delete(s.recs, i, i+1)
}
