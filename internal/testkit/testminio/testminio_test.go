package testminio_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

func TestMain(m *testing.M) { testminio.Main(m) }

func live(t *testing.T, s *testminio.Server) bool {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(s.Endpoint + "/minio/health/live")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestStartRestartStop starts a dedicated server, writes through minio-go,
// restarts it (data survives), and stops it.
func TestStartRestartStop(t *testing.T) {
	ctx := context.Background()
	s := testminio.Start(t)
	if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") || !live(t, s) {
		t.Fatalf("server at %s not live", s.Endpoint)
	}
	bucket := s.NewBucket(t)
	if _, err := s.Client().PutObject(ctx, bucket, "k", bytes.NewReader([]byte("kept")), 4, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	obj, err := s.Client().GetObject(ctx, bucket, "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || string(data) != "kept" {
		t.Fatalf("after restart read %q, %v", data, err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if live(t, s) {
		t.Fatal("server still live after Kill")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if live(t, s) {
		t.Fatal("server still live after Stop")
	}
}

func TestSharedIsShared(t *testing.T) {
	a, b := testminio.Shared(t), testminio.Shared(t)
	if a != b {
		t.Fatal("two Shared calls started two servers")
	}
	if n1, n2 := a.NewBucket(t), a.NewBucket(t); n1 == n2 {
		t.Fatalf("NewBucket returned %s twice", n1)
	}
	if u := a.URL("bkt", "/a/b/"); !strings.HasPrefix(u, "s3://bkt/a/b?") || !strings.Contains(u, "path_style=true") {
		t.Errorf("URL = %s", u)
	}
}

func TestMissingBinaryMessage(t *testing.T) {
	t.Setenv(testminio.EnvBin, "/nonexistent/minio")
	_, err := testminio.FindBinary()
	if err == nil || !strings.Contains(err.Error(), testminio.EnvBin) {
		t.Errorf("FindBinary = %v", err)
	}
	t.Setenv(testminio.EnvBin, "")
	t.Chdir(t.TempDir()) // no .tools above a temp dir, and no go.mod either
	_, err = testminio.FindBinary()
	if err == nil || !strings.Contains(err.Error(), "./scripts/setup") {
		t.Errorf("FindBinary outside the repo = %v, want a hint to run ./scripts/setup", err)
	}
}
