package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigPrintMasksSecrets(t *testing.T) {
	const fileSecret, envSecret = "file-secret-7f3a9", "env-secret-c41d2"
	dir := t.TempDir()
	file := filepath.Join(dir, "tiered.yaml")
	body := "data_dir: " + filepath.Join(dir, "data") + "\n" +
		"auth:\n  tokens: [{principal: ci, token: " + fileSecret + "}]\n  acls: {ci: ['*'], reader: [orders]}\n" +
		"broker:\n  log.retention.hours: 24\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TIERED_AUTH_SASL_PLAIN", "[{username: reader, password: "+envSecret+"}]")
	t.Setenv("TIERED_FETCH_CACHE_BYTES", "64MiB")

	for _, args := range [][]string{
		{"config", "print", "--config", file},
		{"config", "print", "--config", file, "--sources", "--http", "127.0.0.1:0"},
		{"config", "print", "--config", file, "--json"},
	} {
		res := mustRun(t, "", args...)
		for _, s := range []string{fileSecret, envSecret} {
			if strings.Contains(res.stdout, s) || strings.Contains(res.stderr, s) {
				t.Errorf("%v printed secret %q:\n%s", args, s, res.stdout)
			}
		}
		if !strings.Contains(res.stdout, "******") {
			t.Errorf("%v: no masked value in output:\n%s", args, res.stdout)
		}
	}

	res := mustRun(t, "", "config", "print", "--config", file, "--sources", "--http", "127.0.0.1:0")
	for _, want := range []string{
		"log.retention.hours: 24 # file",
		"cache_bytes: 67108864 # env",
		"addr: 127.0.0.1:0 # flag",
		"addr: 127.0.0.1:9092 # default",
		"sasl_plain: # env",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("--sources output lacks %q:\n%s", want, res.stdout)
		}
	}

	sources := printedSources(t, "config", "print", "--config", file, "--json")
	if sources["fetch.cache_bytes"] != "env" || sources["auth.tokens"] != "file" || sources["log.level"] != "default" {
		t.Errorf("sources: %v", sources)
	}
}

// printedSources runs config print --json (args) and returns its sources.
func printedSources(t *testing.T, args ...string) map[string]string {
	t.Helper()
	res := mustRun(t, "", args...)
	var out struct {
		Config  map[string]any    `json:"config"`
		Sources map[string]string `json:"sources"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("--json output: %v\n%s", err, res.stdout)
	}
	if len(out.Config) == 0 {
		t.Fatalf("--json output has no config: %s", res.stdout)
	}
	return out.Sources
}

func TestConfigPrintRefusesBadConfig(t *testing.T) {
	const secret = "bad-config-secret-99"
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.yaml")
	body := "data_dir: " + dir + "\nhttp:\n  adr: x\nfetch:\n  cache_bytes: -1\nauth:\n  tokens:\n    - {principal: a, token: " + secret + "}\n    - {principal: b, token: " + secret + "}\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TIERED_LOG_LEVEL", "chatty")
	res := run(t, "", "config", "print", "--config", file)
	if res.code != ExitError || res.stdout != "" {
		t.Fatalf("exit %d, stdout %q", res.code, res.stdout)
	}
	for _, want := range []string{
		file + ":3: http.adr: unknown key",
		file + ":5: fetch.cache_bytes: must not be negative (got -1)",
		file + ":9: auth.tokens[1].token: same token as auth.tokens[0]",
		"env TIERED_LOG_LEVEL: log.level: \"chatty\" is not one of",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, secret) {
		t.Errorf("stderr shows the secret: %s", res.stderr)
	}
	if n := strings.Count(strings.TrimSpace(res.stderr), "\n"); n != 0 {
		t.Errorf("stderr is %d lines, want one", n+1)
	}
}

func TestConfigCommandUsage(t *testing.T) {
	if res := run(t, "", "config"); res.code != ExitUsage || !strings.Contains(res.stderr, "missing subcommand") {
		t.Errorf("tiered config: %+v", res)
	}
	if res := run(t, "", "config", "print", "--nope"); res.code != ExitUsage || !strings.Contains(res.stderr, "unknown flag --nope") {
		t.Errorf("unknown flag: %+v", res)
	}
	if res := run(t, "", "config", "print", "--config", filepath.Join(t.TempDir(), "missing.yaml")); res.code != ExitError || !strings.Contains(res.stderr, "read config file") {
		t.Errorf("missing file: %+v", res)
	}
	if res := mustRun(t, "", "help", "config", "print"); !strings.Contains(res.stdout, "TIERED_") {
		t.Errorf("help: %s", res.stdout)
	}
}

// TestConfigRefusedForAnEnvValueExitsOne: a configuration refused because of
// a TIERED_* value exits 1 (README's exit codes: a refused configuration from
// the file or the environment) and names the variable, also when the check
// that fails is on another key the variable's value conflicts with (a
// default the operator never set).
func TestConfigRefusedForAnEnvValueExitsOne(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ env, value, want string }{
		{"TIERED_KAFKA_ADDR", "0.0.0.0:9092", "env TIERED_KAFKA_ADDR: kafka.advertised_addr: required"},
		{"TIERED_GROUPS_MIN_SESSION_TIMEOUT", "1h", "env TIERED_GROUPS_MIN_SESSION_TIMEOUT: groups.max_session_timeout: must be at least"},
		{"TIERED_FETCH_CHUNK_BYTES", "1GiB", "env TIERED_FETCH_CHUNK_BYTES: fetch.cache_bytes: must hold at least one chunk"},
		{"TIERED_HTTP_ADDR", "127.0.0.1:9092", "env TIERED_HTTP_ADDR: kafka.addr: same address as http.addr"},
	} {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			res := run(t, "", "config", "print", "--data-dir", dir)
			if res.code != ExitError || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d stderr %q, want 1 and %q", res.code, res.stderr, tt.want)
			}
		})
	}
}
