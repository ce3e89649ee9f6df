package server

import "sync"

// ServingStatus is a service's health, as the routes that report it
// answer: the fleet.Health service (package server/health), the gateway's
// grpc.health.v1 and an HTTP readiness check. The values equal those of
// grpc.health.v1.HealthCheckResponse.ServingStatus.
type ServingStatus uint8

// The statuses.
const (
	StatusUnknown    ServingStatus = 0 // not known (not used in answers)
	StatusServing    ServingStatus = 1 // ready for calls
	StatusNotServing ServingStatus = 2 // refusing calls, or about to
)

// String returns "UNKNOWN", "SERVING" or "NOT_SERVING", the gRPC names.
func (s ServingStatus) String() string {
	switch s {
	case StatusServing:
		return "SERVING"
	case StatusNotServing:
		return "NOT_SERVING"
	}
	return "UNKNOWN"
}

// statuses holds the statuses set with SetServingStatus.
type statuses struct {
	mu  sync.Mutex
	set map[string]ServingStatus
}

// SetServingStatus sets the health of service ("" for the whole server)
// until it is set again; StatusUnknown clears the setting. Without a
// setting, a registered service and the server are SERVING. Once Shutdown
// or Close begins, every answer is NOT_SERVING whatever was set. Safe for
// concurrent use.
func (s *Server) SetServingStatus(service string, st ServingStatus) {
	s.statuses.mu.Lock()
	defer s.statuses.mu.Unlock()
	if st == StatusUnknown {
		delete(s.statuses.set, service)
		return
	}
	if s.statuses.set == nil {
		s.statuses.set = map[string]ServingStatus{}
	}
	s.statuses.set[service] = st
}

// ServingStatus reports the health of service ("" for the whole server):
// NOT_SERVING from the moment Shutdown or Close begins (while OnShutdown
// functions such as registry deregistration run, and during the drain),
// otherwise the status set with SetServingStatus, otherwise SERVING. ok is
// false for a service that is neither registered (with unary or streaming
// methods) nor set. Over the native protocol, calls that arrive once draining has begun are refused with
// fleet.ShuttingDown, which a health checker reads as NOT_SERVING.
func (s *Server) ServingStatus(service string) (st ServingStatus, ok bool) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	s.statuses.mu.Lock()
	set, isSet := s.statuses.set[service]
	s.statuses.mu.Unlock()
	_, registered := (*s.services.Load())[service]
	if !isSet && !registered && service != "" && !s.hasStreamService(service) {
		return StatusUnknown, false
	}
	switch {
	case stopping:
		return StatusNotServing, true
	case isSet:
		return set, true
	}
	return StatusServing, true
}
