package dialecttest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every method of every interface the suite knows has a test of its own
// in the suite, and every test names a method that exists.
func TestEveryMethodHasATest(t *testing.T) {
	total := 0
	for _, in := range interfaces {
		untested, unknown := in.missing()
		for _, m := range untested {
			t.Errorf("%s has no conformance test: add one to the %s tests of dialecttest (a test{method: %q, ...})", m, in.typ.Name(), m[strings.Index(m, ".")+1:])
		}
		for _, m := range unknown {
			t.Errorf("a conformance test names %s, which dialect.%s does not have", m, in.typ.Name())
		}
		total += in.typ.NumMethod()
	}
	if total < 80 {
		t.Fatalf("the interfaces list %d methods in all; the dialect package has more than 80: is the list cut short?", total)
	}
}

// Every exported interface of package dialect is in interfaces: one
// added there later gets its tests here, or this fails.
func TestEveryInterfaceIsListed(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("..", name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "dialect" {
			t.Fatalf("%s is package %s, not dialect: is the parse reading the right directory?", name, f.Name.Name)
		}
		files = append(files, f)
	}
	listed := map[string]bool{}
	for _, in := range interfaces {
		listed[in.typ.Name()] = true
	}
	var found []string
	for _, f := range files {
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.InterfaceType); !ok || !ts.Name.IsExported() {
					continue
				}
				found = append(found, ts.Name.Name)
				if !listed[ts.Name.Name] {
					t.Errorf("dialect.%s (%s) is not in dialecttest's interfaces: add it there, with a file of tests of its methods", ts.Name.Name, fset.Position(ts.Pos()))
				}
			}
		}
	}
	if len(found) < len(interfaces) {
		t.Fatalf("found %d exported interfaces in package dialect (%v), fewer than the %d listed: is the parse reading the right directory?", len(found), found, len(interfaces))
	}
}
