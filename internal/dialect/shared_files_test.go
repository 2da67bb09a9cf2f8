package dialect

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// databaseNames are the names a dialect answers to, and MariaDB's.
var databaseNames = map[string]bool{"postgres": true, "mysql": true, "sqlite": true, "mariadb": true}

// namedForDatabase reports whether file holds one database's SQL: its
// name starts with the database's (postgres.go, mysql_claim.go).
func namedForDatabase(file string) bool {
	for name := range databaseNames {
		if file == name+".go" || strings.HasPrefix(file, name+"_") {
			return true
		}
	}
	return false
}

// TestSharedFilesNameNoDatabase keeps "one file per database" true: a file
// of this package not named for a database never branches on which
// database it writes for, nor holds a method of one database's dialect. Where the databases differ, each database's own
// file says how (its spelling, or its own method).
func TestSharedFilesNameNoDatabase(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || namedForDatabase(file) {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, found := range databaseBranches(t, file, src) {
			t.Errorf("%s: a shared file branches on the database (%s): write the database's SQL in its own file, as a field of its spelling or a method of its dialect", found.pos, found.what)
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d shared files: is the test running in the package's directory?", checked)
	}
}

type branch struct {
	pos  token.Position
	what string
}

// databaseBranches finds, in the Go source src, comparisons (==, != and
// switch cases) with a database's name and comparisons of a name field or
// a Name() call.
func databaseBranches(t *testing.T, file string, src []byte) []branch {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []branch
	// A method of one database's dialect type holds that database's SQL:
	// it belongs in the database's file.
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
			continue
		}
		recv := fn.Recv.List[0].Type
		if star, ok := recv.(*ast.StarExpr); ok {
			recv = star.X
		}
		if id, ok := recv.(*ast.Ident); ok && databaseNames[id.Name] {
			out = append(out, branch{fset.Position(fn.Pos()), "a method of " + id.Name + ", " + fn.Name.Name})
		}
	}
	suspect := func(e ast.Expr) string {
		switch e := ast.Unparen(e).(type) {
		case *ast.BasicLit:
			if v, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING && databaseNames[strings.ToLower(v)] {
				return "the literal " + e.Value
			}
		case *ast.SelectorExpr:
			if e.Sel.Name == "name" {
				if x, ok := e.X.(*ast.Ident); ok && isDialectReceiver(f, x) {
					return x.Name + ".name"
				}
			}
		case *ast.CallExpr:
			if s, ok := e.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Name" && len(e.Args) == 0 {
				return "a Name() call"
			}
		}
		return ""
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.EQL && n.Op != token.NEQ {
				return true
			}
			for _, side := range []ast.Expr{n.X, n.Y} {
				if what := suspect(side); what != "" {
					out = append(out, branch{fset.Position(n.Pos()), what})
				}
			}
		case *ast.SwitchStmt:
			if n.Tag != nil {
				if what := suspect(n.Tag); what != "" {
					out = append(out, branch{fset.Position(n.Pos()), "a switch on " + what})
				}
			}
		case *ast.CaseClause:
			for _, e := range n.List {
				if what := suspect(e); what != "" {
					out = append(out, branch{fset.Position(e.Pos()), "a case of " + what})
				}
			}
		}
		return true
	})
	return out
}

// isDialectReceiver reports whether x is the receiver of a method of
// common or of a dialect, where x.name is the dialect's name.
func isDialectReceiver(f *ast.File, x *ast.Ident) bool {
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 || len(fn.Recv.List[0].Names) == 0 {
			continue
		}
		if fn.Recv.List[0].Names[0].Name != x.Name || x.Pos() < fn.Pos() || x.Pos() > fn.End() {
			continue
		}
		typ := fn.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		id, ok := typ.(*ast.Ident)
		return ok && (id.Name == "common" || databaseNames[id.Name])
	}
	return false
}

// TestSharedFilesCheckFinds proves the check above finds each way a
// shared file has branched on the database.
func TestSharedFilesCheckFinds(t *testing.T) {
	for _, src := range []string{
		`func (c *common) f() string { if c.name == "mysql" { return "DIV" }; return "/" }`,
		`func (c *common) f() bool { return c.name != "sqlite" }`,
		`func (c *common) f() string { switch c.name { case "x": return "y" }; return "" }`,
		`func f(name string) string { switch name { case "postgres": return "y" }; return "" }`,
		`func f(d Dialect) bool { return d.Name() == want }`,
		`func (m *mysql) Hit() string { return "INSERT" }`,
	} {
		if got := databaseBranches(t, "x.go", []byte("package dialect\n"+src)); len(got) == 0 {
			t.Errorf("no branch found in %s", src)
		}
	}
	if got := databaseBranches(t, "x.go", []byte("package dialect\nfunc f(n struct{ name string }) bool { return n.name == \"\" }")); len(got) != 0 {
		t.Errorf("a name field that is no dialect's flagged: %v", got)
	}
}

// TestSpellingsComplete checks that every dialect's constructor fills its
// spelling's functions: a shared statement would otherwise call nil.
func TestSpellingsComplete(t *testing.T) {
	for name, build := range databases {
		c := build(DefaultTables, MySQLServer{}).base()
		v := reflect.ValueOf(c.spelling)
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Func && f.IsNil() {
				t.Errorf("%s: spelling.%s is not set", name, v.Type().Field(i).Name)
			}
		}
	}
}
