package bufpool

import "sync"

// classes are the pooled capacities: 512 B to 1 MiB, each 4x or 2x the
// one before.
var classes = [...]int{512, 2 << 10, 8 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20}

// MaxPooled is the largest capacity kept in the pools (1 MiB).
const MaxPooled = 1 << 20

var pools [len(classes)]sync.Pool

func class(n int) int {
	for i, c := range classes {
		if n <= c {
			return i
		}
	}
	return -1
}

// Get returns a buffer of length 0 and capacity at least n. Buffers over
// MaxPooled are allocated exactly and not pooled. Safe for concurrent use.
func Get(n int) *[]byte {
	i := class(n)
	if i < 0 {
		b := make([]byte, 0, n)
		return &b
	}
	if p, _ := pools[i].Get().(*[]byte); p != nil {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, classes[i])
	return &b
}

// Put returns a buffer to its pool; buffers whose capacity is not a pool
// class (grown by append, or over MaxPooled) are dropped. p must not be used
// after Put.
func Put(p *[]byte) {
	if p == nil {
		return
	}
	c := cap(*p)
	for i, cl := range classes {
		if c == cl {
			*p = (*p)[:0]
			pools[i].Put(p)
			return
		}
		if c < cl {
			// A buffer that grew to a non-class size goes to the class below.
			if i > 0 {
				*p = (*p)[:0]
				pools[i-1].Put(p)
			}
			return
		}
	}
}
