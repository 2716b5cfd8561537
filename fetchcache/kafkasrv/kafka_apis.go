package kafkasrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier/record"
)

// API keys served and their version ranges.
const (
	produceKey     int16 = 0
	fetchKey       int16 = 1
	listOffsetsKey int16 = 2
	metadataKey    int16 = 3
	apiVersionsKey int16 = 18
)

// KafkaAPIVersions lists the APIs the Kafka listener advertises. Produce is
// advertised (librdkafka picks modern Fetch versions only when the broker
// has Produce v3+) but refused per partition with POLICY_VIOLATION. Fetch
// stops at v12 and Metadata at v12 because later versions name topics by id
// and the service reports the zero topic id.
var KafkaAPIVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: produceKey, MinVersion: 3, MaxVersion: 9},
	{ApiKey: fetchKey, MinVersion: 4, MaxVersion: 12},
	{ApiKey: listOffsetsKey, MinVersion: 1, MaxVersion: 7},
	{ApiKey: metadataKey, MinVersion: 0, MaxVersion: 12},
	{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: 3},
}

func (s *KafkaServer) supported(key, version int16) bool {
	for _, k := range s.apiKeys {
		if k.ApiKey == key {
			return version >= k.MinVersion && version <= k.MaxVersion
		}
	}
	return false
}

// ListOffsets special timestamps.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3 // v7+
)

// produceRefusal is the error message of refused produce partitions (v8+).
const produceRefusal = "tiered's fetch service is read-only: produce to the broker (or with tiered produce)"

// handle answers one request frame. resp is nil when no response is due
// (Produce with acks=0); code is the metrics result code. An error means
// the request could not be parsed and the connection must be closed.
func (s *KafkaServer) handle(kc *kafkaConn, frame []byte) (resp []byte, code string, err error) {
	h, req, err := decodeRequest(frame)
	if err != nil {
		return nil, "", err
	}
	if h.key == apiVersionsKey && (req == nil || !s.supported(h.key, h.version)) {
		// KIP-511: an ApiVersions version we do not know is answered
		// with a v0 body (header v0) listing what we support.
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = 0
		r.ErrorCode = kerr.UnsupportedVersion.Code
		r.ApiKeys = s.apiKeys
		return appendResponse(nil, h.correlationID, r), fetchcache.CodeUnsupportedVersion, nil
	}
	if kc != nil && !preAuthAPI(h.key) && !kc.authenticated() {
		// Kafka closes a connection that skips authentication.
		return nil, fetchcache.CodeIllegalSASLState, fmt.Errorf("%w: %s before SASL authentication", errSASLState, kmsg.NameForKey(h.key))
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
	code = fetchcache.CodeOK
	if !s.supported(h.key, h.version) {
		r, code = unsupportedResponse(req), fetchcache.CodeUnsupportedVersion
	} else {
		switch q := req.(type) {
		case *kmsg.ApiVersionsRequest:
			r = s.apiVersions(q)
		case *kmsg.MetadataRequest:
			r, code = s.metadata(ctx, kc, q)
		case *kmsg.ListOffsetsRequest:
			r, code, throttle = s.listOffsets(ctx, kc, q)
		case *kmsg.FetchRequest:
			r, code, throttle = s.fetch(ctx, kc, q)
		case *kmsg.ProduceRequest:
			if q.Acks == 0 {
				return nil, fetchcache.CodePolicyViolation, nil // acks=0: no response is expected
			}
			r, code = s.produce(q)
		case *kmsg.SASLHandshakeRequest:
			r, code = s.saslHandshake(kc, q)
		case *kmsg.SASLAuthenticateRequest:
			r, code = s.saslAuthenticate(kc, q)
		}
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
	return appendResponse(nil, h.correlationID, r), code, nil
}

// sleep waits d or until the server stops.
func (kc *kafkaConn) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-kc.stopping:
	}
}

// unsupportedResponse answers an API (or version) the service does not
// serve: the response of the request's kind with every top-level error code
// set to UNSUPPORTED_VERSION. Responses without a top-level error code stay
// empty.
func unsupportedResponse(req kmsg.Request) kmsg.Response {
	r := req.ResponseKind()
	r.SetVersion(req.GetVersion())
	if d, ok := r.(interface{ Default() }); ok {
		d.Default()
		r.SetVersion(req.GetVersion())
	}
	v := reflect.ValueOf(r).Elem()
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 && f.CanSet() {
		f.SetInt(int64(kerr.UnsupportedVersion.Code))
	}
	return r
}

func (s *KafkaServer) apiVersions(q *kmsg.ApiVersionsRequest) kmsg.Response {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = q.Version
	r.ApiKeys = s.apiKeys
	return r
}

// broker is the host and port Metadata advertises on connection kc.
func (s *KafkaServer) broker(kc *kafkaConn) (string, int32) {
	if s.advert.set {
		return s.advert.host, s.advert.port
	}
	if kc != nil && kc.c != nil {
		if a, ok := kc.c.LocalAddr().(*net.TCPAddr); ok {
			return a.IP.String(), int32(a.Port)
		}
		if host, port, err := splitHostPort(kc.c.LocalAddr().String()); err == nil {
			return host, port
		}
	}
	return "localhost", 9092
}

func (s *KafkaServer) metadata(ctx context.Context, kc *kafkaConn, q *kmsg.MetadataRequest) (kmsg.Response, string) {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = q.Version
	host, port := s.broker(kc)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.o.NodeID, host, port
	r.Brokers = []kmsg.MetadataResponseBroker{b}
	cluster := s.o.ClusterID
	r.ClusterID = &cluster
	r.ControllerID = s.o.NodeID
	code := fetchcache.CodeOK

	topics, err := s.o.Catalog.Topics(ctx)
	if err != nil {
		s.log.Error("kafka metadata: list topics", "err", err)
		topics, code = nil, fetchcache.CodeInternal
	}
	byName := make(map[string]fetchcache.TopicInfo, len(topics))
	for _, t := range topics {
		byName[t.Name] = t
	}
	p := kc.principalOf()
	addTopic := func(t fetchcache.TopicInfo) {
		rt := kmsg.NewMetadataResponseTopic()
		name := t.Name
		rt.Topic = &name
		for _, p := range t.Partitions {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition = p
			rp.Leader = s.o.NodeID
			rp.LeaderEpoch = -1 // no epochs: clients skip KIP-320 validation
			rp.Replicas = []int32{s.o.NodeID}
			rp.ISR = []int32{s.o.NodeID}
			rp.OfflineReplicas = []int32{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	if q.Topics == nil || (q.Version == 0 && len(q.Topics) == 0) {
		for _, t := range topics {
			if s.o.Auth.Allowed(p, t.Name) { // all topics: the denied ones are left out
				addTopic(t)
			}
		}
		return r, code
	}
	for _, qt := range q.Topics {
		if qt.Topic == nil {
			rt := kmsg.NewMetadataResponseTopic()
			rt.TopicID = qt.TopicID
			rt.ErrorCode = kerr.UnknownTopicID.Code
			r.Topics = append(r.Topics, rt)
			if code == fetchcache.CodeOK {
				code = fetchcache.CodeUnknownTopicOrPartition
			}
			continue
		}
		if !s.allowed(kc, *qt.Topic) {
			rt := kmsg.NewMetadataResponseTopic()
			name := *qt.Topic
			rt.Topic = &name
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			r.Topics = append(r.Topics, rt)
			code = worse(code, fetchcache.CodeTopicAuthorizationFailed)
			continue
		}
		t, ok := byName[*qt.Topic]
		if !ok {
			rt := kmsg.NewMetadataResponseTopic()
			name := *qt.Topic
			rt.Topic = &name
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if err != nil {
				rt.ErrorCode = kerr.LeaderNotAvailable.Code // retriable: the catalog failed
			}
			r.Topics = append(r.Topics, rt)
			if code == fetchcache.CodeOK {
				code = fetchcache.CodeUnknownTopicOrPartition
			}
			continue
		}
		addTopic(t)
	}
	return r, code
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

func (s *KafkaServer) listOffsets(ctx context.Context, kc *kafkaConn, q *kmsg.ListOffsetsRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrListOffsetsResponse()
	r.Version = q.Version
	code := fetchcache.CodeOK
	var throttle time.Duration
	for _, qt := range q.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = qt.Topic
		allowed := s.allowed(kc, qt.Topic)
		for _, qp := range qt.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = qp.Partition
			if !allowed {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rp.Offset, rp.Timestamp = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
				code = worse(code, fetchcache.CodeTopicAuthorizationFailed)
				continue
			}
			off, ts, err := s.listOffset(ctx, qt.Topic, qp.Partition, qp.Timestamp, q.IsolationLevel == 1, q.Version)
			switch {
			case err == nil:
				rp.Offset, rp.Timestamp = off, ts
			case errors.Is(err, errBadListTimestamp):
				rp.ErrorCode = kerr.InvalidRequest.Code
				code = worse(code, fetchcache.CodeInvalidRequest)
			default:
				if d, ok := gate.RetryAfter(err); ok {
					// Retriable, and says why; the throttle paces the retry.
					rp.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
					throttle = max(throttle, d)
					code = worse(code, fetchcache.CodeThrottled)
					break
				}
				var c string
				rp.ErrorCode, c = s.partitionError("list offsets", qt.Topic, qp.Partition, err)
				code = worse(code, c)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, code, throttle
}

var errBadListTimestamp = errors.New("unsupported ListOffsets timestamp")

// listOffset resolves one ListOffsets query the way Kafka's
// fetchOffsetForTimestamp does; no match is offset -1, timestamp -1.
func (s *KafkaServer) listOffset(ctx context.Context, topic string, partition int32, ts int64, committed bool, version int16) (int64, int64, error) {
	part, err := s.o.Catalog.Partition(ctx, topic, partition)
	if err != nil {
		return 0, 0, err
	}
	off, err := part.Offsets(ctx)
	if err != nil {
		return 0, 0, err
	}
	limit := off.LogEnd
	if committed {
		limit = off.LastStable
	}
	switch {
	case ts == listEarliest:
		return off.LogStart, -1, nil
	case ts == listLatest:
		return limit, -1, nil
	case ts == listMaxTimestamp && version >= 7:
		sl, ok := part.(fetchcache.SegmentLister)
		if !ok {
			return 0, 0, fmt.Errorf("%w: max timestamp needs segment listing", errBadListTimestamp)
		}
		segs, err := sl.Segments(ctx)
		if err != nil {
			return 0, 0, err
		}
		maxTS := int64(-1)
		for _, seg := range segs {
			if seg.NextOffset > off.LogStart {
				maxTS = max(maxTS, seg.MaxTimestamp)
			}
		}
		if maxTS < 0 {
			return -1, -1, nil
		}
		ts = maxTS
	case ts < 0:
		return 0, 0, fmt.Errorf("%w: %d", errBadListTimestamp, ts)
	}
	o, t, found, err := part.OffsetForTimestamp(ctx, ts)
	if err != nil {
		return 0, 0, err
	}
	if !found || o >= limit {
		return -1, -1, nil
	}
	return o, t, nil
}

func (s *KafkaServer) produce(q *kmsg.ProduceRequest) (kmsg.Response, string) {
	r := kmsg.NewPtrProduceResponse()
	r.Version = q.Version
	for _, qt := range q.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = qt.Topic
		for _, qp := range qt.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = qp.Partition
			rp.ErrorCode = kerr.PolicyViolation.Code
			msg := produceRefusal
			rp.ErrorMessage = &msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r, fetchcache.CodePolicyViolation
}

// fetchPart is one requested partition's state during a Fetch.
type fetchPart struct {
	topic  string
	q      kmsg.FetchRequestTopicPartition
	part   fetchcache.Partition
	resp   *kmsg.FetchResponseTopicPartition
	failed bool // answered with an error: no waiting for it
}

func (s *KafkaServer) fetch(ctx context.Context, kc *kafkaConn, q *kmsg.FetchRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrFetchResponse()
	r.Version = q.Version
	r.SessionID = 0 // sessionless: clients then send full fetches
	if q.Version >= 7 && q.SessionEpoch != 0 && q.SessionEpoch != -1 {
		// An incremental fetch of a session we never created.
		r.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return r, fetchcache.CodeInvalidRequest, 0
	}
	committed := q.IsolationLevel == 1
	var parts []*fetchPart
	for _, qt := range q.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = qt.Topic
		rt.TopicID = qt.TopicID
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(qt.Partitions))
		r.Topics = append(r.Topics, rt)
	}
	denied := fetchcache.CodeOK
	for i, qt := range q.Topics {
		allowed := s.allowed(kc, qt.Topic)
		for j, qp := range qt.Partitions {
			rp := &r.Topics[i].Partitions[j]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition = qp.Partition
			if !allowed {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rp.RecordBatches = []byte{}
				denied = fetchcache.CodeTopicAuthorizationFailed
				continue
			}
			parts = append(parts, &fetchPart{topic: qt.Topic, q: qp, resp: rp})
		}
	}

	maxTotal := s.o.FetchMaxBytes
	if q.MaxBytes > 0 {
		maxTotal = min(maxTotal, int(q.MaxBytes))
	}
	wait := min(time.Duration(max(q.MaxWaitMillis, 0))*time.Millisecond, s.o.MaxFetchWait)
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for {
		total, code, throttle := s.fetchOnce(ctx, parts, maxTotal, committed)
		code = worse(denied, code)
		if total > 0 || code != fetchcache.CodeOK || throttle > 0 || q.MinBytes <= 0 || wait <= 0 || !time.Now().Before(deadline) {
			return r, code, throttle
		}
		if !s.waitForData(ctx, kc, parts, committed, deadline) {
			return r, code, throttle
		}
	}
}

// fetchOnce fills every partition's response once. The first partition with
// data gets at least one whole batch even when it exceeds the byte limits
// (KIP-74); later ones get only what fits.
func (s *KafkaServer) fetchOnce(ctx context.Context, parts []*fetchPart, maxTotal int, committed bool) (int, string, time.Duration) {
	total := 0
	code := fetchcache.CodeOK
	var throttle time.Duration
	for _, fp := range parts {
		rp := fp.resp
		*rp = kmsg.NewFetchResponseTopicPartition()
		rp.Partition = fp.q.Partition
		// Never null: librdkafka refuses a null record set ("invalid
		// MessageSetSize -1").
		rp.RecordBatches = []byte{}
		fp.failed = false
		fail := func(op string, err error) {
			if d, ok := gate.RetryAfter(err); ok {
				// Kafka's fetch throttling, whatever step was overloaded
				// (opening the partition, its manifest, the read): no
				// error, no data, and throttle_time_ms tells the client
				// when to come back.
				throttle = max(throttle, d)
				code = worse(code, fetchcache.CodeThrottled)
				return
			}
			var c string
			rp.ErrorCode, c = s.partitionError(op, fp.topic, fp.q.Partition, err)
			code = worse(code, c)
			fp.failed = true
		}
		if fp.part == nil {
			p, err := s.o.Catalog.Partition(ctx, fp.topic, fp.q.Partition)
			if err != nil {
				fail("fetch", err)
				continue
			}
			fp.part = p
		}
		off, err := fp.part.Offsets(ctx)
		if err != nil {
			fail("fetch offsets", err)
			continue
		}
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.LogEnd, off.LastStable, off.LogStart
		if committed {
			rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		}
		offset := fp.q.FetchOffset
		if offset < off.LogStart || offset > off.LogEnd {
			// fetchcache.Offsets may come from a cache (a remote manifest); a read
			// past the end re-reads it, and decides.
			if _, err := fp.part.Read(ctx, offset, 1); err != nil {
				if _, ok := gate.RetryAfter(err); !ok {
					fail("fetch", err)
					continue
				}
			}
			if off, err = fp.part.Offsets(ctx); err != nil {
				fail("fetch offsets", err)
				continue
			}
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = off.LogEnd, off.LastStable, off.LogStart
			if offset < off.LogStart || offset > off.LogEnd {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
				code = worse(code, fetchcache.CodeOffsetOutOfRange)
				fp.failed = true
				continue
			}
		}
		limit := off.LogEnd
		if committed {
			limit = off.LastStable
		}
		budget := min(int(max(fp.q.PartitionMaxBytes, 0)), maxTotal-total)
		if offset >= limit || budget <= 0 && total > 0 {
			continue
		}
		// Shared cache memory where possible: the response only reads it.
		data, err := fetchcache.ReadShared(ctx, fp.part, offset, max(budget, 1))
		if err != nil {
			fail("fetch", err)
			continue
		}
		data, last := cutAt(data, limit)
		if len(data) == 0 || (total > 0 && len(data) > budget) {
			continue
		}
		rp.RecordBatches = data
		total += len(data)
		if committed {
			txns, err := fp.part.AbortedTxns(ctx, offset, last)
			if err != nil {
				rp.RecordBatches = nil
				total -= len(data)
				fail("fetch aborted transactions", err)
				continue
			}
			for _, t := range txns {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = t.ProducerID, t.FirstOffset
				rp.AbortedTransactions = append(rp.AbortedTransactions, at)
			}
		}
	}
	return total, code, throttle
}

// cutAt drops the batches of whole batches data that start at or after
// limit (the high watermark or the last stable offset) and returns the
// offset after the last batch kept.
func cutAt(data []byte, limit int64) ([]byte, int64) {
	it := record.NewIter(data)
	var next int64
	for {
		pos := it.Pos()
		b, ok := it.Next()
		if !ok {
			return data[:pos], next
		}
		if b.BaseOffset() >= limit {
			return data[:pos], next
		}
		next = b.NextOffset()
	}
}

// waitForData polls the partitions' offsets until one has data past its
// fetch offset (true) or the deadline passes or the server stops (false).
func (s *KafkaServer) waitForData(ctx context.Context, kc *kafkaConn, parts []*fetchPart, committed bool, deadline time.Time) bool {
	tick := time.NewTicker(s.o.FetchPollInterval)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var stopping <-chan struct{}
	if kc != nil {
		stopping = kc.stopping
	}
	for {
		select {
		case <-timer.C:
			return false
		case <-stopping:
			return false
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		for _, fp := range parts {
			if fp.part == nil || fp.failed {
				continue
			}
			off, err := fp.part.Offsets(ctx)
			if err != nil {
				return true // let the fetch report it
			}
			limit := off.LogEnd
			if committed {
				limit = off.LastStable
			}
			if limit > fp.q.FetchOffset || off.LogStart > fp.q.FetchOffset {
				return true
			}
		}
	}
}
