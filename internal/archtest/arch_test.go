// Package archtest holds the architecture test: it reads the module's import
// graph with go list and fails, naming each offending import as
// "pkg imports dep: rule", when an import breaks the one-way dependencies of
// DESIGN.md ("Packages"): the application (internal/app) imported by a
// library, a test kit imported outside tests, cmd imported at all, the log
// engine importing policy, manifest doing I/O, an import against the
// localtier ← compactor, retention ← remotetier ← fetchcache order, or
// fetchcache importing the uploader. The rules are the table in
// rules_test.go; the checker is tested on synthetic graphs so that the test
// cannot pass vacuously. The package has test files only: nothing imports
// it.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// listed is what go list -json prints of a package (the fields asked for).
type listed struct {
	ImportPath   string
	Module       *struct{ Path string }
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// loadGraph lists every package of the module that holds the working
// directory, from the module root.
func loadGraph() (graph, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(gomod))
	if mod == "" || mod == "/dev/null" {
		return nil, errors.New("not inside a module (go env GOMOD is empty)")
	}
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Module,Imports,TestImports,XTestImports,Error", "./...")
	cmd.Dir = filepath.Dir(mod)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", cmd.Dir, err, stderr.Bytes())
	}
	return parseList(out)
}

// parseList builds the graph from go list -json output: the module's
// packages by module-relative path.
func parseList(out []byte) (graph, error) {
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return nil, errors.New("go list printed no package")
	}
	var modPath string
	var errs []error
	for _, p := range pkgs {
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err))
			continue
		}
		if p.Module == nil {
			errs = append(errs, fmt.Errorf("%s: in no module", p.ImportPath))
			continue
		}
		if modPath == "" {
			modPath = p.Module.Path
		} else if p.Module.Path != modPath {
			errs = append(errs, fmt.Errorf("%s: in module %s, want %s", p.ImportPath, p.Module.Path, modPath))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rel := func(path string) string {
		if path == modPath {
			return "."
		}
		if r, ok := strings.CutPrefix(path, modPath+"/"); ok {
			return r
		}
		return path
	}
	rels := func(paths ...[]string) []string {
		var out []string
		for _, ps := range paths {
			for _, p := range ps {
				out = append(out, rel(p))
			}
		}
		return out
	}
	g := graph{}
	for _, p := range pkgs {
		g[rel(p.ImportPath)] = pkg{imports: rels(p.Imports), testImports: rels(p.TestImports, p.XTestImports)}
	}
	return g, nil
}

// TestModuleImports checks the module's import graph against the rules.
func TestModuleImports(t *testing.T) {
	g, err := loadGraph()
	if err != nil {
		t.Fatal(err)
	}
	checkRulesNameRealPackages(t, g)
	for _, v := range check(g, rules) {
		t.Error(v)
	}
}

// checkRulesNameRealPackages fails when the graph looks empty or a rule
// names a package the module does not have (a rename would make the rule
// silently cover nothing).
func checkRulesNameRealPackages(t *testing.T, g graph) {
	t.Helper()
	var edges, testEdges int
	for _, p := range g {
		for _, dep := range p.imports {
			if _, ok := g[dep]; ok {
				edges++
			}
		}
		for _, dep := range p.testImports {
			if _, ok := g[dep]; ok {
				testEdges++
			}
		}
	}
	if edges == 0 || testEdges == 0 {
		t.Fatalf("the graph of %d packages has %d imports and %d test imports between them: go list output not understood", len(g), edges, testEdges)
	}
	for _, r := range rules {
		for _, pats := range [][]string{r.from, r.except, r.deny} {
			for _, pat := range pats {
				found := false
				for p := range g {
					if match(pat, p) {
						found = true
						break
					}
				}
				if !found {
					t.Errorf("rule %s: pattern %s matches no package of the module", r.name, pat)
				}
			}
		}
	}
}
