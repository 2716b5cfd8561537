package kafkasrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// api is one Kafka API the listener serves: its key, the versions it
// serves (what ApiVersions advertises) and its handler. The file of each API
// declares its entry beside the handler; apis and saslAPIs collect them.
type api struct {
	key      int16
	min, max int16
	// preAuth: the API may come before the connection authenticates.
	preAuth bool
	// perm is what the principal needs on each topic the request names
	// (auth.PermNone: authentication only). handle passes it to the
	// handler's context; the handler asks allowed for each topic and answers
	// a denied one TOPIC_AUTHORIZATION_FAILED where Kafka does. No API
	// needing admin (CreateTopics, AlterConfigs, …) is served.
	perm auth.Permission
	// group: the API is about consumer groups and needs the group in the
	// principal's auth.acls groups patterns; admin: it needs admin too
	// (deleting groups or offsets).
	group, admin bool
	handle       handlerFunc
}

// handlerFunc answers req, a request of the API's kmsg type at a served
// version: the response (nil when none is due), the metrics result code,
// and how long to throttle the client (0: not at all). kc is nil when the
// request came without a connection (as in the fuzz tests).
type handlerFunc func(s *KafkaServer, ctx context.Context, kc *kafkaConn, req kmsg.Request) (kmsg.Response, string, time.Duration)

// handler makes an API's handler, a method of KafkaServer that takes the
// API's request type, a handlerFunc.
func handler[Q kmsg.Request](h func(s *KafkaServer, ctx context.Context, kc *kafkaConn, q Q) (kmsg.Response, string, time.Duration)) handlerFunc {
	return func(s *KafkaServer, ctx context.Context, kc *kafkaConn, req kmsg.Request) (kmsg.Response, string, time.Duration) {
		return h(s, ctx, kc, req.(Q))
	}
}

// apis are the APIs every listener serves, in the order of keys; saslAPIs
// are served too (and advertised after them) when SASL/PLAIN is configured.
var (
	apis = []*api{&produceAPI, &fetchAPI, &listOffsetsAPI, &metadataAPI,
		&offsetCommitAPI, &offsetFetchAPI, &findCoordinatorAPI, &joinGroupAPI, &heartbeatAPI, &leaveGroupAPI,
		&syncGroupAPI, &describeGroupsAPI, &listGroupsAPI, &apiVersionsAPI, &deleteGroupsAPI, &offsetDeleteAPI}
	saslAPIs = []*api{&saslHandshakeAPI, &saslAuthenticateAPI}
)

// KafkaAPIVersions lists the APIs the Kafka listener advertises (SASL's
// are added when SASL/PLAIN is configured). Each version range is stated
// once, beside its handler: produce.go, fetch.go, listoffsets.go,
// metadata.go, apiversions.go, and the group APIs' files (groups.go).
var KafkaAPIVersions = versionsOf(apis)

// API describes one Kafka API of the registry: what the authorization tests
// and the README's permission list are made from.
type API struct {
	Key      int16
	Name     string // kmsg.NameForKey
	Min, Max int16
	// PreAuth APIs may come before the connection authenticates; SASL ones
	// are served only when SASL/PLAIN is configured.
	PreAuth, SASL bool
	// Perm is what the principal needs on each topic the request names.
	Perm auth.Permission
	// Group APIs need the group in the principal's groups patterns; Admin
	// ones need admin as well.
	Group, Admin bool
}

// APIs lists every API the listener may serve, in ApiVersions' order.
func APIs() []API {
	var out []API
	for i, as := range [][]*api{apis, saslAPIs} {
		for _, a := range as {
			out = append(out, API{Key: a.key, Name: kmsg.NameForKey(a.key), Min: a.min, Max: a.max, PreAuth: a.preAuth, SASL: i == 1, Perm: a.perm, Group: a.group, Admin: a.admin})
		}
	}
	return out
}

// versionsOf is the ApiVersions entries of as, in their order.
func versionsOf(as []*api) []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(as))
	for _, a := range as {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key, MinVersion: a.min, MaxVersion: a.max})
	}
	return out
}

// registered is the API of key, nil for one the listener does not serve.
func registered(key int16) *api {
	for _, as := range [][]*api{apis, saslAPIs} {
		for _, a := range as {
			if a.key == key {
				return a
			}
		}
	}
	return nil
}

func (s *KafkaServer) supported(key, version int16) bool {
	for _, k := range s.apiKeys {
		if k.ApiKey == key {
			return version >= k.MinVersion && version <= k.MaxVersion
		}
	}
	return false
}

// handle answers one request frame with the response's bytes, as buffers
// to write in order (a Fetch response's record batches are the cache's own
// memory, spliced in uncopied). resp is nil when no response is due
// (Produce with acks=0; a Metadata for all topics the catalog could not
// list, its connection closed); code is the metrics result code. An error
// means the request could not be parsed and the connection must be closed.
func (s *KafkaServer) handle(kc *kafkaConn, frame []byte) (resp net.Buffers, code string, err error) {
	h, req, err := decodeRequest(frame)
	if err != nil {
		return nil, "", err
	}
	if h.key == apiVersionsKey && (req == nil || !s.supported(h.key, h.version)) {
		// KIP-511: an ApiVersions version we do not know is answered
		// with a v0 body (header v0) listing what we support.
		return net.Buffers{appendResponse(nil, h.correlationID, s.apiVersionsUnsupported())}, fetchcache.CodeUnsupportedVersion, nil
	}
	if kc != nil && !preAuthAPI(h.key) && !kc.authenticated() {
		// Kafka closes a connection that skips authentication.
		return nil, fetchcache.CodeIllegalSASLState, fmt.Errorf("%w: %s before SASL authentication", errSASLState, kmsg.NameForKey(h.key))
	}
	if kc != nil && kc.sasl.mechanism && h.key != saslAuthenticateKey {
		// After a SaslHandshake the next request must be its
		// SaslAuthenticate, as Kafka's SaslServerAuthenticator requires.
		return nil, fetchcache.CodeIllegalSASLState, fmt.Errorf("%w: %s after SaslHandshake, before SaslAuthenticate", errSASLState, kmsg.NameForKey(h.key))
	}
	if !s.supported(h.key, h.version) {
		// A Kafka 4 broker closes the connection on a version it does
		// not serve (below KIP-896's floors or above its own) and on an
		// unknown key; only ApiVersions gets an answer (KIP-511, above).
		// Never an empty body a client would take for success.
		return nil, fetchcache.CodeUnsupportedVersion, fmt.Errorf("%w: %s (key %d) v%d is not served%s", errUnsupported, kmsg.NameForKey(h.key), h.key, h.version, s.servedRange(h.key))
	}
	if req == nil {
		return nil, "", fmt.Errorf("%w: API key %d version %d is unknown", errMalformed, h.key, h.version)
	}
	ctx := context.Background()
	if kc != nil && kc.ctx != nil {
		ctx = kc.ctx
	}
	var (
		r        kmsg.Response
		throttle time.Duration
	)
	a := registered(h.key)
	if kc != nil && h.clientID != nil {
		kc.clientID = *h.clientID
	}
	r, code, throttle = a.handle(s, withPerm(ctx, a.perm), kc, req)
	if r == nil {
		return nil, code, nil // no response is due (Produce with acks=0)
	}
	if throttle > 0 {
		ms := int32(min(throttle.Milliseconds()+1, 1<<30))
		if tr, ok := r.(interface{ SetThrottle(int32) }); ok {
			tr.SetThrottle(ms)
		}
		// Before KIP-219 versions the broker, not the client, waits out
		// the throttle: delay the response.
		if t, ok := r.(kmsg.ThrottleResponse); ok {
			if _, after := t.Throttle(); !after {
				kc.sleep(throttle)
			}
		}
	}
	if sf, ok := r.(*splicedFetch); ok {
		out := sf.encode(h.correlationID)
		if sf.release != nil {
			if kc != nil {
				kc.afterWrite = sf.release
			} else {
				sf.release()
			}
		}
		return out, code, nil
	}
	return net.Buffers{appendResponse(nil, h.correlationID, r)}, code, nil
}

// errUnsupported is a request for an API or version the listener does not
// serve; the connection is closed.
var errUnsupported = errors.New("unsupported API version")

// servedRange says which versions of key are served, for the log line.
func (s *KafkaServer) servedRange(key int16) string {
	for _, k := range s.apiKeys {
		if k.ApiKey == key {
			return fmt.Sprintf(" (served: v%d-v%d)", k.MinVersion, k.MaxVersion)
		}
	}
	return " (API not served)"
}

// partitionErrors is the Kafka listener's answer to each Kafka error, in
// the order they are tried: the protocol's error code and the result code
// of the metrics.
var partitionErrors = []struct {
	err  error
	kerr *kerr.Error
	code string
}{
	{kafkaerr.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition, fetchcache.CodeUnknownTopicOrPartition},
	{kafkaerr.ErrOffsetOutOfRange, kerr.OffsetOutOfRange, fetchcache.CodeOffsetOutOfRange},
	{kafkaerr.ErrCorrupt, kerr.CorruptMessage, fetchcache.CodeCorruptMessage},
}

// partitionError maps a catalog or read error to a Kafka error code and a
// metrics code (partitionErrors); anything else is store or disk trouble,
// KAFKA_STORAGE_ERROR, retriable for clients. Overload is not an error here
// (the caller throttles).
func (s *KafkaServer) partitionError(op, topic string, partition int32, err error) (int16, string) {
	for _, e := range partitionErrors {
		if !errors.Is(err, e.err) {
			continue
		}
		if e.code == fetchcache.CodeCorruptMessage {
			s.m.CountCorrupt()
			s.log.Error("kafka "+op+" failed: corrupt data", "topic", topic, "partition", partition, "err", err)
		}
		return e.kerr.Code, e.code
	}
	s.log.Error("kafka "+op+" failed", "topic", topic, "partition", partition, "err", err)
	return kerr.KafkaStorageError.Code, fetchcache.CodeInternal
}

// worse keeps the first non-OK metrics code.
func worse(cur, next string) string {
	if cur == fetchcache.CodeOK {
		return next
	}
	return cur
}
