// Package deploy holds tiered's deployment files: the container image (Dockerfile), a
// compose file, Kubernetes manifests (k8s/), Prometheus rules (prometheus/) and a Grafana
// dashboard (grafana/). It has no Go API: this test file checks that the files parse, agree
// with each other and with the code, and that every metric they name exists in the running
// binary's /metrics. deploy/healthcheck is the image's health probe.
package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/internal/testkit/testnet"
)

// TestMain removes the binaries the tests built, then checks for leaked goroutines as
// goleak.VerifyTestMain does.
func TestMain(m *testing.M) {
	// The daemons these tests start must not look for AWS credentials in
	// the EC2 instance metadata (169.254.169.254): tests stay on loopback.
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	code := m.Run()
	if binDir != "" {
		if err := os.RemoveAll(binDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ---- helpers ----------------------------------------------------------------------------

// yamlDocs decodes every document of a (multi-document) YAML file; empty documents are
// skipped.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []map[string]any
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	return docs
}

// get walks a decoded YAML/JSON value along keys (string: map key, int: list index).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := get(v, path...).([]any)
	return l
}

// strings returns every string value inside v (map values and list items, recursively),
// never map keys or YAML comments.
func allStrings(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case map[string]any:
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// k8sObjects returns every object of deploy/k8s, with the file it came from.
type k8sObject struct {
	file string
	obj  map[string]any
}

func k8sObjects(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sObject
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, d := range yamlDocs(t, f) {
			out = append(out, k8sObject{file: f, obj: d})
		}
	}
	if len(out) == 0 {
		t.Fatal("no Kubernetes objects in k8s/")
	}
	return out
}

func findObjects(objs []k8sObject, kind string) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		if o.obj["kind"] == kind {
			out = append(out, o.obj)
		}
	}
	return out
}

func findObject(t *testing.T, objs []k8sObject, kind, name string) map[string]any {
	t.Helper()
	for _, o := range findObjects(objs, kind) {
		if str(o, "metadata", "name") == name {
			return o
		}
	}
	t.Fatalf("no %s %q in k8s/", kind, name)
	return nil
}

// podSpec returns the pod spec of a workload (Deployment, StatefulSet).
func podSpec(o map[string]any) map[string]any {
	m, _ := get(o, "spec", "template", "spec").(map[string]any)
	return m
}

// containerArg returns the value of --name=value or --name value in args.
func containerArg(args []any, name string) (string, bool) {
	for i, a := range args {
		s, _ := a.(string)
		if v, ok := strings.CutPrefix(s, name+"="); ok {
			return v, true
		}
		if s == name && i+1 < len(args) {
			v, _ := args[i+1].(string)
			return v, true
		}
	}
	return "", false
}

// daemonConfig loads, with the real config loader, the configuration a tiered container or
// compose service runs with: the YAML file (empty: none), the TIERED_* variables of env and
// the configuration flags in args (args[0] is the command; --config is the file, given
// separately). It is validated for process p. The sidecar's log dir exists only beside the
// broker, so the one problem of it missing here is not held against the configuration.
func daemonConfig(t *testing.T, p config.Process, file string, env []string, args []any) *config.Config {
	t.Helper()
	flags := map[string]string{}
	for i := 1; i < len(args); i++ {
		a, _ := args[i].(string)
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || (!ok && i+1 >= len(args)) {
			t.Fatalf("%s: argument %q is not --flag=value or --flag value", p, a)
		}
		if !ok {
			i++
			value, _ = args[i].(string)
		}
		if _, known := config.FlagPaths[name]; !known && name != "config" {
			t.Errorf("%s: --%s is not a configuration flag", p, name)
		}
		if name != "config" {
			flags[name] = value
		}
	}
	c, err := config.Load(config.LoadOptions{File: file, Env: env, Flags: flags, Process: p})
	var problems []string
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			absent := p == config.ProcessSidecar && strings.Contains(line, "sidecar.kafka_log_dir: stat "+c.Sidecar.KafkaLogDir+": no such file")
			if !absent {
				problems = append(problems, line)
			}
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%s: the configuration (file %s, env %v, flags %v) is refused:\n%s", p, file, env, flags, strings.Join(problems, "\n"))
	}
	return c
}

// k8sConfig loads the configuration container c (args: process ...) runs with: the ConfigMap's
// tiered.yaml, which its --config must name where the ConfigMap is mounted, its TIERED_*
// environment (values and ConfigMap references) and its flags.
func k8sConfig(t *testing.T, objs []k8sObject, c map[string]any) *config.Config {
	t.Helper()
	cm := findObject(t, objs, "ConfigMap", "tiered-config")
	p := config.Process(str(c, "args", 0))
	file := filepath.Join(t.TempDir(), "tiered.yaml")
	if err := os.WriteFile(file, []byte(str(cm, "data", "tiered.yaml")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath, ok := containerArg(list(c, "args"), "--config")
	if !ok {
		t.Fatalf("%s container has no --config", p)
	}
	mounted := false
	for _, m := range list(c, "volumeMounts") {
		mounted = mounted || filepath.Join(str(m, "mountPath"), "tiered.yaml") == cfgPath
	}
	if !mounted {
		t.Errorf("%s: --config=%s is not the mounted ConfigMap", p, cfgPath)
	}
	var env []string
	for _, e := range list(c, "env") {
		name := str(e, "name")
		if ref := get(e, "valueFrom", "configMapKeyRef"); ref != nil && str(ref, "name") == "tiered-config" {
			env = append(env, name+"="+str(cm, "data", str(ref, "key")))
		} else if v, ok := get(e, "value").(string); ok && strings.HasPrefix(name, config.EnvPrefix) {
			env = append(env, name+"="+v)
		}
	}
	cfg := daemonConfig(t, p, file, env, list(c, "args"))
	if cfg.Source("bucket") != config.SourceEnv {
		t.Errorf("%s: bucket comes from %s, want the TIERED_BUCKET environment", p, cfg.Source("bucket"))
	}
	return cfg
}

// tieredContainers are the containers running the tiered image, with their pod spec.
type container struct {
	workload string
	pod      map[string]any
	c        map[string]any
}

func tieredContainers(objs []k8sObject) []container {
	var out []container
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, o := range findObjects(objs, kind) {
			ps := podSpec(o)
			for _, c := range list(ps, "containers") {
				cm, _ := c.(map[string]any)
				if img := str(cm, "image"); img == "tiered" || strings.Contains(img, "/tiered") {
					out = append(out, container{workload: kind + "/" + str(o, "metadata", "name"), pod: ps, c: cm})
				}
			}
		}
	}
	return out
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// parseQuantity parses the Kubernetes and Go memory quantities used here: 512Mi, 1Gi,
// 900MiB, 1048576.
func parseQuantity(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// ---- files parse ------------------------------------------------------------------------

func TestEveryYAMLFileParses(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return nil
		}
		if docs := yamlDocs(t, path); len(docs) == 0 {
			t.Errorf("%s: no YAML document", path)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("found %d YAML files, want compose.yaml, prometheus/rules.yaml and the k8s manifests", n)
	}
}

func TestDashboardJSON(t *testing.T) {
	data, err := os.ReadFile("grafana/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana/dashboard.json: %v", err)
	}
	if v, _ := d["schemaVersion"].(float64); v < 36 {
		t.Errorf("schemaVersion = %v, want a current Grafana schema (>= 36)", d["schemaVersion"])
	}
	if str(d, "uid") == "" || str(d, "title") == "" {
		t.Error("dashboard needs a uid and a title")
	}
	hasDS := false
	for _, v := range list(d, "templating", "list") {
		if str(v, "type") == "datasource" && str(v, "query") == "prometheus" && str(v, "name") == "datasource" {
			hasDS = true
		}
	}
	if !hasDS {
		t.Fatal("no Prometheus datasource variable named datasource")
	}
	ids := map[float64]string{}
	exprs := 0
	for _, p := range list(d, "panels") {
		title := str(p, "title")
		id, _ := get(p, "id").(float64)
		if prev, dup := ids[id]; dup {
			t.Errorf("panels %q and %q share id %v", prev, title, id)
		}
		ids[id] = title
		if get(p, "gridPos", "w") == nil || get(p, "gridPos", "h") == nil {
			t.Errorf("panel %q has no gridPos", title)
		}
		if str(p, "type") == "row" {
			continue
		}
		if uid := str(p, "datasource", "uid"); uid != "${datasource}" {
			t.Errorf("panel %q: datasource uid %q, want ${datasource}", title, uid)
		}
		targets := list(p, "targets")
		if len(targets) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for _, tg := range targets {
			e := str(tg, "expr")
			if e == "" || str(tg, "datasource", "uid") != "${datasource}" {
				t.Errorf("panel %q: target %v lacks an expr or the datasource variable", title, tg)
			}
			if strings.Count(e, "(") != strings.Count(e, ")") || strings.Count(e, "{") != strings.Count(e, "}") {
				t.Errorf("panel %q: unbalanced expression %q", title, e)
			}
			exprs++
		}
	}
	if exprs < 30 {
		t.Errorf("%d queries, want panels for every subsystem", exprs)
	}
	// Panels the brief asks for, by the metric they must query.
	all := strings.Join(allStrings(d), "\n")
	for _, want := range []string{
		"tiered_uploader_lag_bytes", "tiered_uploader_uploaded_segments_total",
		"tiered_objstore_operations_total", "tiered_objstore_operation_failures_total", "tiered_objstore_operation_duration_seconds_bucket",
		"tiered_compactor_runs_total", "tiered_compactor_bytes_read_total", "tiered_compactor_max_dirty_ratio",
		"tiered_retention_deleted_segments_total", "tiered_retention_earliest_offset",
		"tiered_fetch_requests_total", "tiered_fetch_request_duration_seconds_bucket", "tiered_fetch_cache_hits_total",
		"tiered_fetch_gate_waits_total", "tiered_fetch_gate_rejections_total",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("dashboard has no panel querying %s", want)
		}
	}
}

// ---- Kubernetes -------------------------------------------------------------------------

func TestKubernetesObjectsAreWellFormed(t *testing.T) {
	objs := k8sObjects(t)
	seen := map[string]string{}
	files := map[string]bool{}
	for _, o := range objs {
		files[filepath.Base(o.file)] = true
		api, kind, name := str(o.obj, "apiVersion"), str(o.obj, "kind"), str(o.obj, "metadata", "name")
		if api == "" || kind == "" || name == "" {
			t.Errorf("%s: object without apiVersion, kind or metadata.name: %v/%v/%v", o.file, api, kind, name)
			continue
		}
		if ns := str(o.obj, "metadata", "namespace"); ns != "" {
			t.Errorf("%s: %s/%s hard-codes namespace %q (kustomize sets it)", o.file, kind, name, ns)
		}
		key := kind + "/" + name
		if prev, dup := seen[key]; dup {
			t.Errorf("%s defined in %s and %s", key, prev, o.file)
		}
		seen[key] = o.file
	}
	// kustomization.yaml lists exactly the manifest files.
	k := yamlDocs(t, "k8s/kustomization.yaml")[0]
	var listed []string
	for _, r := range list(k, "resources") {
		s, _ := r.(string)
		listed = append(listed, s)
	}
	var have []string
	for f := range files {
		have = append(have, f)
	}
	sort.Strings(listed)
	sort.Strings(have)
	if !slices.Equal(listed, have) {
		t.Errorf("kustomization.yaml resources %v, manifest files %v", listed, have)
	}
	for _, kind := range []string{"StatefulSet", "Deployment", "Service", "ServiceMonitor", "ConfigMap", "PrometheusRule"} {
		if len(findObjects(objs, kind)) == 0 {
			t.Errorf("no %s in k8s/", kind)
		}
	}
}

func TestKubernetesSidecarMountsBrokerVolumeReadOnly(t *testing.T) {
	objs := k8sObjects(t)
	sts := findObject(t, objs, "StatefulSet", "kafka")
	ps := podSpec(sts)
	var broker, sidecar map[string]any
	for _, c := range list(ps, "containers") {
		cm := c.(map[string]any)
		switch {
		case strings.HasPrefix(str(cm, "image"), "apache/kafka"):
			broker = cm
		case str(cm, "args", 0) == "sidecar":
			sidecar = cm
		}
	}
	if broker == nil || sidecar == nil {
		t.Fatal("StatefulSet kafka needs a broker container (apache/kafka) and a sidecar container (args: sidecar ...)")
	}
	var logDir string
	for _, e := range list(broker, "env") {
		if str(e, "name") == "KAFKA_LOG_DIRS" {
			logDir = str(e, "value")
		}
	}
	if logDir == "" || strings.Contains(logDir, ",") {
		t.Fatalf("broker KAFKA_LOG_DIRS = %q, want one log dir", logDir)
	}
	// The broker volume holding the log dir.
	var volume, brokerMount string
	for _, m := range list(broker, "volumeMounts") {
		if mp := str(m, "mountPath"); within(logDir, mp) {
			volume, brokerMount = str(m, "name"), mp
			if ro, _ := get(m, "readOnly").(bool); ro {
				t.Errorf("the broker mounts its own log volume read-only")
			}
		}
	}
	if volume == "" {
		t.Fatalf("no broker volumeMount holds the log dir %s", logDir)
	}
	cfg := k8sConfig(t, objs, sidecar)
	sidecarDir := cfg.Sidecar.KafkaLogDir
	if _, port, _ := net.SplitHostPort(cfg.HTTP.Addr); port != "9108" {
		t.Errorf("sidecar http.addr %q, want port 9108 (the metrics port the Service and ServiceMonitor scrape)", cfg.HTTP.Addr)
	}
	if cfg.Sidecar.BootstrapServer == "" {
		t.Error("sidecar.bootstrap_server is empty: the three sidecars would each upload every partition")
	}
	found := false
	for _, m := range list(sidecar, "volumeMounts") {
		if str(m, "name") != volume {
			continue
		}
		found = true
		if ro, _ := get(m, "readOnly").(bool); !ro {
			t.Errorf("sidecar mounts the broker volume %q without readOnly: true", volume)
		}
		// Same layout in both containers: the sidecar reads what the broker writes.
		rel, _ := filepath.Rel(brokerMount, logDir)
		if want := filepath.Join(str(m, "mountPath"), rel); sidecarDir != want {
			t.Errorf("sidecar.kafka_log_dir %s, but the broker's log dir %s is %s in the sidecar", sidecarDir, logDir, want)
		}
	}
	if !found {
		t.Errorf("sidecar does not mount the broker volume %q", volume)
	}
	// The claim template backs the volume.
	claimed := false
	for _, vc := range list(sts, "spec", "volumeClaimTemplates") {
		claimed = claimed || str(vc, "metadata", "name") == volume
	}
	if !claimed {
		t.Errorf("volume %q is not a volumeClaimTemplate", volume)
	}
}

func TestKubernetesSecurityAndSecrets(t *testing.T) {
	objs := k8sObjects(t)
	for _, s := range findObjects(objs, "Secret") {
		t.Errorf("Secret %s is committed; reference a Secret created outside the manifests", str(s, "metadata", "name"))
	}
	cs := tieredContainers(objs)
	if len(cs) < 2 {
		t.Fatalf("found %d tiered containers, want the sidecar and fetch", len(cs))
	}
	for _, c := range cs {
		name := c.workload + "/" + str(c.c, "name")
		nonRoot, _ := get(c.c, "securityContext", "runAsNonRoot").(bool)
		podNonRoot, _ := get(c.pod, "securityContext", "runAsNonRoot").(bool)
		if !nonRoot && !podNonRoot {
			t.Errorf("%s: runAsNonRoot not set", name)
		}
		if ro, _ := get(c.c, "securityContext", "readOnlyRootFilesystem").(bool); !ro {
			t.Errorf("%s: readOnlyRootFilesystem not true", name)
		}
		if pe, ok := get(c.c, "securityContext", "allowPrivilegeEscalation").(bool); !ok || pe {
			t.Errorf("%s: allowPrivilegeEscalation must be false", name)
		}
		if !slices.Contains(list(c.c, "securityContext", "capabilities", "drop"), any("ALL")) {
			t.Errorf("%s: capabilities not dropped", name)
		}
		if get(c.c, "resources", "requests", "memory") == nil || get(c.c, "resources", "limits", "memory") == nil {
			t.Errorf("%s: memory request and limit are required", name)
		}
		creds := 0
		for _, e := range list(c.c, "env") {
			switch str(e, "name") {
			case "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY":
				if get(e, "value") != nil || str(e, "valueFrom", "secretKeyRef", "name") == "" {
					t.Errorf("%s: %s must come from a secretKeyRef", name, str(e, "name"))
				}
				creds++
			}
		}
		if creds != 2 {
			t.Errorf("%s: want AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from a Secret", name)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`kubectl (-n \S+ )?create secret generic tiered-s3`).Match(readme) {
		t.Error("README.md must show how to create the tiered-s3 Secret the manifests reference")
	}
}

func TestKubernetesReferencesResolve(t *testing.T) {
	objs := k8sObjects(t)
	type pod struct {
		name   string
		labels map[string]any
		ports  map[string]bool
	}
	var pods []pod
	configMaps := map[string]map[string]any{}
	for _, cm := range findObjects(objs, "ConfigMap") {
		d, _ := cm["data"].(map[string]any)
		configMaps[str(cm, "metadata", "name")] = d
	}
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, o := range findObjects(objs, kind) {
			labels, _ := get(o, "spec", "template", "metadata", "labels").(map[string]any)
			sel, _ := get(o, "spec", "selector", "matchLabels").(map[string]any)
			for k, v := range sel {
				if labels[k] != v {
					t.Errorf("%s %s: selector %s=%v does not match the pod labels", kind, str(o, "metadata", "name"), k, v)
				}
			}
			p := pod{name: kind + "/" + str(o, "metadata", "name"), labels: labels, ports: map[string]bool{}}
			ps := podSpec(o)
			vols := map[string]bool{}
			for _, v := range list(ps, "volumes") {
				vols[str(v, "name")] = true
				if n := str(v, "configMap", "name"); n != "" && configMaps[n] == nil {
					t.Errorf("%s: volume uses missing ConfigMap %s", p.name, n)
				}
			}
			for _, v := range list(o, "spec", "volumeClaimTemplates") {
				vols[str(v, "metadata", "name")] = true
			}
			if sa := str(ps, "serviceAccountName"); sa != "" {
				findObject(t, objs, "ServiceAccount", sa)
			}
			for _, c := range list(ps, "containers") {
				for _, cp := range list(c, "ports") {
					p.ports[str(cp, "name")] = true
				}
				for _, m := range list(c, "volumeMounts") {
					if !vols[str(m, "name")] {
						t.Errorf("%s: container %s mounts undefined volume %s", p.name, str(c, "name"), str(m, "name"))
					}
				}
				for _, e := range list(c, "env") {
					if ref := get(e, "valueFrom", "configMapKeyRef"); ref != nil {
						if _, ok := configMaps[str(ref, "name")][str(ref, "key")]; !ok {
							t.Errorf("%s: env %s refers to missing ConfigMap key %s/%s", p.name, str(e, "name"), str(ref, "name"), str(ref, "key"))
						}
					}
				}
			}
			pods = append(pods, p)
		}
	}
	services := map[string]map[string]any{}
	for _, s := range findObjects(objs, "Service") {
		name := str(s, "metadata", "name")
		services[name] = s
		sel, _ := get(s, "spec", "selector").(map[string]any)
		var match *pod
		for i := range pods {
			ok := len(sel) > 0
			for k, v := range sel {
				ok = ok && pods[i].labels[k] == v
			}
			if ok {
				match = &pods[i]
			}
		}
		if match == nil {
			t.Errorf("Service %s selects no workload", name)
			continue
		}
		for _, sp := range list(s, "spec", "ports") {
			if tp, ok := get(sp, "targetPort").(string); ok && !match.ports[tp] {
				t.Errorf("Service %s: targetPort %s is not a port of %s", name, tp, match.name)
			}
		}
	}
	if sts := findObject(t, objs, "StatefulSet", "kafka"); services[str(sts, "spec", "serviceName")] == nil {
		t.Errorf("StatefulSet kafka: serviceName %s is not a Service", str(sts, "spec", "serviceName"))
	}
	monitored := map[string]bool{}
	for _, sm := range findObjects(objs, "ServiceMonitor") {
		name := str(sm, "metadata", "name")
		if str(sm, "apiVersion") != "monitoring.coreos.com/v1" {
			t.Errorf("ServiceMonitor %s: apiVersion %s", name, str(sm, "apiVersion"))
		}
		sel, _ := get(sm, "spec", "selector", "matchLabels").(map[string]any)
		var svc map[string]any
		for _, s := range services {
			ok := len(sel) > 0
			for k, v := range sel {
				ok = ok && get(s, "metadata", "labels", k) == v
			}
			if ok {
				svc = s
			}
		}
		if svc == nil {
			t.Errorf("ServiceMonitor %s selects no Service", name)
			continue
		}
		for _, ep := range list(sm, "spec", "endpoints") {
			found := false
			for _, sp := range list(svc, "spec", "ports") {
				found = found || str(sp, "name") == str(ep, "port")
			}
			if !found {
				t.Errorf("ServiceMonitor %s: port %q is not a port of Service %s", name, str(ep, "port"), str(svc, "metadata", "name"))
			}
			if str(ep, "path") != "/metrics" {
				t.Errorf("ServiceMonitor %s: path %q", name, str(ep, "path"))
			}
		}
		monitored[str(get(svc, "spec", "selector"), "app.kubernetes.io/name")] = true
	}
	if !monitored["kafka"] || !monitored["tiered-fetch"] {
		t.Errorf("ServiceMonitors cover %v, want the sidecar (kafka pods) and tiered-fetch", monitored)
	}
}

// TestKubernetesConfigLoadsAndSizesFetch loads the ConfigMap's tiered.yaml with the real
// config loader, as the fetch container does (file + TIERED_* env + flags), and checks the
// fetch container's memory is sized from the cache settings in it.
func TestKubernetesConfigLoadsAndSizesFetch(t *testing.T) {
	objs := k8sObjects(t)
	dep := findObject(t, objs, "Deployment", "tiered-fetch")
	c := list(podSpec(dep), "containers")[0]
	if str(c, "args", 0) != "fetch" {
		t.Fatalf("tiered-fetch container args %v, want fetch ...", list(c, "args"))
	}
	cfg := k8sConfig(t, objs, c.(map[string]any))
	var gomemlimit string
	for _, e := range list(c, "env") {
		if str(e, "name") == "GOMEMLIMIT" {
			gomemlimit = str(e, "value")
		}
	}
	if _, port, _ := net.SplitHostPort(cfg.HTTP.Addr); port != "8080" {
		t.Errorf("http.addr %s, want port 8080 (probes and Service)", cfg.HTTP.Addr)
	}
	limit, err := parseQuantity(str(c, "resources", "limits", "memory"))
	if err != nil {
		t.Fatal(err)
	}
	soft, err := parseQuantity(gomemlimit)
	if err != nil {
		t.Fatalf("GOMEMLIMIT %q: %v", gomemlimit, err)
	}
	need := int64(cfg.Fetch.CacheBytes) + int64(cfg.Fetch.MaxInFlightBytes)
	if soft <= need || soft >= limit {
		t.Errorf("GOMEMLIMIT %s must exceed cache_bytes + max_inflight_bytes (%d) and stay below the limit %d", gomemlimit, need, limit)
	}
	if limit < need+256<<20 {
		t.Errorf("memory limit %d < cache_bytes + max_inflight_bytes + 256MiB headroom (%d)", limit, need+256<<20)
	}
	if cfg.Fetch.CacheDir != "" {
		t.Error("fetch.cache_dir is set but the Deployment mounts no cache volume for it")
	}
}

// TestSidecarPolicyFile: deploy/sidecar.yaml is a sidecar configuration the loader accepts,
// compose mounts it as the sidecar's --config, and the Kubernetes ConfigMap and the README's
// sidecar section carry the same sidecar.topics policy and deleted_topic_retention.
func TestSidecarPolicyFile(t *testing.T) {
	cfg := daemonConfig(t, config.ProcessSidecar, "sidecar.yaml", []string{"TIERED_BUCKET=s3://b/p?region=us-east-1"}, []any{"sidecar"})
	if len(cfg.Sidecar.Topics) < 3 {
		t.Fatalf("sidecar.yaml has %d topic rules; want a realistic policy", len(cfg.Sidecar.Topics))
	}
	policyOf := func(what, doc string) any {
		t.Helper()
		var v map[string]any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sc, _ := v["sidecar"].(map[string]any)
		if sc["topics"] == nil {
			t.Fatalf("%s has no sidecar.topics", what)
		}
		return []any{sc["topics"], sc["deleted_topic_retention"]}
	}
	file, err := os.ReadFile("sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := policyOf("sidecar.yaml", string(file))
	cm := findObject(t, k8sObjects(t), "ConfigMap", "tiered-config")
	if got := policyOf("k8s ConfigMap tiered.yaml", str(cm, "data", "tiered.yaml")); !reflect.DeepEqual(got, want) {
		t.Errorf("the ConfigMap's sidecar policy %v differs from sidecar.yaml's %v", got, want)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n### sidecar\n")
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README's sidecar section has no yaml block")
	}
	if got := policyOf("README sidecar section", block); !reflect.DeepEqual(got, want) {
		t.Errorf("the README's sidecar policy %v differs from sidecar.yaml's %v", got, want)
	}
	compose, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(compose), "./sidecar.yaml:/etc/tiered/sidecar.yaml:ro") ||
		!strings.Contains(string(compose), `["sidecar", "--config", "/etc/tiered/sidecar.yaml"]`) {
		t.Error("compose does not run the sidecar with deploy/sidecar.yaml")
	}
}

// ---- Prometheus rules -------------------------------------------------------------------

func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	plain := yamlDocs(t, "prometheus/rules.yaml")[0]
	pr := findObject(t, k8sObjects(t), "PrometheusRule", "tiered")
	if str(pr, "apiVersion") != "monitoring.coreos.com/v1" {
		t.Errorf("PrometheusRule apiVersion %s", str(pr, "apiVersion"))
	}
	if !reflect.DeepEqual(plain["groups"], get(pr, "spec", "groups")) {
		t.Error("k8s/prometheusrule.yaml spec.groups differ from prometheus/rules.yaml groups; regenerate one from the other")
	}
}

func TestAlertRules(t *testing.T) {
	doc := yamlDocs(t, "prometheus/rules.yaml")[0]
	for k := range doc {
		if k != "groups" {
			t.Errorf("rules.yaml: unknown top-level key %q", k)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			headings[strings.TrimSpace(h)] = true
		}
	}
	names := map[string]bool{}
	var exprs []string
	for _, g := range list(doc, "groups") {
		if str(g, "name") == "" {
			t.Error("rule group without a name")
		}
		for _, r := range list(g, "rules") {
			alert, record, expr := str(r, "alert"), str(r, "record"), str(r, "expr")
			if (alert == "") == (record == "") || strings.TrimSpace(expr) == "" {
				t.Errorf("rule %v: want exactly one of alert and record, and an expr", r)
				continue
			}
			name := alert + record
			if names[name] {
				t.Errorf("rule %s defined twice", name)
			}
			names[name] = true
			exprs = append(exprs, alert+": "+expr)
			if record != "" {
				if !regexp.MustCompile(`^tiered:[a-z0-9_]+:[a-z0-9_]+$`).MatchString(record) {
					t.Errorf("recording rule %s: want level:metric:operations naming", record)
				}
				continue
			}
			if sev := str(r, "labels", "severity"); sev != "info" && sev != "warning" && sev != "critical" {
				t.Errorf("%s: severity %q", alert, sev)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if str(r, "annotations", a) == "" {
					t.Errorf("%s: no %s annotation", alert, a)
				}
			}
			if f := str(r, "for"); f != "" {
				if _, err := time.ParseDuration(f); err != nil {
					t.Errorf("%s: for %q: %v", alert, f, err)
				}
			}
			if u := str(r, "annotations", "runbook_url"); !strings.HasSuffix(u, "deploy/README.md#"+strings.ToLower(alert)) {
				t.Errorf("%s: runbook_url %s does not point at its README section", alert, u)
			}
			if !headings[alert] {
				t.Errorf("%s: README.md has no runbook section '### %s'", alert, alert)
			}
		}
	}
	// The alerts the issue asks for, by the signal they must watch.
	all := strings.Join(exprs, "\n")
	for what, re := range map[string]string{
		"uncleanable partitions": `tiered_compactor_uncleanable_partitions > 0`,
		"growing upload lag":     `(deriv|delta|increase)\(tiered_uploader_lag_(bytes|segments)\[`,
		"cleaner not running":    `tiered_compactor_seconds_since_last_run >`,
		"earliest offset jump":   `tiered:retention_earliest_offset:advance10m >`,
		"fetch rejections":       `rate\(tiered_fetch_gate_rejections_total\[`,
		"objstore failures":      `rate\(tiered_objstore_operation_failures_total\[`,
	} {
		if !regexp.MustCompile(re).MatchString(all) {
			t.Errorf("no alert for %s (an expr matching %s)", what, re)
		}
	}
	// Recording rules used by alerts exist.
	for _, m := range regexp.MustCompile(`tiered:[a-z0-9_]+:[a-z0-9_]+`).FindAllString(all, -1) {
		if !names[m] {
			t.Errorf("alert uses recording rule %s, which is not defined", m)
		}
	}
}

// ---- compose ----------------------------------------------------------------------------

func TestCompose(t *testing.T) {
	doc := yamlDocs(t, "compose.yaml")[0]
	services, _ := doc["services"].(map[string]any)
	volumes, _ := doc["volumes"].(map[string]any)
	if len(services) == 0 {
		t.Fatal("no services")
	}
	type mount struct{ source, target, mode string }
	mounts := func(svc map[string]any) []mount {
		var out []mount
		for _, v := range list(svc, "volumes") {
			if s, ok := v.(string); ok {
				parts := strings.Split(s, ":")
				m := mount{source: parts[0]}
				if len(parts) > 1 {
					m.target = parts[1]
				}
				if len(parts) > 2 {
					m.mode = parts[2]
				}
				out = append(out, m)
				continue
			}
			m := mount{source: str(v, "source"), target: str(v, "target")}
			if ro, _ := get(v, "read_only").(bool); ro {
				m.mode = "ro"
			}
			out = append(out, m)
		}
		return out
	}
	var broker, sidecar, fetch string
	for name, s := range services {
		svc := s.(map[string]any)
		for _, m := range mounts(svc) {
			if !strings.HasPrefix(m.source, ".") && !strings.HasPrefix(m.source, "/") {
				if _, ok := volumes[m.source]; !ok {
					t.Errorf("service %s mounts volume %q, which is not declared under volumes", name, m.source)
				}
			}
		}
		deps, _ := svc["depends_on"].(map[string]any)
		for d := range deps {
			if services[d] == nil {
				t.Errorf("service %s depends on unknown service %s", name, d)
			}
		}
		if strings.HasPrefix(str(svc, "image"), "apache/kafka") {
			broker = name
		}
		switch str(svc, "command", 0) {
		case "sidecar":
			sidecar = name
		case "fetch":
			fetch = name
		}
		if restart := str(svc, "restart"); restart != "no" && get(svc, "healthcheck", "test") == nil {
			t.Errorf("long-running service %s has no healthcheck", name)
		}
	}
	if broker == "" || sidecar == "" || fetch == "" || services["minio"] == nil {
		t.Fatalf("want a Kafka broker, MinIO, a tiered sidecar and a tiered fetch service; have broker=%q sidecar=%q fetch=%q", broker, sidecar, fetch)
	}
	bsvc := services[broker].(map[string]any)
	logDir := str(bsvc, "environment", "KAFKA_LOG_DIRS")
	var brokerVol mount
	for _, m := range mounts(bsvc) {
		if within(logDir, m.target) {
			brokerVol = m
		}
	}
	if brokerVol.source == "" || volumes == nil {
		t.Fatalf("broker log dir %q is not on a named volume", logDir)
	}
	// The configuration each tiered service runs with: its TIERED_* environment and flags.
	cfgs := map[string]*config.Config{}
	for name, p := range map[string]config.Process{sidecar: config.ProcessSidecar, fetch: config.ProcessFetch} {
		svc := services[name].(map[string]any)
		var env []string
		for k, v := range get(svc, "environment").(map[string]any) {
			env = append(env, fmt.Sprintf("%s=%v", k, v))
		}
		// --config names a file the service mounts from deploy/.
		file := ""
		if path, ok := containerArg(list(svc, "command"), "--config"); ok {
			for _, m := range mounts(svc) {
				if m.target == path && strings.HasPrefix(m.source, "./") {
					file = m.source
				}
			}
			if file == "" {
				t.Errorf("%s: --config %s is not a file it mounts from deploy/", name, path)
			}
		}
		cfgs[name] = daemonConfig(t, p, file, env, list(svc, "command"))
	}
	ssvc := services[sidecar].(map[string]any)
	dir := cfgs[sidecar].Sidecar.KafkaLogDir
	ok := false
	for _, m := range mounts(ssvc) {
		if m.source != brokerVol.source {
			continue
		}
		ok = true
		if m.mode != "ro" {
			t.Errorf("sidecar mounts the broker volume %s read-write; want :ro", m.source)
		}
		rel, _ := filepath.Rel(brokerVol.target, logDir)
		if want := filepath.Join(m.target, rel); dir != want {
			t.Errorf("sidecar.kafka_log_dir %s, want %s (the broker's %s)", dir, want, logDir)
		}
	}
	if !ok {
		t.Errorf("sidecar does not mount the broker volume %s", brokerVol.source)
	}
	for _, name := range []string{sidecar, fetch} {
		svc := services[name].(map[string]any)
		if str(svc, "build", "dockerfile") != "deploy/Dockerfile" || str(svc, "build", "context") != ".." {
			t.Errorf("%s: build %v, want context .. and dockerfile deploy/Dockerfile", name, get(svc, "build"))
		}
		bucket := cfgs[name].Bucket
		if !strings.HasPrefix(bucket, "s3://") || !strings.Contains(bucket, "endpoint=http://minio:9000") || !strings.Contains(bucket, "path_style=true") {
			t.Errorf("%s: bucket %q, want the MinIO bucket", name, bucket)
		}
		if str(svc, "environment", "AWS_ACCESS_KEY_ID") == "" || str(svc, "environment", "AWS_SECRET_ACCESS_KEY") == "" {
			t.Errorf("%s: credentials must come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", name)
		}
		if len(list(svc, "ports")) == 0 {
			t.Errorf("%s publishes no port", name)
		}
	}
	fsvc := services[fetch].(map[string]any)
	for _, f := range []string{"--http", "--kafka", "--advertised-addr"} {
		if _, ok := containerArg(list(fsvc, "command"), f); !ok {
			t.Errorf("fetch service has no %s", f)
		}
	}
	// The sidecar's listener is the port it publishes and its healthcheck probes.
	if _, port, _ := net.SplitHostPort(cfgs[sidecar].HTTP.Addr); port == "" ||
		!strings.Contains(fmt.Sprint(get(ssvc, "healthcheck", "test")), ":"+port+"/") || !strings.Contains(fmt.Sprint(list(ssvc, "ports")), ":"+port) {
		t.Errorf("sidecar http.addr %q: its port must be published and probed by the healthcheck (%v)", cfgs[sidecar].HTTP.Addr, get(ssvc, "healthcheck", "test"))
	}
	// The bucket the sidecar writes is the one minio-init creates and fetch reads.
	sb, fb := cfgs[sidecar].Bucket, cfgs[fetch].Bucket
	if sb != fb {
		t.Errorf("sidecar writes %s but fetch reads %s", sb, fb)
	}
	bucket := strings.SplitN(strings.TrimPrefix(sb, "s3://"), "/", 2)[0]
	bucket = strings.SplitN(bucket, "?", 2)[0]
	cmds := ""
	for _, s := range services {
		cmds += strings.Join(strings.Fields(fmt.Sprint(get(s, "command"))), " ") + "\n"
	}
	if !strings.Contains(cmds, "mc mb --ignore-existing local/"+bucket) {
		t.Errorf("no service creates bucket %s", bucket)
	}
}

// ---- Dockerfile -------------------------------------------------------------------------

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	var froms, copies []string
	var lastUser, entrypoint string
	for _, line := range strings.Split(df, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
			lastUser = ""
		case "COPY":
			if !strings.HasPrefix(f[1], "--from") {
				copies = append(copies, f[1:len(f)-1]...)
			}
		case "USER":
			lastUser = f[1]
		case "ENTRYPOINT":
			entrypoint = strings.TrimSpace(strings.TrimPrefix(line, f[0]))
		}
	}
	if len(froms) < 2 || !strings.HasPrefix(froms[0], "golang:") {
		t.Fatalf("FROM lines %v: want a golang build stage and a runtime stage", froms)
	}
	if m := regexp.MustCompile(`ARG GO_VERSION=(\d+\.\d+)`).FindStringSubmatch(df); m == nil || !strings.Contains(froms[0], "${GO_VERSION}") {
		t.Error("the build stage should be golang:${GO_VERSION} with ARG GO_VERSION=<major.minor>")
	} else {
		mod, err := os.ReadFile("../go.mod")
		if err != nil {
			t.Fatal(err)
		}
		goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
		if goLine == nil || !strings.HasPrefix(string(goLine[1]), m[1]) {
			t.Errorf("ARG GO_VERSION=%s, go.mod says go %s", m[1], goLine[1])
		}
	}
	runtime := froms[len(froms)-1]
	if !strings.Contains(runtime, "distroless/static") && runtime != "scratch" {
		t.Errorf("runtime stage %s: want distroless/static or scratch", runtime)
	}
	if lastUser == "" || lastUser == "root" || strings.HasPrefix(lastUser, "0") {
		t.Errorf("runtime stage runs as %q, want a non-root user", lastUser)
	}
	if entrypoint != `["/usr/local/bin/tiered"]` {
		t.Errorf("ENTRYPOINT %s, want the tiered binary in exec form", entrypoint)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X github.com/tiered/tiered/internal/app/cli.Version=${VERSION}", "./cmd/tiered"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	cli, err := os.ReadFile("../internal/app/cli/cli.go")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^var Version = `).Match(cli) {
		t.Error("internal/app/cli.Version, the -X target, is gone")
	}
	// Without a .dockerignore the Dockerfile copies package directories one by one: every
	// package of the module the binaries import must be under one of them.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../cmd/tiered", "./healthcheck").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/tiered/tiered/"
	for _, pkg := range strings.Fields(string(out)) {
		dir, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		covered := false
		for _, c := range copies {
			covered = covered || within(dir, strings.TrimSuffix(c, "/"))
		}
		if !covered {
			t.Errorf("package %s is not copied into the build stage (COPY sources: %v)", pkg, copies)
		}
	}
}

// ---- the health probe -------------------------------------------------------------------

var (
	binOnce              sync.Once
	binTiered, binHealth string
	binDir               string
	binErr               error
)

// binaries builds tiered and healthcheck once per test binary run.
func binaries(t *testing.T) (string, string) {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "tiered-deploy-test-")
		if binErr != nil {
			return
		}
		binTiered, binHealth = filepath.Join(binDir, "tiered"), filepath.Join(binDir, "healthcheck")
		for bin, pkg := range map[string]string{binTiered: "../cmd/tiered", binHealth: "./healthcheck"} {
			cmd := exec.Command("go", "build", "-o", bin, pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binTiered, binHealth
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestHealthcheck(t *testing.T) {
	_, hc := binaries(t)
	status := http.StatusOK
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		status int
		url    string
		want   int
	}{
		{"ok", http.StatusOK, srv.URL + "/healthz", 0},
		{"unavailable", http.StatusServiceUnavailable, srv.URL + "/healthz", 1},
		{"not_found", http.StatusOK, srv.URL + "/nope", 1},
		{"refused", http.StatusOK, "http://" + testnet.LoopbackAddr(t) + "/healthz", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			status = tc.status
			mu.Unlock()
			out, err := exec.Command(hc, tc.url).CombinedOutput()
			if got := exitCode(err); got != tc.want {
				t.Errorf("healthcheck %s: exit %d, want %d\n%s", tc.url, got, tc.want, out)
			}
		})
	}
	if out, err := exec.Command(hc, "a", "b").CombinedOutput(); exitCode(err) != 2 {
		t.Errorf("two arguments: exit %d, want 2\n%s", exitCode(err), out)
	}
}

// ---- metric names -----------------------------------------------------------------------

// referencedMetrics returns every tiered_* metric name in the rules, the PrometheusRule and
// the dashboard (string values only: expressions, annotations, descriptions), each with
// where it was seen.
func referencedMetrics(t *testing.T) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`\btiered_[a-z0-9_]*[a-z0-9]`)
	out := map[string]string{}
	add := func(where string, v any) {
		for _, s := range allStrings(v) {
			for _, m := range re.FindAllString(s, -1) {
				out[m] = where
			}
		}
	}
	add("prometheus/rules.yaml", yamlDocs(t, "prometheus/rules.yaml"))
	pr := findObject(t, k8sObjects(t), "PrometheusRule", "tiered")
	add("k8s/prometheusrule.yaml", pr)
	data, err := os.ReadFile("grafana/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	add("grafana/dashboard.json", d)
	if len(out) < 40 {
		t.Fatalf("only %d metric names referenced; the extraction is broken", len(out))
	}
	return out
}

// daemon is a tiered process started for a scrape.
type daemon struct {
	name   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startDaemon(t *testing.T, bin, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout = d.stderr
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop sends SIGTERM and requires exit 0 within 20 s (the daemons promise a clean stop).
func (d *daemon) stop(t *testing.T) {
	if d.done == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if code := exitCode(err); code != 0 {
			t.Errorf("%s exited %d after SIGTERM\n%s", d.name, code, d.stderr.String())
		}
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("%s did not stop within 20s of SIGTERM\n%s", d.name, d.stderr.String())
	}
	d.done = nil
}

// noKeepAlive leaves no idle connection (and goroutine) behind a scrape.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// scrape polls url until it answers 200 (the daemon is up) and returns the metric families
// of its Prometheus text exposition, name to type, by their # TYPE lines.
func (d *daemon) scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		select {
		case err := <-d.done:
			d.done = nil
			t.Fatalf("%s exited (%v) before serving %s\n%s", d.name, err, url, d.stderr.String())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := noKeepAlive.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			names := map[string]string{}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) >= 4 && f[0] == "#" && f[1] == "TYPE" {
					names[f[2]] = f[3]
				}
			}
			resp.Body.Close()
			if err := sc.Err(); err != nil {
				t.Fatalf("read %s: %v", url, err)
			}
			return names
		}
		if err == nil {
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %s not answering 200 within 30s (last error %v)\n%s", d.name, url, err, d.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hasCommand reports whether the binary has the command (its help exits 0).
func hasCommand(bin, name string) bool {
	return exec.Command(bin, "help", name).Run() == nil
}

// TestReferencedMetricsExist scrapes the real binary: tiered sidecar on a copy of a real
// KRaft broker's log dir, tiered fetch on the bucket the sidecar filled, and tiered serve
// (which runs every subsystem) on a data dir with a compacted, remote-enabled topic. Every tiered_* name the rules or the dashboard use must be
// a family one of them exposes (histograms by their base name: _bucket, _sum and _count
// are stripped).
func TestReferencedMetricsExist(t *testing.T) {
	refs := referencedMetrics(t)
	bin, _ := binaries(t)
	tmp := t.TempDir()
	logDir := brokerdir.Copy(t, filepath.Join(tmp, "kafka-logs"))
	bucketDir := filepath.Join(tmp, "bucket")
	if err := os.MkdirAll(bucketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bucket := "file://" + bucketDir

	// family name -> type, and the processes exposing it
	types := map[string]string{}
	by := map[string][]string{}
	collect := func(who string, names map[string]string) {
		t.Logf("%s exposes %d metric families", who, len(names))
		for n, typ := range names {
			types[n] = typ
			by[n] = append(by[n], who)
		}
	}

	addr := testnet.LoopbackAddr(t)
	sidecar := startDaemon(t, bin, "sidecar", "sidecar", "--kafka-log-dir", logDir, "--bucket", bucket, "--http", addr, "--interval", "1s")
	// Per-partition series (tiered_uploader_partition_*) exist once a pass listed the
	// partitions: scrape after the first pass (/readyz 200).
	sidecar.scrape(t, "http://"+addr+"/metrics")
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := noKeepAlive.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar not ready within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	collect("sidecar", sidecar.scrape(t, "http://"+addr+"/metrics"))
	sidecar.stop(t)

	for _, cmd := range []string{"fetch", "serve"} {
		if !hasCommand(bin, cmd) {
			t.Fatalf("tiered %s is missing: the scrape needs every daemon", cmd)
		}
	}
	{
		hk := testnet.LoopbackAddrs(t, 2)
		h, k := hk[0], hk[1]
		fetch := startDaemon(t, bin, "fetch", "fetch", "--bucket", bucket, "--http", h, "--kafka", k)
		collect("fetch", fetch.scrape(t, "http://"+h+"/metrics"))
		fetch.stop(t)
	}
	{
		// A topic first: per-partition series (tiered_retention_earliest_offset) exist
		// from start-up only for partitions that exist.
		dataDir := filepath.Join(tmp, "data")
		if out, err := exec.Command(bin, "topic", "create", "--data-dir", dataDir, "--topic", "deploy-test",
			"--partitions", "2", "--config", "cleanup.policy=compact", "--config", "remote.storage.enable=true").CombinedOutput(); err != nil {
			t.Fatalf("topic create: %v\n%s", err, out)
		}
		hk := testnet.LoopbackAddrs(t, 2)
		h, k := hk[0], hk[1]
		serve := startDaemon(t, bin, "serve", "serve", "--data-dir", dataDir, "--http", h, "--kafka", k)
		collect("serve", serve.scrape(t, "http://"+h+"/metrics"))
		serve.stop(t)
	}

	var missing []string
	for name, where := range refs {
		if types[name] != "" {
			continue
		}
		// A histogram's series: name_bucket, name_sum, name_count.
		found := false
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && types[b] == "histogram" {
				found = true
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s (in %s)", name, where))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("metric %s is exposed by no tiered process", m)
	}
	// Each process exposes the families of its subsystems (deploy/README.md says which).
	for fam, who := range map[string]string{
		"tiered_uploader_lag_bytes":        "sidecar",
		"tiered_objstore_operations_total": "fetch",
		"tiered_fetch_requests_total":      "fetch",
		"tiered_compactor_runs_total":      "serve",
		"tiered_retention_earliest_offset": "serve",
	} {
		if !slices.Contains(by[fam], who) {
			t.Errorf("%s: exposed by %v, want %s among them", fam, by[fam], who)
		}
	}
}
