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
}

// ServeMetrics are the request series of the HTTP and Kafka interfaces.
// Every (interface, code) series exists from creation with value 0.
type ServeMetrics struct {
	corrupt  prometheus.Counter // tiered_fetch_corrupt_objects_total
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
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
	}
	if reg != nil {
		m.requests = promreg.RegisterOrReuse(reg, m.requests)
		m.bytes = promreg.RegisterOrReuse(reg, m.bytes)
		m.duration = promreg.RegisterOrReuse(reg, m.duration)
	}
	for _, iface := range []string{InterfaceHTTP, InterfaceKafka} {
		for _, code := range resultCodes {
			m.requests.WithLabelValues(iface, code)
		}
		m.bytes.WithLabelValues(iface)
		m.duration.WithLabelValues(iface)
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

// Bytes is the tiered_fetch_bytes_total series of one interface.
func (m *ServeMetrics) Bytes(iface string) prometheus.Counter {
	return m.bytes.WithLabelValues(iface)
}
