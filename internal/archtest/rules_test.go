package archtest

import (
	"fmt"
	"slices"
	"strings"
)

// pkg is one package of the module in the import graph. Paths of the
// module's packages are relative to the module path ("localtier/vfs");
// imports of packages outside the module keep their full path ("os").
type pkg struct {
	imports     []string // of the package's non-test files
	testImports []string // of its _test.go files, in-package and external
}

// graph maps a module-relative package path to its imports.
type graph map[string]pkg

// rule is one line of the architecture: the packages it covers (from, less
// except) must not import what deny (module packages) or denyExt (packages
// outside the module) names. Patterns are a path ("remotetier": that
// package only) or a path followed by "/..." (the package and all below it).
type rule struct {
	name    string
	from    []string
	except  []string
	deny    []string
	denyExt []string
	// tests: the imports of _test.go files count too. Off for the layering
	// rules: a test may build its fixtures with packages above it (the
	// remotetier tests compact a log with compactor; deploy's tests parse
	// its files with internal/app/config).
	tests bool
	// transitive: a denied module package reached through other module
	// packages counts too (the path is reported).
	transitive bool
	why        string
}

// rules is the architecture of docs and DESIGN.md ("Packages"), as import
// rules.
var rules = []rule{
	{
		name:   "app",
		from:   []string{"..."},
		except: []string{"internal/app/...", "cmd/..."},
		deny:   []string{"internal/app/..."},
		why:    "no package outside cmd and internal/app imports the application (internal/app)",
	},
	{
		name:   "testkit",
		from:   []string{"..."},
		except: []string{"internal/testkit/...", "internal/tools/..."},
		deny:   []string{"internal/testkit/..."},
		why:    "test kits (internal/testkit) are imported by tests, test kits and test tools only",
	},
	{
		name:  "cmd",
		from:  []string{"..."},
		deny:  []string{"cmd/..."},
		tests: true,
		why:   "nothing imports cmd",
	},
	{
		name: "localtier",
		from: []string{"localtier/..."},
		deny: []string{"retention/...", "compactor/...", "remotetier/...", "manifest/...", "fetchcache/...", "internal/app/..."},
		why:  "the log engine (localtier) imports no policy: retention, compactor, remotetier, manifest, fetchcache and the application sit above it",
	},
	{
		name: "manifest",
		from: []string{"manifest/..."},
		deny: []string{"remotetier/...", "localtier/vfs/...", "fetchcache/...", "internal/app/..."},
		denyExt: []string{
			"os/...", "syscall", "io/fs", "io/ioutil", "net", "net/http/...", "golang.org/x/sys/...",
			"github.com/aws/...", "github.com/minio/...",
		},
		why: "manifest does no I/O (no files, network or object store): it reads and writes through the interfaces its caller passes",
	},
	{
		name: "remotetier",
		from: []string{"remotetier/..."},
		deny: []string{"fetchcache/..."},
		why:  "dependencies point one way: remotetier does not import fetchcache",
	},
	{
		name: "compactor-retention",
		from: []string{"compactor/...", "retention/..."},
		deny: []string{"remotetier/...", "fetchcache/..."},
		why:  "dependencies point one way: compactor and retention import neither remotetier nor fetchcache",
	},
	{
		name:       "fetchcache-uploader",
		from:       []string{"fetchcache/..."},
		deny:       []string{"remotetier"},
		transitive: true,
		why:        "fetchcache never imports the uploader (package remotetier): it reads through remotetier/objstore, remotetier/remotelog and manifest",
	},
}

// match reports whether path matches pattern ("a/b" exactly, "a/b/..." a/b
// and below, "..." everything).
func match(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == p || strings.HasPrefix(path, p+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// covers reports whether the rule applies to package p.
func (r rule) covers(p string) bool { return matchAny(r.from, p) && !matchAny(r.except, p) }

// denies reports whether the rule forbids importing dep, a package of the
// module when inModule.
func (r rule) denies(dep string, inModule bool) bool {
	if inModule {
		return matchAny(r.deny, dep)
	}
	return matchAny(r.denyExt, dep)
}

// check returns every import in g that breaks one of rs, as
// "pkg imports dep: why" (sorted by rule, then package, then import).
func check(g graph, rs []rule) []string {
	var out []string
	paths := make([]string, 0, len(g))
	for p := range g {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, r := range rs {
		for _, p := range paths {
			if !r.covers(p) {
				continue
			}
			for _, dep := range sorted(g[p].imports) {
				if _, in := g[dep]; r.denies(dep, in) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p, dep, r.why))
				}
			}
			if r.tests {
				for _, dep := range sorted(g[p].testImports) {
					if _, in := g[dep]; r.denies(dep, in) && dep != p {
						out = append(out, fmt.Sprintf("%s imports %s in its tests: %s", p, dep, r.why))
					}
				}
			}
			if r.transitive {
				for _, via := range reach(g, p) {
					dep := via[len(via)-1]
					if r.denies(dep, true) {
						out = append(out, fmt.Sprintf("%s imports %s (through %s): %s", p, dep, strings.Join(via[:len(via)-1], " → "), r.why))
					}
				}
			}
		}
	}
	return out
}

// reach returns, for every module package that p depends on through the
// non-test imports of other module packages (not directly), one shortest
// import path from p to it (p excluded, the package last).
func reach(g graph, p string) [][]string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	var out [][]string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, dep := range sorted(g[cur].imports) {
			if _, in := g[dep]; !in {
				continue
			}
			if _, seen := prev[dep]; seen {
				continue
			}
			prev[dep] = cur
			queue = append(queue, dep)
			if cur == p {
				continue // a direct import: reported as such
			}
			var via []string
			for q := dep; q != p; q = prev[q] {
				via = append(via, q)
			}
			slices.Reverse(via)
			out = append(out, via)
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
