package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureDocNamesEveryPackage checks DESIGN.md's "docs/ARCHITECTURE.md
// names every package": each directory of the module holding non-test Go
// files is named in docs/ARCHITECTURE.md, by its path, by its last element in
// backquotes or braces (the table's `localtier/record`, `codec` rows and the
// diagram's internal/x/{...}), or under a "prefix/..." entry.
func TestArchitectureDocNamesEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(doc), "```", "")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(text, -1) {
		named[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\{([a-z0-9_,]+)\}`).FindAllStringSubmatch(text, -1) {
		for _, e := range strings.Split(m[1], ",") {
			named[e] = true
		}
	}
	dirs := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			dirs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found only %d package directories: the walk is broken", len(dirs))
	}
	for dir := range dirs {
		if strings.Contains(text, dir) || named[filepath.Base(dir)] {
			continue
		}
		ok := false
		for pre := filepath.Dir(dir); pre != "." && pre != "/"; pre = filepath.Dir(pre) {
			if strings.Contains(text, pre+"/...") {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("docs/ARCHITECTURE.md does not name package %s", dir)
		}
	}
}
