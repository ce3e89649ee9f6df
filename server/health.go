package server

import (
	"context"
	"sync"

	"github.com/fleetrpc/fleet"
)

// HealthService is the name under which every Server serves its health
// check; its one method is "Check" (HealthCheckRequest → HealthCheckResponse).
// It follows the shape of gRPC's grpc.health.v1.Health/Check.
const HealthService = "fleet.Health"

// ServingStatus is a service's health. The values equal those of
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

// HealthCheckRequest asks for the status of Service, or of the whole
// server when Service is "".
type HealthCheckRequest struct {
	Service string
}

// HealthCheckResponse is the answer to a HealthCheckRequest.
type HealthCheckResponse struct {
	Status ServingStatus
}

// health holds the statuses set with SetServingStatus.
type health struct {
	mu  sync.Mutex
	set map[string]ServingStatus
}

// registerHealth serves HealthService; New calls it.
func (s *Server) registerHealth() {
	s.registerBuiltin(HealthService, map[string]any{"Check": func(ctx context.Context, req *HealthCheckRequest, resp *HealthCheckResponse) error {
		st, ok := s.ServingStatus(req.Service)
		if !ok {
			return fleet.Errorf(fleet.NotFound, "unknown service %q", req.Service)
		}
		resp.Status = st
		return nil
	}})
}

// SetServingStatus sets the health of service ("" for the whole server)
// until it is set again; StatusUnknown clears the setting. Without a
// setting, a registered service and the server are SERVING. Once Shutdown
// or Close begins, every answer is NOT_SERVING whatever was set. Safe for
// concurrent use.
func (s *Server) SetServingStatus(service string, st ServingStatus) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if st == StatusUnknown {
		delete(s.health.set, service)
		return
	}
	if s.health.set == nil {
		s.health.set = map[string]ServingStatus{}
	}
	s.health.set[service] = st
}

// ServingStatus reports the health of service ("" for the whole server):
// NOT_SERVING from the moment Shutdown or Close begins (while OnShutdown
// functions such as registry deregistration run, and during the drain),
// otherwise the status set with SetServingStatus, otherwise SERVING. ok is
// false for a service that is neither registered (with unary or streaming
// methods) nor set. Over the native
// protocol, calls that arrive once draining has begun are refused with
// fleet.ShuttingDown, which a health checker reads as NOT_SERVING.
func (s *Server) ServingStatus(service string) (st ServingStatus, ok bool) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	s.health.mu.Lock()
	set, isSet := s.health.set[service]
	s.health.mu.Unlock()
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
