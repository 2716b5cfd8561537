package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/gate"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/producer"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

const headerRetryAfterSeconds = "1"

// CreateTopicRequest is the body of POST /v1/topics.
type CreateTopicRequest struct {
	Topic      string            `json:"topic"`
	Partitions int               `json:"partitions"`
	Configs    map[string]string `json:"configs"`
}

// AlterConfigRequest is the body of PATCH /v1/topics/{topic}/config: the
// overrides to set and the ones to delete (back to the default).
type AlterConfigRequest struct {
	Set    map[string]string `json:"set"`
	Delete []string          `json:"delete"`
}

// TopicDescription is the answer of the topic endpoints: the shape of
// `tiered topic describe --json`, with each config's source (default,
// broker or override).
type TopicDescription struct {
	Topic      string                    `json:"topic"`
	Partitions []localtier.PartitionDesc `json:"partitions"`
	Configs    []ConfigEntry             `json:"configs"`
}

// ConfigEntry is one topic config.
type ConfigEntry struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	IsDefault bool   `json:"is_default"`
	Source    string `json:"source"` // "default", "broker" or "override"
}

// routes adds serve's write and admin API to the fetch service's mux.
func (s *Serve) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/topics", s.createTopic)
	mux.HandleFunc("GET /v1/topics/{topic}/config", s.describeTopic)
	mux.HandleFunc("PATCH /v1/topics/{topic}/config", s.alterTopic)
	mux.HandleFunc("POST /v1/topics/{topic}/records", s.produce)
	mux.HandleFunc("POST /v1/topics/{topic}/partitions/{partition}/records", s.produce)
	mux.HandleFunc("POST /v1/admin/reload", s.reload)
}

// failErr answers err with the status and code its type calls for: the
// write routes' own errors (recovering, body too large, bad input lines, a
// record the log refuses), then Kafka's errors through the /v1 API's one
// table (httpapi.ErrorStatus: unknown topic, topic exists, invalid topic or
// config, storage error, ...), whose codes are fetchcache's.
func (s *Serve) failErr(w http.ResponseWriter, r *http.Request, err error) {
	var (
		nr  *notReadyError
		mbe *http.MaxBytesError
		ie  *producer.InputError
		re  *localtier.InvalidRecordError
	)
	switch {
	case errors.As(err, &nr):
		w.Header().Set("Retry-After", headerRetryAfterSeconds)
		httpapi.Fail(w, http.StatusServiceUnavailable, fetchcache.CodeLeaderNotAvailable, err.Error())
	case errors.As(err, &mbe):
		httpapi.Fail(w, http.StatusRequestEntityTooLarge, fetchcache.CodeRecordListTooLarge, fmt.Sprintf("request body is larger than %d bytes; send fewer records per request", mbe.Limit))
	case errors.As(err, &ie):
		httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidRecord, err.Error())
	case errors.As(err, &re):
		httpapi.Fail(w, http.StatusBadRequest, re.Code, err.Error())
	default:
		status, code := httpapi.ErrorStatus(err)
		switch {
		case code == fetchcache.CodeThrottled:
			d, _ := gate.RetryAfter(err)
			w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10))
		case status >= 500 && r.Context().Err() == nil:
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
		}
		httpapi.Fail(w, status, code, err.Error())
	}
}

// decodeBody decodes a small JSON body strictly.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %v", err)
	}
	return nil
}

func (s *Serve) describe(d *localtier.LogDir, topic string) (TopicDescription, error) {
	t, ok := d.Topic(topic)
	if !ok {
		return TopicDescription{}, &localtier.UnknownTopicOrPartitionError{Topic: topic, Partition: -1}
	}
	desc, err := d.DescribeTopic(topic)
	if err != nil {
		return TopicDescription{}, err
	}
	layers, err := config.DescribeLayers(d.TopicDefaults(), t.Overrides)
	if err != nil {
		return TopicDescription{}, err
	}
	out := TopicDescription{Topic: topic, Partitions: desc.Partitions, Configs: make([]ConfigEntry, len(layers))}
	if out.Partitions == nil {
		out.Partitions = []localtier.PartitionDesc{}
	}
	for i, e := range layers {
		out.Configs[i] = ConfigEntry{Name: e.Name, Value: e.Value, IsDefault: e.Source != config.LayerOverride, Source: e.Source}
	}
	return out, nil
}

func (s *Serve) createTopic(w http.ResponseWriter, r *http.Request) {
	var req CreateTopicRequest
	if err := decodeBody(r, &req); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidRequest, err.Error())
		return
	}
	if req.Partitions == 0 {
		req.Partitions = int(max(1, s.settings.NumPartitions))
	}
	if req.Partitions < 1 || req.Partitions > localtier.MaxPartitions {
		httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidPartitions, fmt.Sprintf("partitions %d is out of range: must be between 1 and %d", req.Partitions, localtier.MaxPartitions))
		return
	}
	if err := s.waitReady(r.Context()); err != nil {
		s.failErr(w, r, err)
		return
	}
	d := s.LogDir()
	for _, other := range d.Topics() {
		if other != req.Topic && topicconfig.CollidesWith(req.Topic, other) {
			httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidTopic, fmt.Sprintf("topic %q collides with existing topic %q: '.' and '_' are treated as the same character in metric names", req.Topic, other))
			return
		}
	}
	if _, err := d.CreateTopic(req.Topic, req.Partitions, req.Configs); err != nil {
		s.failErr(w, r, err)
		return
	}
	desc, err := s.describe(d, req.Topic)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, desc)
}

func (s *Serve) describeTopic(w http.ResponseWriter, r *http.Request) {
	if err := s.waitReady(r.Context()); err != nil {
		s.failErr(w, r, err)
		return
	}
	desc, err := s.describe(s.LogDir(), r.PathValue("topic"))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, desc)
}

func (s *Serve) alterTopic(w http.ResponseWriter, r *http.Request) {
	var req AlterConfigRequest
	if err := decodeBody(r, &req); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidRequest, err.Error())
		return
	}
	if len(req.Set) == 0 && len(req.Delete) == 0 {
		httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidRequest, `nothing to alter: give "set" and/or "delete"`)
		return
	}
	known := map[string]bool{}
	for _, n := range topicconfig.Names() {
		known[n] = true
	}
	for _, k := range req.Delete {
		if !known[k] {
			httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidConfig, fmt.Sprintf("Unknown topic config name: %s", k))
			return
		}
	}
	if err := s.waitReady(r.Context()); err != nil {
		s.failErr(w, r, err)
		return
	}
	d := s.LogDir()
	topic := r.PathValue("topic")
	if err := d.AlterTopic(topic, req.Set, req.Delete); err != nil {
		s.failErr(w, r, err)
		return
	}
	desc, err := s.describe(d, topic)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, desc)
}

// produce appends the JSON-lines body: to one partition, or (no
// {partition}) through the default partitioner. ?auto_create=false refuses
// to create a missing topic.
func (s *Serve) produce(w http.ResponseWriter, r *http.Request) {
	o := producer.Options{Partition: -1, AutoCreate: true}
	if ps := r.PathValue("partition"); ps != "" {
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil {
			httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("partition %q is not a 32-bit integer", ps))
			return
		}
		if p < 0 {
			s.failErr(w, r, &localtier.UnknownTopicOrPartitionError{Topic: r.PathValue("topic"), Partition: int32(p)})
			return
		}
		o.Partition = int(p)
	}
	for k, vs := range r.URL.Query() {
		switch {
		case k == "auto_create" && len(vs) == 1 && (vs[0] == "true" || vs[0] == "false"):
			o.AutoCreate = vs[0] == "true"
		default:
			httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeInvalidRequest, fmt.Sprintf("unknown or bad query parameter %q (allowed: auto_create=true|false)", k))
			return
		}
	}
	in, err := producer.ReadLines(http.MaxBytesReader(w, r.Body, MaxProduceBodyBytes), s.o.Now().UnixMilli(), "request body")
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	res, err := s.Produce(r.Context(), r.PathValue("topic"), in, o)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}

func (s *Serve) reload(w http.ResponseWriter, r *http.Request) {
	if err := s.Reload(); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, fetchcache.CodeReloadFailed, err.Error())
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
}
