package client

import (
	"sync"
	"time"
)

// RetryBudget bounds retries to a share of calls over a sliding window, so
// that a failing service sees at most (1+Ratio) times its normal traffic
// instead of MaxAttempts times (the idea of Finagle's RetryBudget and of
// gRPC's retry throttling). The zero value is not usable; make one with
// NewRetryBudget. Safe for concurrent use.
type RetryBudget struct {
	ratio   float64
	minimum int64
	width   time.Duration // of one bucket
	mu      sync.Mutex
	buckets [10]budgetBucket
}

type budgetBucket struct {
	epoch          int64
	calls, retries int64
}

// NewRetryBudget returns a budget allowing retries up to ratio of the calls
// made over the last window (split into 10 buckets), and never fewer than
// minimum per window. Defaults used by XClient: ratio 0.1, minimum 10,
// window 10 s.
func NewRetryBudget(ratio float64, minimum int, window time.Duration) *RetryBudget {
	if window <= 0 {
		window = 10 * time.Second
	}
	return &RetryBudget{ratio: ratio, minimum: int64(minimum), width: window / 10}
}

func (b *RetryBudget) bucket(now time.Time) *budgetBucket {
	epoch := now.UnixNano() / int64(b.width)
	bk := &b.buckets[epoch%int64(len(b.buckets))]
	if bk.epoch != epoch {
		*bk = budgetBucket{epoch: epoch}
	}
	return bk
}

// totals sums the buckets still inside the window.
func (b *RetryBudget) totals(now time.Time) (calls, retries int64) {
	epoch := now.UnixNano() / int64(b.width)
	for i := range b.buckets {
		if bk := &b.buckets[i]; epoch-bk.epoch < int64(len(b.buckets)) {
			calls += bk.calls
			retries += bk.retries
		}
	}
	return calls, retries
}

// Call records a first attempt.
func (b *RetryBudget) Call() {
	b.mu.Lock()
	b.bucket(time.Now()).calls++
	b.mu.Unlock()
}

// Retry reports whether one more retry fits the budget, and if so records
// it.
func (b *RetryBudget) Retry() bool {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	calls, retries := b.totals(now)
	allowed := max(b.minimum, int64(b.ratio*float64(calls)))
	if retries+1 > allowed {
		return false
	}
	b.bucket(now).retries++
	return true
}

// Counts returns the calls and retries recorded in the current window.
func (b *RetryBudget) Counts() (calls, retries int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.totals(time.Now())
}
