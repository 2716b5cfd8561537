package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/producer"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

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

// serveWriter is serve's side of the /v1 write API (httpapi.Writer): its
// log engine's topics and the producer, each answer after recovery.
type serveWriter struct{ s *Serve }

func (w serveWriter) CreateTopic(ctx context.Context, req httpapi.CreateTopicRequest) (any, error) {
	s := w.s
	if req.Partitions == 0 {
		req.Partitions = int(max(1, s.settings.NumPartitions))
	}
	if req.Partitions < 1 || req.Partitions > localtier.MaxPartitions {
		return nil, &httpapi.Error{Status: http.StatusBadRequest, Code: fetchcache.CodeInvalidPartitions,
			Message: fmt.Sprintf("partitions %d is out of range: must be between 1 and %d", req.Partitions, localtier.MaxPartitions)}
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, writeError(err)
	}
	d := s.LogDir()
	for _, other := range d.Topics() {
		if other != req.Topic && topicconfig.CollidesWith(req.Topic, other) {
			return nil, &httpapi.Error{Status: http.StatusBadRequest, Code: fetchcache.CodeInvalidTopic,
				Message: fmt.Sprintf("topic %q collides with existing topic %q: '.' and '_' are treated as the same character in metric names", req.Topic, other)}
		}
	}
	if _, err := d.CreateTopic(req.Topic, req.Partitions, req.Configs); err != nil {
		return nil, writeError(err)
	}
	return w.describe(d, req.Topic)
}

func (w serveWriter) DescribeTopic(ctx context.Context, topic string) (any, error) {
	if err := w.s.waitReady(ctx); err != nil {
		return nil, writeError(err)
	}
	return w.describe(w.s.LogDir(), topic)
}

func (w serveWriter) AlterTopic(ctx context.Context, topic string, req httpapi.AlterConfigRequest) (any, error) {
	known := map[string]bool{}
	for _, n := range topicconfig.Names() {
		known[n] = true
	}
	for _, k := range req.Delete {
		if !known[k] {
			return nil, &httpapi.Error{Status: http.StatusBadRequest, Code: fetchcache.CodeInvalidConfig, Message: fmt.Sprintf("Unknown topic config name: %s", k)}
		}
	}
	if err := w.s.waitReady(ctx); err != nil {
		return nil, writeError(err)
	}
	d := w.s.LogDir()
	if err := d.AlterTopic(topic, req.Set, req.Delete); err != nil {
		return nil, writeError(err)
	}
	return w.describe(d, topic)
}

func (w serveWriter) Produce(ctx context.Context, topic string, partition int32, autoCreate bool, body io.Reader) (any, error) {
	in := producer.Lines(body, w.s.o.Now().UnixMilli(), "request body")
	o := producer.Options{Partition: int(partition), AutoCreate: autoCreate}
	if h, ok := body.(httpapi.Holder); ok {
		o.Hold = h.Hold // the encoded batches count against the produce budget
	}
	res, err := w.s.Produce(ctx, topic, in, o)
	if err != nil {
		return nil, writeError(err)
	}
	return res, nil
}

func (w serveWriter) Reload(context.Context) error {
	if err := w.s.Reload(); err != nil {
		return &httpapi.Error{Status: http.StatusBadRequest, Code: fetchcache.CodeReloadFailed, Message: err.Error()}
	}
	return nil
}

func (w serveWriter) describe(d *localtier.LogDir, topic string) (any, error) {
	desc, err := w.s.describe(d, topic)
	if err != nil {
		return nil, writeError(err)
	}
	return desc, nil
}

// writeError turns what only serve knows into the answer the write API
// gives it (a process still recovering: 503 LEADER_NOT_AVAILABLE; bad input
// lines: 400 INVALID_RECORD; a record the log refuses: 400 with its Kafka
// code); Kafka's errors and a body over the limit pass through, for the
// API's one table.
func writeError(err error) error {
	var (
		nr  *notReadyError
		mbe *http.MaxBytesError
		ie  *producer.InputError
		re  *localtier.InvalidRecordError
	)
	switch {
	case errors.As(err, &nr):
		return &httpapi.Error{Status: http.StatusServiceUnavailable, Code: fetchcache.CodeLeaderNotAvailable, Message: err.Error(), RetryAfter: time.Second}
	case errors.As(err, &mbe):
		return err
	case errors.As(err, &re): // before InputError, which may carry one (a line's timestamp)
		return &httpapi.Error{Status: http.StatusBadRequest, Code: re.Code, Message: err.Error()}
	case errors.As(err, &ie):
		return &httpapi.Error{Status: http.StatusBadRequest, Code: fetchcache.CodeInvalidRecord, Message: err.Error()}
	}
	return err
}
