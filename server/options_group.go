package server

// Options groups several options into one, applied in the order given, so
// that an integration (a metrics or tracing module) can install an
// interceptor and a plugin with a single option. A nil entry is skipped.
func Options(opts ...Option) Option {
	return optionFunc(func(o *options) {
		for _, op := range opts {
			if op != nil {
				op.apply(o)
			}
		}
	})
}
