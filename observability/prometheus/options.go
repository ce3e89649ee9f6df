package fleetprom

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Option configures NewServerMetrics and NewClientMetrics.
type Option func(*config)

type config struct {
	buckets     []float64
	constLabels prometheus.Labels
	exemplar    func(ctx context.Context) prometheus.Labels
}

func newConfig(opts []Option) config {
	c := config{buckets: prometheus.DefBuckets}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithBuckets sets the classic bucket upper bounds, in seconds, of the
// handling-time histograms. Default prometheus.DefBuckets (5 ms to 10 s).
// The native histogram is kept either way.
func WithBuckets(b []float64) Option {
	return func(c *config) { c.buckets = append([]float64(nil), b...) }
}

// WithConstLabels adds labels with fixed values to every metric, such as
// {"instance": "a"} when several servers share one registry. Default none.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.constLabels = l }
}

// WithExemplar attaches an exemplar to each handling-time observation:
// fn gets the call's context and returns the exemplar's labels (typically
// {"trace_id": ...} from the call's span), or nil for none. Default: no
// exemplars.
func WithExemplar(fn func(ctx context.Context) prometheus.Labels) Option {
	return func(c *config) { c.exemplar = fn }
}

// histogramOpts returns the options of a handling-time histogram: classic
// buckets plus a native histogram whose buckets grow by 10% (the factor
// client_golang's documentation suggests), at most 160 buckets, reset at
// most hourly.
func (c *config) histogramOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Name:                            name,
		Help:                            help,
		ConstLabels:                     c.constLabels,
		Buckets:                         c.buckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: 3600e9,
	}
}
