package cli

import (
	"context"
	"strings"
	"testing"
)

// With auth on, the commands that talk to a running serve (topic and
// produce --server, consume and replay --fetch) authenticate with
// $TIERED_TOKEN; without it they get serve's 401 in one line, and a token
// of a principal without the permission gets the 403.
func TestClientsSendTieredToken(t *testing.T) {
	s, _ := newTestServe(t, map[string]string{
		"auth.tokens": "[{principal: ops, token: tok-ops-5b1e}, {principal: reader, token: tok-reader-9c2d}]",
		"auth.acls":   "{ops: {read: ['*'], write: ['*'], admin: true}, reader: [clicks]}",
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	}()
	<-s.Ready()
	url := "http://" + s.HTTPAddr()

	create := []string{"topic", "create", "--server", url, "--topic", "clicks", "--partitions", "1"}
	if res := run(t, "", create...); res.code == 0 || !strings.Contains(res.stderr, "UNAUTHORIZED") || !strings.Contains(res.stderr, "set TIERED_TOKEN") {
		t.Fatalf("topic create without a token: exit %d, stderr %q; want a 401 UNAUTHORIZED", res.code, res.stderr)
	}
	t.Setenv(TokenEnv, "tok-reader-9c2d")
	if res := run(t, "", create...); res.code == 0 || !strings.Contains(res.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("topic create as reader: exit %d, stderr %q; want 403 CLUSTER_AUTHORIZATION_FAILED", res.code, res.stderr)
	}
	t.Setenv(TokenEnv, "tok-ops-5b1e")
	mustRun(t, "", create...)
	mustRun(t, `{"key":"k","value":"v1","timestamp":1700000000000}`+"\n", "produce", "--server", url, "--topic", "clicks", "--partition", "0")

	t.Setenv(TokenEnv, "tok-reader-9c2d")
	res := mustRun(t, "", "consume", "--fetch", url, "--topic", "clicks", "--partition", "0")
	if !strings.Contains(res.stdout, `"value":"v1"`) {
		t.Fatalf("consume --fetch as reader printed %q", res.stdout)
	}
	res = mustRun(t, "", "replay", "--fetch", url, "--topic", "clicks", "--from", "2023-11-14T00:00:00Z", "--to", "2023-11-15T00:00:00Z")
	if !strings.Contains(res.stdout, `"value":"v1"`) {
		t.Fatalf("replay --fetch as reader printed %q", res.stdout)
	}
	t.Setenv(TokenEnv, "")
	for _, args := range [][]string{
		{"consume", "--fetch", url, "--topic", "clicks", "--partition", "0"},
		{"replay", "--fetch", url, "--topic", "clicks", "--from", "2023-11-14T00:00:00Z", "--to", "2023-11-15T00:00:00Z"},
	} {
		if res := run(t, "", args...); res.code == 0 || !strings.Contains(res.stderr, "set TIERED_TOKEN") || strings.Count(res.stderr, "\n") != 1 {
			t.Fatalf("%s without a token: exit %d, stderr %q; want one line with the TIERED_TOKEN hint", args[0], res.code, res.stderr)
		}
	}
}
