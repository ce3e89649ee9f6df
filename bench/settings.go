package bench

import "time"

// Settings are the sizes of a run; every measurement is bounded by one of
// the caps below. Durations are in nanoseconds in JSON.
type Settings struct {
	// Scenario 1: echo.
	EchoConns   []int         `json:"echo_conns"`
	EchoCallers []int         `json:"echo_callers"`
	EchoCalls   int64         `json:"echo_calls"`  // calls per measurement
	EchoCap     time.Duration `json:"echo_cap_ns"` // time cap per measurement
	EchoWarmup  int64         `json:"echo_warmup_calls"`
	WarmupCap   time.Duration `json:"warmup_cap_ns"`

	// Scenario 2: MathService.Add.
	MathLong      []int64       `json:"math_long_calls"`  // one caller, one long connection
	MathShort     int64         `json:"math_short_calls"` // connect, one call, close
	MathProcs     int           `json:"math_procs"`       // client processes
	MathProcCalls int64         `json:"math_proc_calls"`  // calls per client process
	MathCap       time.Duration `json:"math_cap_ns"`

	// Scenario 3: handler latency.
	LatencySleeps  []time.Duration `json:"latency_sleeps_ns"`
	LatencyCallers []int           `json:"latency_callers"`
	// LatencyWindow is how long callers keep issuing calls when the
	// handler does not sleep; with a sleeping handler they issue
	// LatencyRounds calls each (at least LatencyWindow).
	LatencyWindow time.Duration `json:"latency_window_ns"`
	LatencyRounds int           `json:"latency_rounds"`
	LatencyWarmup bool          `json:"latency_warmup"`
	// LatencyGrace is how long, beyond the sleep, calls still running at
	// the end of the window may take; later ones are abandoned.
	LatencyGrace time.Duration `json:"latency_grace_ns"`

	// Scenario 4: log shipping.
	LogDuration time.Duration `json:"log_duration_ns"`
	LogSenders  int           `json:"log_senders"`
	LogWarmup   time.Duration `json:"log_warmup_ns"`

	// Scenario 5: codecs (testing.Benchmark's benchtime).
	CodecTime time.Duration `json:"codec_benchtime_ns"`

	// Overload scenario: how long each of its four measurements runs, in
	// all (split into rounds of at least 2 s).
	OverloadDuration time.Duration `json:"overload_duration_ns,omitempty"`

	// ChildMaxTime is the hard time limit of every child process.
	ChildMaxTime time.Duration `json:"child_max_time_ns"`
}

func settingsFor(m Mode, senders int) Settings {
	ms := time.Millisecond
	switch m {
	case Quick:
		return Settings{
			EchoConns: []int{1, 10}, EchoCallers: []int{100, 1000},
			EchoCalls: 30000, EchoCap: 300 * ms, EchoWarmup: 3000, WarmupCap: 100 * ms,
			MathLong: []int64{2000, 5000}, MathShort: 200, MathProcs: 4, MathProcCalls: 3000, MathCap: 800 * ms,
			LatencySleeps: []time.Duration{0, 10 * ms, 1000 * ms}, LatencyCallers: []int{1000},
			LatencyWindow: 250 * ms, LatencyRounds: 1, LatencyGrace: 500 * ms,
			LogDuration: 400 * ms, LogSenders: senders, LogWarmup: 100 * ms,
			CodecTime:        30 * ms,
			OverloadDuration: time.Second,
			ChildMaxTime:     5 * time.Minute,
		}
	case Tiny:
		return Settings{
			EchoConns: []int{2}, EchoCallers: []int{8},
			EchoCalls: 300, EchoCap: 500 * ms, EchoWarmup: 50, WarmupCap: 100 * ms,
			MathLong: []int64{200}, MathShort: 10, MathProcs: 2, MathProcCalls: 100, MathCap: time.Second,
			LatencySleeps: []time.Duration{0, 10 * ms}, LatencyCallers: []int{8},
			LatencyWindow: 100 * ms, LatencyRounds: 1, LatencyGrace: 500 * ms,
			LogDuration: 150 * ms, LogSenders: senders, LogWarmup: 20 * ms,
			CodecTime:        time.Millisecond,
			OverloadDuration: 300 * ms,
			ChildMaxTime:     2 * time.Minute,
		}
	}
	return Settings{
		EchoConns: []int{1, 10}, EchoCallers: []int{100, 500, 1000, 2000, 5000},
		EchoCalls: 200000, EchoCap: 15 * time.Second, EchoWarmup: 20000, WarmupCap: time.Second,
		MathLong: []int64{10000, 50000}, MathShort: 10000, MathProcs: 4, MathProcCalls: 100000, MathCap: 60 * time.Second,
		LatencySleeps: []time.Duration{0, 10 * ms, 1000 * ms}, LatencyCallers: []int{100, 1000},
		LatencyWindow: 3 * time.Second, LatencyRounds: 5, LatencyWarmup: true, LatencyGrace: 2 * time.Second,
		LogDuration: 10 * time.Second, LogSenders: senders, LogWarmup: 500 * ms,
		CodecTime:        time.Second,
		OverloadDuration: 10 * time.Second,
		ChildMaxTime:     30 * time.Minute,
	}
}

// latencyWindow is how long callers issue calls against a handler that
// sleeps d.
func (s Settings) latencyWindow(d time.Duration) time.Duration {
	if d <= 0 {
		return s.LatencyWindow
	}
	return max(s.LatencyWindow, d*time.Duration(s.LatencyRounds-1)+d/2)
}
