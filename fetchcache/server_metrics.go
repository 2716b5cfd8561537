package fetchcache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/x/promreg"
)

// Interface label values of the serving metrics.
const (
	InterfaceHTTP  = "http"
	InterfaceKafka = "kafka"
)

var resultCodes = []string{
	CodeOK, CodeInvalidRequest, CodeUnknownTopicOrPartition, CodeOffsetOutOfRange, CodeThrottled,
	CodeUnsupportedVersion, CodePolicyViolation, CodeNotFound, CodeNotAcceptable, CodeInternal,
	CodeUnauthorized, CodeTopicAuthorizationFailed, CodeClusterAuthorizationFailed, CodeSASLAuthenticationFailed,
	CodeUnsupportedSASLMechanism, CodeIllegalSASLState, CodeCorruptMessage,
	CodeGroupAuthorizationFailed, CodeCoordinatorNotAvailable, CodeNotCoordinator, CodeGroupMembership,
}

// Reasons of tiered_fetch_connections_refused_total: a connection closed at
// accept because a cap was reached.
const (
	RefusedMaxConnections      = "max_connections"
	RefusedMaxConnectionsPerIP = "max_connections_per_ip"
)

// Reasons of tiered_fetch_connections_closed_total: a connection the server
// closed because a client was too slow or silent.
const (
	ClosedIdleTimeout        = "idle_timeout"         // no request began within the idle timeout
	ClosedRequestReadTimeout = "request_read_timeout" // a started request did not arrive whole in time
	ClosedSASLTimeout        = "sasl_timeout"         // SASL authentication did not finish in time
	ClosedBodyTimeout        = "body_timeout"         // an HTTP request body did not arrive in time
)

var (
	refusedReasons = []string{RefusedMaxConnections, RefusedMaxConnectionsPerIP}
	closedReasons  = []string{ClosedIdleTimeout, ClosedRequestReadTimeout, ClosedSASLTimeout, ClosedBodyTimeout}
)

// ServeMetrics are the request series of the HTTP and Kafka interfaces.
// Every (interface, code) series exists from creation with value 0.
type ServeMetrics struct {
	corrupt  prometheus.Counter // tiered_fetch_corrupt_objects_total
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	refused  *prometheus.CounterVec
	closed   *prometheus.CounterVec
}

// NewServeMetrics creates the series and registers them with reg (nil: not
// registered). Registering twice with one registry reuses the registered
// collectors, so several servers may share a registry.
func NewServeMetrics(reg prometheus.Registerer) *ServeMetrics {
	m := &ServeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_requests_total",
			Help: "Requests answered by the fetch service, by interface and result code.",
		}, []string{"interface", "code"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_response_bytes_total",
			Help: "Response bytes written by the fetch service (HTTP bodies, Kafka frames).",
		}, []string{"interface"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tiered_fetch_request_duration_seconds",
			Help:    "Time from reading a request to writing its response, including any fetch wait.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"interface"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_connections_refused_total",
			Help: "Connections closed at accept because a connection cap was reached, by interface and cap.",
		}, []string{"interface", "reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tiered_fetch_connections_closed_total",
			Help: "Connections the server closed because the client was silent or too slow, by interface and timeout.",
		}, []string{"interface", "reason"}),
	}
	if reg != nil {
		m.requests = promreg.RegisterOrReuse(reg, m.requests)
		m.bytes = promreg.RegisterOrReuse(reg, m.bytes)
		m.duration = promreg.RegisterOrReuse(reg, m.duration)
		m.refused = promreg.RegisterOrReuse(reg, m.refused)
		m.closed = promreg.RegisterOrReuse(reg, m.closed)
	}
	for _, iface := range []string{InterfaceHTTP, InterfaceKafka} {
		for _, code := range resultCodes {
			m.requests.WithLabelValues(iface, code)
		}
		m.bytes.WithLabelValues(iface)
		m.duration.WithLabelValues(iface)
		for _, r := range refusedReasons {
			m.refused.WithLabelValues(iface, r)
		}
		for _, r := range closedReasons {
			m.closed.WithLabelValues(iface, r)
		}
	}
	m.corrupt = NewCorruptCounter(reg)
	return m
}

func (m *ServeMetrics) Observe(iface, code string, bytes int, seconds float64) {
	m.requests.WithLabelValues(iface, code).Inc()
	if bytes > 0 {
		m.bytes.WithLabelValues(iface).Add(float64(bytes))
	}
	m.duration.WithLabelValues(iface).Observe(seconds)
}

// CountCorrupt counts a request that found corrupt stored data.
func (m *ServeMetrics) CountCorrupt() { m.corrupt.Inc() }

// Requests is the tiered_fetch_requests_total series of one interface and
// result code.
func (m *ServeMetrics) Requests(iface, code string) prometheus.Counter {
	return m.requests.WithLabelValues(iface, code)
}

// Bytes is the tiered_fetch_response_bytes_total series of one interface.
func (m *ServeMetrics) Bytes(iface string) prometheus.Counter {
	return m.bytes.WithLabelValues(iface)
}

// Refused is the tiered_fetch_connections_refused_total series of one
// interface and cap (RefusedMaxConnections, RefusedMaxConnectionsPerIP).
func (m *ServeMetrics) Refused(iface, reason string) prometheus.Counter {
	return m.refused.WithLabelValues(iface, reason)
}

// Closed is the tiered_fetch_connections_closed_total series of one
// interface and timeout (ClosedIdleTimeout, ...).
func (m *ServeMetrics) Closed(iface, reason string) prometheus.Counter {
	return m.closed.WithLabelValues(iface, reason)
}
