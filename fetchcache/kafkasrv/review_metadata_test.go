package kafkasrv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// listFailsCatalog is a catalog whose topic listing fails (a bucket
// listing that timed out, say) while its partitions are served.
type listFailsCatalog struct{ fetchcache.Catalog }

func (listFailsCatalog) Topics(context.Context) ([]fetchcache.TopicInfo, error) {
	return nil, errors.New("list manifests: connection reset")
}

// TestReviewMetadataAllTopicsListingFails holds that a Metadata request
// for all topics is never answered with an empty topic list because the
// catalog's listing failed. Clients take that answer as the cluster's
// topics: a consumer subscribed by pattern (Java's subscribe(Pattern),
// franz-go's regex consuming) drops every partition and rebalances its
// group to nothing, until its next metadata refresh (5 minutes in Java). A
// Kafka broker answers from its metadata cache; here the request gets no
// answer and the connection is closed, which clients retry, keeping the
// metadata they had. Topics asked by name get LEADER_NOT_AVAILABLE, which
// they retry.
func TestReviewMetadataAllTopicsListingFails(t *testing.T) {
	e := fetchkit.NewEnv(t)
	e.Topic("a", 1, nil)
	addr := startKafka(t, listFailsCatalog{e.Cat}, KafkaOptions{})
	for _, v := range []int16{0, 1, 12} {
		rc := fetchkit.DialRaw(t, addr)
		_ = rc.C.SetDeadline(time.Now().Add(5 * time.Second))
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means all
		}
		resp := kmsg.NewPtrMetadataResponse()
		if err := rc.Request(31, req, resp); err == nil {
			t.Fatalf("v%d: all topics answered with %d topics while the listing failed", v, len(resp.Topics))
		} else if isTimeout(err) {
			t.Fatalf("v%d: no answer and the connection left open: %v", v, err)
		}
	}
	// By name: a retriable error for the topic.
	rc := fetchkit.DialRaw(t, addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	name := "a"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	resp := kmsg.NewPtrMetadataResponse()
	if err := rc.Request(32, req, resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("topic by name while the listing fails: %+v", resp.Topics)
	}
}

// TestReviewMetadataTopicIDNotAuthorized holds that Metadata v12 asking by
// ID for a topic the principal may not describe answers
// TOPIC_AUTHORIZATION_FAILED, as Kafka does ("topic IDs are not considered
// sensitive information"; the name is left out), not UNKNOWN_TOPIC_ID: an
// admin client describing topics by ID was told the topic does not exist
// when it lacked the permission.
func TestReviewMetadataTopicIDNotAuthorized(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		t.Fatal(err)
	}
	cat := idCatalog{Catalog: e.Cat, IDs: map[string]string{"orders": testTopicID, "secret": otherTopicID}}
	addr := startKafka(t, cat, KafkaOptions{Auth: z})
	cl := fetchkit.MustClient(t, kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: fetchkit.PassAlice}.AsMechanism()))
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, id := range []string{testTopicID, otherTopicID} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.TopicID = topicIDBytes(id)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 {
		t.Fatalf("topics %+v", resp.Topics)
	}
	if r := resp.Topics[0]; r.ErrorCode != 0 || r.Topic == nil || *r.Topic != "orders" {
		t.Fatalf("orders by id: %+v", r)
	}
	if r := resp.Topics[1]; r.ErrorCode != kerr.TopicAuthorizationFailed.Code || r.Topic != nil || r.TopicID != topicIDBytes(otherTopicID) || len(r.Partitions) != 0 {
		t.Fatalf("secret by id: code %d, topic %v, id %v, %d partitions; want TOPIC_AUTHORIZATION_FAILED, no name, its id",
			r.ErrorCode, r.Topic, r.TopicID, len(r.Partitions))
	}
}
