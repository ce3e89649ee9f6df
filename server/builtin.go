package server

// registerBuiltin adds one of the server's own services (health,
// reflection, admin) to the service table: fns maps each method name to a
// func(context.Context, *A, *R) error. It panics when a function does not
// fit, which is a bug in the built-in service, not a user's error.
func (s *Server) registerBuiltin(name string, fns map[string]any) {
	svc := &service{name: name, methods: make(map[string]*methodType, len(fns))}
	for method, fn := range fns {
		m, err := newFunction(name, method, fn)
		if err != nil {
			panic("server: built-in service " + name + ": " + err.Error())
		}
		svc.methods[method] = m
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	for _, m := range svc.methods {
		s.setChain(m)
	}
	old := *s.services.Load()
	next := make(map[string]*service, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = svc
	s.services.Store(&next)
}
