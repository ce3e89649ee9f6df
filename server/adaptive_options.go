package server

import "strconv"

// AdaptiveAlgorithm selects how WithAdaptiveLimit adapts its limit.
type AdaptiveAlgorithm int

const (
	// AdaptiveGradient (the default) is a gradient limit after the
	// GradientLimit and Gradient2Limit of Netflix's concurrency-limits
	// (https://github.com/Netflix/concurrency-limits): each completed call
	// of latency rtt gives gradient = clamp(Tolerance × rttNoLoad / rtt,
	// 0.5, 1) and the limit moves a Smoothing share of the way to
	// limit × gradient + QueueSize. Without queueing (rtt ≤ Tolerance ×
	// rttNoLoad) the limit grows by Smoothing × QueueSize per call; with
	// queueing, limit × rttNoLoad / rtt is (by Little's law) the number of
	// calls the server runs without queueing, c, and the limit settles
	// at about Tolerance × c + QueueSize (7 where the handlers run 4 calls
	// at once, with the defaults; 7.0-7.1 on average on the overload
	// bench). A call that
	// ended DeadlineExceeded counts as gradient 0.5. Unlike
	// Gradient2Limit, whose reference is an exponential average of all
	// latencies and so follows a standing queue upwards, the reference
	// rttNoLoad is the probed minimum described at AdaptiveLimit.
	AdaptiveGradient AdaptiveAlgorithm = iota
	// AdaptiveVegas is TCP Vegas applied to calls, as in the VegasLimit of
	// Netflix's concurrency-limits: each completed call of latency rtt
	// estimates the calls queued in the server as queue = ceil(limit × (1 −
	// rttNoLoad/rtt)). With f = max(1, log10(limit)): queue ≤ f grows the
	// limit by 6f; queue < 3f grows it by f; queue > 6f shrinks it by f;
	// otherwise it stays. A call that ended DeadlineExceeded shrinks it by
	// f. It keeps about 3-6 calls queued: on a server that runs 4 calls at
	// once it settles at 7-10.
	AdaptiveVegas
)

// String returns "gradient", "vegas" or "AdaptiveAlgorithm(n)".
func (a AdaptiveAlgorithm) String() string {
	switch a {
	case AdaptiveGradient:
		return "gradient"
	case AdaptiveVegas:
		return "vegas"
	}
	return "AdaptiveAlgorithm(" + strconv.Itoa(int(a)) + ")"
}

// AdaptiveLimit configures the adaptive concurrency limit of
// WithAdaptiveLimit. Zero fields take the documented defaults.
//
// Both algorithms (see AdaptiveAlgorithm) compare each completed call's
// latency, from admission to the handler's return, with rttNoLoad, the
// latency without queueing, measured as in BBR (Cardwell et al., "BBR:
// Congestion-Based Congestion Control", ACM Queue 14(5), 2016): rttNoLoad
// is the shortest latency of the current and the previous period of
// ProbeMultiplier × limit calls. A period in which the limit was reached
// (a call was shed, or a oneway send waited) and no call finished with at
// most Min calls in flight ends with a probe: for the next n + Min calls, n
// being the calls then in flight, the limit is held and at most Min calls
// are admitted at once, so that the calls in flight drain and some run
// without queueing. (A standing queue would otherwise hide the no-load
// latency: Vegas' reset of the baseline to one sample, or Gradient2's
// average of all latencies, then follow the queue upwards.) A lasting
// change of the handlers' cost is so learnt within two periods; a probe
// sheds calls only on a server already shedding, and costs throughput only
// where more than Min calls run at once unqueued. A sample taken while
// fewer than half the limit were in flight does not move the limit (the
// limit is not what bounds the load), nor does a new shortest latency;
// both feed rttNoLoad.
//
// With BacklogTimeout > 0 (off by default), a call arriving while the
// limit is reached waits in a short backlog rather than being shed at
// once, as in the LifoBlockingLimiter of Netflix's concurrency-limits: at
// most Backlog calls wait, each at most BacklogTimeout × rttNoLoad (and
// never past its deadline), and a slot freed by a finishing call goes to
// the newest waiting call (LIFO: under lasting overload the newest calls
// run after short waits and the oldest time out, rather than every call
// waiting the whole bound). The wait runs on a goroutine of the call's
// own, never on the connection's read loop; it is not part of the latency
// sample, which starts when the call gets its slot (and the call's
// deadline, passed on to its handler, counts the wait). A call leaves the
// backlog with ResourceExhausted and the retry-after hint when its wait
// bound passes (counted as shed), with DeadlineExceeded when its deadline
// does, with Canceled on the client's cancel frame, and with ShuttingDown
// when Shutdown starts. Before the first sample (no rttNoLoad) no call
// waits. The backlog keeps the handlers fed between arrivals but adds
// about one handler's run of waiting to the calls it admits: on the
// overload bench (`fleet bench overload`) a backlog raises the goodput at
// twice the capacity by a few points of peak and the admitted calls' p99
// with it, so it is off by default.
//
// The limiter is safe for concurrent use: one mutex guards its state.
type AdaptiveLimit struct {
	// Algorithm is the adaptation rule. Default AdaptiveGradient.
	Algorithm AdaptiveAlgorithm
	// Initial is the limit before any sample, in calls. Default 20.
	Initial int
	// Min is the lowest the limit goes, in calls. Default 4.
	Min int
	// Max is the highest the limit goes, in calls. Default 1000.
	Max int
	// ProbeMultiplier sets the probe period of the no-load latency:
	// ProbeMultiplier × limit calls. Default 30.
	ProbeMultiplier int
	// Tolerance (AdaptiveGradient) is the latency inflation, as a multiple
	// of rttNoLoad, taken as no queueing. Default 1.5; values below 1 are
	// taken as 1.
	Tolerance float64
	// QueueSize (AdaptiveGradient) is the queue allowance in calls: how far
	// the limit may grow above what runs unqueued. Default 1: with calls
	// arriving evenly, larger values keep more calls queued on the slots and
	// raise the admitted calls' p99 without keeping the slots busier
	// (`fleet bench overload`).
	QueueSize float64
	// Smoothing (AdaptiveGradient) is the share of the way, in (0, 1], the
	// limit moves towards each sample's new estimate. Default 0.2.
	Smoothing float64
	// BacklogTimeout is the longest a call arriving while the limit is
	// reached waits for a slot, as a multiple of rttNoLoad (so it follows
	// the handlers' cost), at most an hour. Default 0: no backlog, such
	// calls are shed at once (see the measurements at AdaptiveLimit for
	// why it is off).
	BacklogTimeout float64
	// Backlog (with BacklogTimeout > 0) is the most calls waiting at once,
	// in calls. Default 0: the current limit × BacklogTimeout, rounded up
	// (by Little's law about the calls that finish within the wait bound,
	// so that a longer backlog would mostly time out); negative: no
	// backlog.
	Backlog int
}

// Defaults of AdaptiveLimit.
const (
	DefaultAdaptiveInitial         = 20
	DefaultAdaptiveMin             = 4
	DefaultAdaptiveMax             = 1000
	DefaultAdaptiveProbeMultiplier = 30
	DefaultAdaptiveTolerance       = 1.5
	DefaultAdaptiveQueueSize       = 1.0
	DefaultAdaptiveSmoothing       = 0.2
	DefaultAdaptiveBacklogTimeout  = 0.0 // no backlog
)

// WithAdaptiveLimit bounds the calls running at once, all connections and
// methods together, by a limit that adapts to the latency of the handlers
// (see AdaptiveLimit and AdaptiveAlgorithm for the algorithms). A call
// arriving while the limit is reached (and, with AdaptiveLimit's
// BacklogTimeout, finding its backlog full or waiting there in vain) is
// answered ResourceExhausted without running, with the
// response metadata RetryAfterKey (as the rate limits send) set to the
// recent no-load latency in milliseconds, at least 1; an XClient takes
// such an answer as not processed and fails over. A
// oneway send over the limit is not dropped: the server stops reading its
// connection until a call finishes. The latency measured runs from
// admission to the handler's return (queueing for a worker included).
// Checked after auth and the rate limits. A stream holds no slot, but
// while the limit is reached new streams are refused the same way.
// Default: off.
func WithAdaptiveLimit(a AdaptiveLimit) Option {
	return optionFunc(func(o *options) { o.adaptive = &a })
}
