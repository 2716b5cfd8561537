package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
)

func saslOpt(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

// partitionErrors asks Fetch and ListOffsets for partition 0 of each topic
// and returns each topic's two error codes.
func partitionErrors(t *testing.T, cl *kgo.Client, topics ...string) map[string][2]int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxBytes, fetch.SessionEpoch, fetch.ReplicaID = 12, 1<<20, -1, -1
	list := kmsg.NewPtrListOffsetsRequest()
	list.Version, list.ReplicaID = 7, -1
	for _, tp := range topics {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = tp
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = tp
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		list.Topics = append(list.Topics, lt)
	}
	out := map[string][2]int16{}
	// Requests go to the broker directly, so topic metadata the client may
	// not see does not stop them; a metadata request discovers it.
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	b := cl.Broker(0)
	fr, err := fetch.RequestWith(ctx, b)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	for _, rt := range fr.Topics {
		e := out[rt.Topic]
		e[0] = rt.Partitions[0].ErrorCode
		if e[0] == 0 && len(rt.Partitions[0].RecordBatches) == 0 {
			t.Fatalf("fetch %s: no data", rt.Topic)
		}
		if e[0] != 0 && len(rt.Partitions[0].RecordBatches) != 0 {
			t.Fatalf("fetch %s: error %d with data", rt.Topic, e[0])
		}
		out[rt.Topic] = e
	}
	lr, err := list.RequestWith(ctx, b)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	for _, rt := range lr.Topics {
		e := out[rt.Topic]
		e[1] = rt.Partitions[0].ErrorCode
		out[rt.Topic] = e
	}
	return out
}

// checkAccess asserts which of fetchkit.AuthTopics a client reads on both Fetch and
// ListOffsets, and which Metadata lists.
func checkAccess(t *testing.T, cl *kgo.Client, allowed ...string) {
	t.Helper()
	errs := partitionErrors(t, cl, fetchkit.AuthTopics...)
	for _, tp := range fetchkit.AuthTopics {
		want := int16(0)
		if !slices.Contains(allowed, tp) {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if got := errs[tp]; got != [2]int16{want, want} {
			t.Errorf("%s: fetch/list offsets errors %v, want %d", tp, got, want)
		}
	}
	ctx := context.Background()
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Topics.Names(); !slices.Equal(got, allowed) {
		t.Errorf("metadata lists %v, want %v", got, allowed)
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range fetchkit.AuthTopics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, rt := range resp.Topics {
		want := int16(0)
		if !slices.Contains(allowed, fetchkit.AuthTopics[i]) {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if *rt.Topic != fetchkit.AuthTopics[i] || rt.ErrorCode != want || (want == 0) != (len(rt.Partitions) == 1) {
			t.Errorf("metadata for %s: %+v", fetchkit.AuthTopics[i], rt)
		}
	}
}

func TestKafkaSASLOverTLS(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	pki := fetchkit.NewPKI(t, "kafka")
	s := startSecureServer(t, e.Cat, fetchkit.MustSecurity(t, auth.TLS{}, pki.ServerTLS(false), fetchkit.AuthConfig()))
	tlsOpt := kgo.DialTLSConfig(pki.ClientTLS())

	t.Run("alice", func(t *testing.T) {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), tlsOpt, saslOpt("alice", fetchkit.PassAlice))
		checkAccess(t, cl, "orders", "orders-eu")
		want := testrecs.FromLog(t, e.Log("orders-eu", 0))
		fetchkit.SameRecs(t, testrecs.ConsumeKgo(t, s.kafka, "orders-eu", 0, kgo.NewOffset().AtStart(), len(want), tlsOpt, saslOpt("alice", fetchkit.PassAlice)), want)
	})
	t.Run("bob", func(t *testing.T) {
		checkAccess(t, fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), tlsOpt, saslOpt("bob", fetchkit.PassBob)), "secret")
	})
	t.Run("wrong_password", func(t *testing.T) {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), tlsOpt, saslOpt("alice", fetchkit.WrongPass), kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := kadm.NewClient(cl).Metadata(ctx)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("metadata with a wrong password: %v", err)
		}
	})
	t.Run("no_sasl", func(t *testing.T) {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), tlsOpt, kgo.RequestRetries(0))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(cl).Metadata(ctx); err == nil {
			t.Fatal("metadata without SASL answered")
		}
	})
	if len(s.logs.Lines("topic access denied", "interface=kafka", "principal=User:bob", "mechanism=sasl_plain", "permission=read", "topic=orders ")) != 1 {
		t.Fatalf("no single denial line for bob on orders:\n%s", s.logs)
	}
	if len(s.logs.Lines("authentication failed", "interface=kafka", "username=alice")) != 1 {
		t.Fatalf("no failed-login line for alice:\n%s", s.logs)
	}
}

func TestKafkaMutualTLS(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	pki := fetchkit.NewPKI(t, "kmtls")
	rogue := fetchkit.NewPKI(t, "krogue")
	_, _, certA := pki.Client(fetchkit.ClientACN)
	_, _, certRogue := rogue.Client(fetchkit.ClientACN)
	s := startSecureServer(t, e.Cat, fetchkit.MustSecurity(t, auth.TLS{}, pki.ServerTLS(true), fetchkit.AuthConfig()))

	t.Run("certificate_principal", func(t *testing.T) {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), kgo.DialTLSConfig(pki.ClientTLS(certA)))
		checkAccess(t, cl, "public.x")
	})
	t.Run("sasl_replaces_certificate", func(t *testing.T) {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), kgo.DialTLSConfig(pki.ClientTLS(certA)), saslOpt("bob", fetchkit.PassBob))
		checkAccess(t, cl, "secret")
	})
	for name, cfg := range map[string]*tls.Config{"no_certificate": pki.ClientTLS(), "rogue_ca": pki.ClientTLS(certRogue)} {
		t.Run(name, func(t *testing.T) {
			cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), kgo.DialTLSConfig(cfg), kgo.RequestRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := kadm.NewClient(cl).Metadata(ctx); err == nil {
				t.Fatal("served without a valid client certificate")
			}
		})
	}
	if len(s.logs.Lines("topic access denied", "principal=User:"+fetchkit.ClientACN, "mechanism=mtls")) == 0 {
		t.Fatalf("no denial line for the certificate principal:\n%s", s.logs)
	}
}

// saslConn is a raw connection to a SASL-requiring listener.
type saslConn struct {
	*fetchkit.RawConn
	corr int32
}

func dialSASL(t *testing.T, addr string) *saslConn {
	return &saslConn{RawConn: fetchkit.DialRaw(t, addr)}
}

// request sends req and decodes the response into resp.
func (c *saslConn) request(req kmsg.Request, resp kmsg.Response) {
	c.T.Helper()
	c.corr++
	if err := c.Request(c.corr, req, resp); err != nil {
		c.T.Fatal(err)
	}
}

func (c *saslConn) handshake(version int16, mechanism string) *kmsg.SASLHandshakeResponse {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mechanism
	resp := kmsg.NewPtrSASLHandshakeResponse()
	c.request(req, resp)
	return resp
}

func (c *saslConn) authenticate(version int16, msg string) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, []byte(msg)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	c.request(req, resp)
	return resp
}

func (c *saslConn) metadata() *kmsg.MetadataResponse {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	resp := kmsg.NewPtrMetadataResponse()
	c.request(req, resp)
	return resp
}

// expectClosed asserts the server closes the connection (EOF, not a
// timeout) without sending anything more.
func (c *saslConn) expectClosed() {
	c.T.Helper()
	_ = c.C.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if n, err := c.C.Read(b[:]); n != 0 || !errors.Is(err, io.EOF) {
		c.T.Fatalf("connection not closed: read %d bytes, %v", n, err)
	}
}

func TestKafkaSASLProtocol(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		t.Fatal(err)
	}
	logs := &fetchkit.LogCapture{}
	addr := startKafka(t, e.Cat, kafkasrv.KafkaOptions{Auth: z, Logger: logs.Logger()})
	good := "\x00alice\x00" + fetchkit.PassAlice

	t.Run("api_versions_lists_sasl", func(t *testing.T) {
		c := dialSASL(t, addr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		resp := kmsg.NewPtrApiVersionsResponse()
		c.request(req, resp)
		var keys []int16
		for _, k := range resp.ApiKeys {
			keys = append(keys, k.ApiKey)
		}
		if !slices.Contains(keys, kmsg.SASLHandshake.Int16()) || !slices.Contains(keys, kmsg.SASLAuthenticate.Int16()) {
			t.Fatalf("api keys %v", keys)
		}
	})
	t.Run("request_before_auth_closes", func(t *testing.T) {
		c := dialSASL(t, addr)
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		c.Send(kmsg.Metadata.Int16(), 9, 1, true, req.AppendTo(nil))
		c.expectClosed()
	})
	t.Run("sasl_before_api_versions", func(t *testing.T) {
		c := dialSASL(t, addr)
		if r := c.handshake(1, "PLAIN"); r.ErrorCode != 0 || !slices.Equal(r.SupportedMechanisms, []string{"PLAIN"}) {
			t.Fatalf("handshake: %+v", r)
		}
		if r := c.authenticate(2, good); r.ErrorCode != 0 || r.ErrorMessage != nil {
			t.Fatalf("authenticate: %+v", r)
		}
		if md := c.metadata(); len(md.Topics) != 2 {
			t.Fatalf("alice sees %d topics", len(md.Topics))
		}
		// Re-authentication is not offered.
		if r := c.handshake(1, "PLAIN"); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("second handshake: %+v", r)
		}
		c.expectClosed()
	})
	t.Run("authenticate_v0_v1", func(t *testing.T) {
		for _, v := range []int16{0, 1} {
			c := dialSASL(t, addr)
			c.handshake(1, "PLAIN")
			if r := c.authenticate(v, "alice\x00alice\x00"+fetchkit.PassAlice); r.ErrorCode != 0 {
				t.Fatalf("v%d: %+v", v, r)
			}
			if md := c.metadata(); len(md.Topics) != 2 {
				t.Fatalf("v%d: alice sees %d topics", v, len(md.Topics))
			}
		}
	})
	t.Run("wrong_mechanism", func(t *testing.T) {
		c := dialSASL(t, addr)
		r := c.handshake(1, "SCRAM-SHA-256")
		if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(r.SupportedMechanisms, []string{"PLAIN"}) {
			t.Fatalf("handshake: %+v", r)
		}
		c.expectClosed()
	})
	t.Run("wrong_password", func(t *testing.T) {
		c := dialSASL(t, addr)
		c.handshake(1, "PLAIN")
		r := c.authenticate(2, "\x00alice\x00"+fetchkit.WrongPass)
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != kafkasrv.SASLBadCredentials {
			t.Fatalf("authenticate: %+v", r)
		}
		c.expectClosed()
	})
	t.Run("unknown_user", func(t *testing.T) {
		c := dialSASL(t, addr)
		c.handshake(1, "PLAIN")
		if r := c.authenticate(2, "\x00"+fetchkit.WrongPass+"\x00"+fetchkit.PassAlice); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("authenticate: %+v", r)
		}
		c.expectClosed()
	})
	t.Run("malformed_and_authzid", func(t *testing.T) {
		for _, msg := range []string{"alice" + fetchkit.PassAlice, "bob\x00alice\x00" + fetchkit.PassAlice} {
			c := dialSASL(t, addr)
			c.handshake(1, "PLAIN")
			if r := c.authenticate(2, msg); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				t.Fatalf("authenticate: %+v", r)
			}
			c.expectClosed()
		}
	})
	t.Run("request_between_handshake_and_authenticate_closes", func(t *testing.T) {
		c := dialSASL(t, addr)
		c.handshake(1, "PLAIN")
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		c.Send(kmsg.ApiVersions.Int16(), 3, 3, true, req.AppendTo(nil))
		c.expectClosed()
	})
	t.Run("authenticate_without_handshake", func(t *testing.T) {
		c := dialSASL(t, addr)
		if r := c.authenticate(2, good); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("authenticate: %+v", r)
		}
		c.expectClosed()
	})
	t.Run("handshake_v0_raw_token", func(t *testing.T) {
		raw := func(c *saslConn, token string) {
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(token)))
			if _, err := c.C.Write(append(frame, token...)); err != nil {
				t.Fatal(err)
			}
		}
		c := dialSASL(t, addr)
		if r := c.handshake(0, "PLAIN"); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: %+v", r)
		}
		raw(c, "\x00bob\x00"+fetchkit.PassBob)
		var size [4]byte
		if _, err := io.ReadFull(c.C, size[:]); err != nil || size != [4]byte{} {
			t.Fatalf("raw token answer %v, %v; want an empty frame", size, err)
		}
		if md := c.metadata(); len(md.Topics) != 1 || *md.Topics[0].Topic != "secret" {
			t.Fatalf("bob sees %+v", md.Topics)
		}
		c = dialSASL(t, addr)
		c.handshake(0, "PLAIN")
		raw(c, "\x00bob\x00"+fetchkit.WrongPass)
		c.expectClosed()
	})
	if n := len(logs.Lines("authentication failed", "interface=kafka")); n == 0 {
		t.Fatalf("no failed-login lines:\n%s", logs)
	}
	if lines := logs.Lines("username=" + fetchkit.WrongPass); len(lines) != 0 {
		t.Fatalf("unknown username logged: %q", lines)
	}
}

// TestKafkaSASLNotConfigured: a listener without SASL users neither
// advertises nor accepts SASL, and serves anonymous clients as before.
func TestKafkaSASLNotConfigured(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	addr := startKafka(t, e.Cat, kafkasrv.KafkaOptions{})
	c := dialSASL(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	resp := kmsg.NewPtrApiVersionsResponse()
	c.request(req, resp)
	if len(resp.ApiKeys) != len(kafkasrv.KafkaAPIVersions) {
		t.Fatalf("api keys %+v", resp.ApiKeys)
	}
	if md := c.metadata(); len(md.Topics) != len(fetchkit.AuthTopics) {
		t.Fatalf("anonymous sees %d topics", len(md.Topics))
	}
	// SASL is an API this listener does not serve: the connection is
	// closed, as for any unserved API.
	req2 := kmsg.NewPtrSASLHandshakeRequest()
	req2.Version, req2.Mechanism = 1, "PLAIN"
	c.Send(req2.Key(), req2.Version, 99, false, req2.AppendTo(nil))
	c.expectClosed()
}
