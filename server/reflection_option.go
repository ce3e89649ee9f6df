package server

// noReflection is the marker WithoutReflection leaves among the plugins;
// it implements no hook, so the hook table ignores it.
type noReflection struct{}

// WithoutReflection removes the built-in fleet.Reflection service (see
// ReflectionService): the server then does not describe its services,
// methods and types to callers. Default: reflection is served (behind the
// server's auth function, like every call).
func WithoutReflection() Option {
	return optionFunc(func(o *options) { o.plugins = append(o.plugins, noReflection{}) })
}
