package fleetotel

import "go.opentelemetry.io/otel/metric/noop"

var noopMeter = noop.NewMeterProvider().Meter(ScopeName)
