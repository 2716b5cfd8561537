package archtest

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// cleanGraph is a miniature of the module that keeps every rule: the
// layering of DESIGN.md, tests importing test kits and packages above them,
// test tools importing test kits, and fetchcache reading through
// remotetier/remotelog, never the uploader.
func cleanGraph() graph {
	return graph{
		"cmd/tiered":                       {imports: []string{"internal/app/cli", "os"}},
		"internal/app/cli":                 {imports: []string{"internal/app/config", "internal/app/daemon", "fetchcache", "remotetier", "compactor", "retention", "localtier", "manifest"}, testImports: []string{"internal/testkit/testminio"}},
		"internal/app/config":              {imports: []string{"localtier/topicconfig", "remotetier/objstore", "manifest"}},
		"internal/app/daemon":              {imports: []string{"internal/app/config", "fetchcache", "remotetier", "compactor", "retention"}, testImports: []string{"internal/testkit/testrecs"}},
		"internal/x/ctxsleep":              {imports: []string{"context", "time"}},
		"internal/x/recordjson":            {imports: []string{"localtier/record", "encoding/json"}},
		"localtier":                        {imports: []string{"localtier/record", "localtier/vfs", "localtier/topicconfig", "os"}, testImports: []string{"internal/testkit/reliability", "localtier/codec"}},
		"localtier/codec":                  {},
		"localtier/record":                 {imports: []string{"localtier/codec", "hash/crc32"}},
		"localtier/topicconfig":            {},
		"localtier/vfs":                    {imports: []string{"os", "syscall"}},
		"compactor":                        {imports: []string{"localtier", "localtier/record", "internal/x/ctxsleep"}, testImports: []string{"internal/testkit/reliability", "localtier/vfs"}},
		"retention":                        {imports: []string{"localtier", "localtier/topicconfig"}},
		"manifest":                         {imports: []string{"context", "io", "encoding/json", "crypto/sha256", "net/url"}, testImports: []string{"os", "remotetier/objstore"}},
		"remotetier":                       {imports: []string{"localtier", "localtier/vfs", "manifest", "remotetier/objstore", "retention", "internal/x/ctxsleep"}, testImports: []string{"compactor", "internal/testkit/testminio"}},
		"remotetier/objstore":              {imports: []string{"os", "net/http", "github.com/aws/aws-sdk-go-v2/service/s3"}, testImports: []string{"internal/testkit/objtesting", "remotetier/objstore"}},
		"fetchcache":                       {imports: []string{"remotetier/remotelog", "remotetier/objstore", "manifest", "localtier/record", "internal/x/recordjson"}, testImports: []string{"compactor", "internal/app/config", "internal/testkit/testrecs"}},
		"fetchcache/kafkasrv":              {imports: []string{"fetchcache", "remotetier/remotelog"}},
		"remotetier/remotelog":             {imports: []string{"manifest", "remotetier/objstore", "localtier/record"}},
		"internal/testkit/objtesting":      {imports: []string{"internal/testkit/testminio", "remotetier/objstore"}},
		"internal/testkit/reliability":     {imports: []string{"os"}},
		"internal/testkit/testminio":       {imports: []string{"os/exec"}},
		"internal/testkit/testrecs":        {imports: []string{"localtier", "localtier/record"}},
		"internal/tools/reliabilityreport": {imports: []string{"internal/testkit/reliability"}},
		"deploy":                           {testImports: []string{"internal/app/config"}},
		"integration":                      {testImports: []string{"fetchcache", "remotetier", "internal/testkit/testminio", "internal/testkit/faultproxy"}},
		"internal/testkit/faultproxy":      {imports: []string{"net/http"}},
	}
}

func ruleNamed(t *testing.T, name string) rule {
	t.Helper()
	for _, r := range rules {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no rule %s", name)
	return rule{}
}

func TestCleanGraphsPass(t *testing.T) {
	if v := check(cleanGraph(), rules); len(v) != 0 {
		t.Errorf("violations in a clean graph:\n%s", strings.Join(v, "\n"))
	}
}

// addImport returns g with from importing dep (in its tests when test).
func addImport(g graph, from, dep string, test bool) graph {
	g = maps.Clone(g)
	p := g[from]
	if test {
		p.testImports = append(slices.Clone(p.testImports), dep)
	} else {
		p.imports = append(slices.Clone(p.imports), dep)
	}
	g[from] = p
	return g
}

// TestEachRuleFires adds one violating import to a clean graph per case and
// wants exactly the violations named (rule and message); every rule has a
// case.
func TestEachRuleFires(t *testing.T) {
	type want struct{ rule, msg string } // msg without ": " + the rule's why
	cases := []struct {
		name string
		g    graph
		from string
		dep  string
		test bool
		want []want
	}{
		{name: "library imports the app", g: cleanGraph(), from: "fetchcache", dep: "internal/app/config",
			want: []want{{"app", "fetchcache imports internal/app/config"}}},
		{name: "helper imports the app", g: cleanGraph(), from: "internal/x/ctxsleep", dep: "internal/app/daemon",
			want: []want{{"app", "internal/x/ctxsleep imports internal/app/daemon"}}},
		{name: "test kit imports the app", g: cleanGraph(), from: "internal/testkit/testrecs", dep: "internal/app/config",
			want: []want{{"app", "internal/testkit/testrecs imports internal/app/config"}}},
		{name: "library imports a test kit", g: cleanGraph(), from: "remotetier/objstore", dep: "internal/testkit/testminio",
			want: []want{{"testkit", "remotetier/objstore imports internal/testkit/testminio"}}},
		{name: "the app imports a test kit", g: cleanGraph(), from: "internal/app/daemon", dep: "internal/testkit/testrecs",
			want: []want{{"testkit", "internal/app/daemon imports internal/testkit/testrecs"}}},
		{name: "the binary imports a test kit", g: cleanGraph(), from: "cmd/tiered", dep: "internal/testkit/faultproxy",
			want: []want{{"testkit", "cmd/tiered imports internal/testkit/faultproxy"}}},
		{name: "the app imports cmd", g: cleanGraph(), from: "internal/app/cli", dep: "cmd/tiered",
			want: []want{{"cmd", "internal/app/cli imports cmd/tiered"}}},
		{name: "a test imports cmd", g: cleanGraph(), from: "integration", dep: "cmd/tiered", test: true,
			want: []want{{"cmd", "integration imports cmd/tiered in its tests"}}},
		{name: "log engine imports retention", g: cleanGraph(), from: "localtier", dep: "retention",
			want: []want{{"localtier", "localtier imports retention"}}},
		{name: "log engine subpackage imports manifest", g: cleanGraph(), from: "localtier/vfs", dep: "manifest",
			want: []want{{"localtier", "localtier/vfs imports manifest"}}},
		{name: "log engine imports compactor", g: cleanGraph(), from: "localtier/record", dep: "compactor",
			want: []want{{"localtier", "localtier/record imports compactor"}}},
		{name: "log engine imports the object store", g: cleanGraph(), from: "localtier", dep: "remotetier/objstore",
			want: []want{{"localtier", "localtier imports remotetier/objstore"}}},
		{name: "log engine imports the fetch service", g: cleanGraph(), from: "localtier/topicconfig", dep: "fetchcache",
			want: []want{{"localtier", "localtier/topicconfig imports fetchcache"}}},
		{name: "log engine imports the app", g: cleanGraph(), from: "localtier", dep: "internal/app/config",
			want: []want{{"app", "localtier imports internal/app/config"}, {"localtier", "localtier imports internal/app/config"}}},
		{name: "manifest opens files", g: cleanGraph(), from: "manifest", dep: "os",
			want: []want{{"manifest", "manifest imports os"}}},
		{name: "manifest runs commands", g: cleanGraph(), from: "manifest", dep: "os/exec",
			want: []want{{"manifest", "manifest imports os/exec"}}},
		{name: "manifest speaks HTTP", g: cleanGraph(), from: "manifest", dep: "net/http",
			want: []want{{"manifest", "manifest imports net/http"}}},
		{name: "manifest dials", g: cleanGraph(), from: "manifest", dep: "net",
			want: []want{{"manifest", "manifest imports net"}}},
		{name: "manifest uses the S3 SDK", g: cleanGraph(), from: "manifest", dep: "github.com/aws/aws-sdk-go-v2/service/s3",
			want: []want{{"manifest", "manifest imports github.com/aws/aws-sdk-go-v2/service/s3"}}},
		{name: "manifest uses the object store", g: cleanGraph(), from: "manifest", dep: "remotetier/objstore",
			want: []want{{"manifest", "manifest imports remotetier/objstore"}}},
		{name: "manifest uses the local file system seam", g: cleanGraph(), from: "manifest", dep: "localtier/vfs",
			want: []want{{"manifest", "manifest imports localtier/vfs"}}},
		{name: "remotetier imports the fetch service", g: cleanGraph(), from: "remotetier/objstore", dep: "fetchcache",
			want: []want{{"remotetier", "remotetier/objstore imports fetchcache"}}},
		{name: "compactor imports the object store", g: cleanGraph(), from: "compactor", dep: "remotetier/objstore",
			want: []want{{"compactor-retention", "compactor imports remotetier/objstore"}}},
		{name: "retention imports the fetch service", g: cleanGraph(), from: "retention", dep: "fetchcache",
			want: []want{{"compactor-retention", "retention imports fetchcache"}}},
		{name: "fetchcache imports the uploader", g: cleanGraph(), from: "fetchcache", dep: "remotetier",
			want: []want{
				{"fetchcache-uploader", "fetchcache imports remotetier"},
				{"fetchcache-uploader", "fetchcache/kafkasrv imports remotetier (through fetchcache)"},
			}},
		{name: "fetchcache subpackage imports the uploader", g: cleanGraph(), from: "fetchcache/kafkasrv", dep: "remotetier",
			want: []want{{"fetchcache-uploader", "fetchcache/kafkasrv imports remotetier"}}},
		{name: "fetchcache reaches the uploader through the reader", g: cleanGraph(), from: "remotetier/remotelog", dep: "remotetier",
			want: []want{
				{"fetchcache-uploader", "fetchcache imports remotetier (through remotetier/remotelog)"},
				{"fetchcache-uploader", "fetchcache/kafkasrv imports remotetier (through remotetier/remotelog)"},
			}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := addImport(c.g, c.from, c.dep, c.test)
			var want []string
			for _, w := range c.want {
				want = append(want, w.msg+": "+ruleNamed(t, w.rule).why)
				covered[w.rule] = true
			}
			got := check(g, rules)
			if !slices.Equal(got, want) {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	for _, r := range rules {
		if !covered[r.name] {
			t.Errorf("rule %s has no violating case", r.name)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"...", "cmd/tiered", true},
		{"remotetier", "remotetier", true},
		{"remotetier", "remotetier/objstore", false},
		{"remotetier/...", "remotetier", true},
		{"remotetier/...", "remotetier/objstore", true},
		{"remotetier/...", "remotetierx", false},
		{"os/...", "os/exec", true},
		{"net", "net/url", false},
		{"net/http/...", "net/http/httptest", true},
	} {
		if got := match(c.pattern, c.path); got != c.want {
			t.Errorf("match(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

func TestParseList(t *testing.T) {
	const out = `{"ImportPath": "example.com/m/a", "Module": {"Path": "example.com/m"}, "Imports": ["example.com/m/b", "os"], "TestImports": ["example.com/m/c"], "XTestImports": ["example.com/m/a", "testing"]}
{"ImportPath": "example.com/m/b", "Module": {"Path": "example.com/m"}}
{"ImportPath": "example.com/m", "Module": {"Path": "example.com/m"}, "Imports": ["example.com/m/a"]}
`
	g, err := parseList([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 3 {
		t.Fatalf("%d packages, want 3: %v", len(g), g)
	}
	a := g["a"]
	if !slices.Equal(a.imports, []string{"b", "os"}) || !slices.Equal(a.testImports, []string{"c", "a", "testing"}) {
		t.Errorf("a = %+v, want imports [b os], test imports [c a testing]", a)
	}
	if root := g["."]; !slices.Equal(root.imports, []string{"a"}) {
		t.Errorf("root = %+v, want imports [a]", root)
	}
	for name, bad := range map[string]string{
		"empty":       "",
		"broken":      `{"ImportPath": "example.com/m/a", "Module": {"Path": "example.com/m"}, "Error": {"Err": "no Go files"}}`,
		"two modules": `{"ImportPath": "example.com/m/a", "Module": {"Path": "example.com/m"}} {"ImportPath": "example.com/n", "Module": {"Path": "example.com/n"}}`,
		"no module":   `{"ImportPath": "fmt"}`,
		"not json":    `ImportPath: a`,
	} {
		if g, err := parseList([]byte(bad)); err == nil {
			t.Errorf("%s: parseList = %v, want an error", name, g)
		}
	}
}
